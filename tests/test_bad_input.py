"""Bad billing input: every broken file ends in one InputError that names the file (and the line and column
where it can), never a DuckDB exception, a UnicodeError or a traceback; the CLI turns it into one line and
exit code 2 and writes no report.

The broken files are small and live in fixtures/bad/; a few larger ones are derived in tmp_path from the public
AWS CUR sample in ../shared/samples/billing (finopsfoundation/focus_converters, MIT; see SOURCES.md there).
"""

from __future__ import annotations

import csv
import gzip
import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import InputError
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
BAD = REPO / "fixtures" / "bad"
GPU_FIXTURE = REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"

# file, line the error must name (None: no line asked for), column it must name, words it must say
CASES = [
    ("empty.csv", None, None, "empty"),
    ("cur-header-only.csv", None, None, "no billing lines"),
    ("cur-truncated.csv.gz", None, None, ""),
    ("garbage.csv", None, None, "binary"),
    ("cur-utf16.csv", 1, None, "UTF-16"),
    ("unknown-format.csv", 1, None, "not a billing export"),
    ("cur-bad-cost.csv", 4, "lineItem/UnblendedCost", "'abc'"),
    ("focus-bad-date.csv", 4, "ChargePeriodStart", "2024-13-45"),
    ("focus-bad-tags.csv", 3, "Tags", "JSON"),
    ("cur-ragged.csv", None, None, ""),
]


def load_error(path: Path, store: Store | None = None) -> InputError:
    with pytest.raises(InputError) as err:  # anything else (duckdb.Error, UnicodeError, ...) fails the test
        (store or Store()).load_billing([path])
    return err.value


def test_every_bad_fixture_has_a_case():
    # The rest of the corpus is tried in test_reliability.py, which checks that every file here has a case.
    assert {c[0] for c in CASES} | {"cur-latin1-row.csv"} <= {p.name for p in BAD.iterdir()}
    assert all(p.stat().st_size < 4096 for p in BAD.iterdir())


@pytest.mark.parametrize("name, line, column, words", CASES, ids=[c[0] for c in CASES])
def test_bad_file_gives_one_input_error(name, line, column, words):
    path = BAD / name
    e = load_error(path)
    text = str(e)
    assert name in text, text
    assert e.path == str(path)
    assert "\n" not in text, text
    assert words in text, text
    if line is not None:
        assert e.line == line, text
        assert f"{name}:{line}: " in text, text
    if column is not None:
        assert e.column == column, text
        assert repr(column) in text, text


def test_bad_cost_error_is_exactly_where_the_value_is():
    e = load_error(BAD / "cur-bad-cost.csv")
    assert (Path(e.path).name, e.line, e.column) == ("cur-bad-cost.csv", 4, "lineItem/UnblendedCost")
    # data line 3 is line 4 of the file: the header is line 1
    with open(BAD / "cur-bad-cost.csv", newline="", encoding="utf-8") as f:
        assert list(csv.reader(f))[e.line - 1][-1] == "abc"


def test_ragged_row_names_its_line():
    """A row with too many fields (line 3 of cur-ragged.csv) is named, as a bad cost is. (With DuckDB's CSV
    sniffer on, a ragged row in a file shorter than its sample gave only 'Error when sniffing file'.)"""
    e = load_error(BAD / "cur-ragged.csv")
    assert e.line == 3 and "cur-ragged.csv:3:" in str(e), f"no line for the ragged row: {str(e)!r}"


def test_unterminated_quote_names_its_line(tmp_path):
    lines = (BAD / "cur-bad-cost.csv").read_text(encoding="utf-8").replace(",abc\n", ",1.006\n").splitlines()
    lines[2] = lines[2].replace("BoxUsage", '"BoxUsage')
    path = tmp_path / "cur-open-quote.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    e = load_error(path)
    assert "cur-open-quote.csv:3:" in str(e), str(e)


def test_non_utf8_byte_in_a_data_row_is_not_blamed_on_the_header():
    """cur-latin1-row.csv has a clean UTF-8 header; line 3 holds a Latin-1 byte (caf\\xe9)."""
    path = BAD / "cur-latin1-row.csv"
    raw = path.read_bytes().split(b"\n")
    raw[0].decode("utf-8")  # the header is valid UTF-8
    assert b"\xe9" in raw[2]
    e = load_error(path)
    assert "cur-latin1-row.csv" in str(e)
    assert e.line == 3 and "header" not in str(e), (
        f"READER BUG (auditor/providers/detect.py _read_header): it decodes the first 64 KiB, not the first "
        f"line, so a bad byte on line 3 is reported as {str(e)!r}")
    assert (e.column, e.message) == ("lineItem/UsageType", "cannot read the file: byte 0xe9 is not UTF-8 text "
                                                           "(Latin-1 or Windows-1252?); save the file as UTF-8")


@pytest.mark.parametrize("gz", [False, True])
def test_a_csv_saved_as_windows_1252_names_the_column_of_its_first_accent(tmp_path, gz):
    """A spreadsheet on Windows saves a CSV as Windows-1252: the line, column and byte where it stops being UTF-8
    (after a quoted value with a comma in it: the column is the CSV's, not a split on commas)."""
    import gzip

    data = ('BilledCost,ChargePeriodStart,BillingCurrency,ResourceId\n'
            '1.5,2026-07-01T00:00:00Z,USD,"vm-1, prod"\n'
            '1.5,2026-07-01T00:00:00Z,USD,"vm, München"\n').encode("cp1252")
    path = tmp_path / ("focus.csv.gz" if gz else "focus.csv")
    path.write_bytes(gzip.compress(data) if gz else data)
    e = load_error(path)
    assert (e.line, e.column, e.message) == (3, "ResourceId", "cannot read the file: byte 0xfc is not UTF-8 text "
                                                              "(Latin-1 or Windows-1252?); save the file as UTF-8")


def test_a_line_not_utf8_that_is_not_the_header_s_columns_is_named_alone(tmp_path):
    """A value over two lines is named by its first line, where the byte is not: no column is named rather than a
    wrong one."""
    path = tmp_path / "focus.csv"
    path.write_bytes(('BilledCost,ChargePeriodStart,BillingCurrency,ResourceId\n'
                      '1.5,2026-07-01T00:00:00Z,USD,"vm,\nMünchen"\n').encode("cp1252"))
    e = load_error(path)
    assert (e.line, e.column, e.message) == (2, None, "cannot read the file: the line is not UTF-8 text (Latin-1 or "
                                                      "Windows-1252?); save the file as UTF-8")


# ---- broken files derived from the public CUR sample ------------------------------------------------------

@pytest.fixture
def cur_sample(samples) -> Path:
    return samples / "aws_cur_legacy" / "focus_converters__sample-anonymous-aws-export-dataset.csv"


def test_truncated_large_gzip(tmp_path, cur_sample):
    """Cut in half, the gzip still yields a header: the error comes from the CSV read, not the sniff."""
    data = gzip.compress(cur_sample.read_bytes())
    path = tmp_path / "cur-cut.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    e = load_error(path)
    assert "cur-cut.csv.gz" in str(e) and "\n" not in str(e)


def test_utf16_without_bom(tmp_path):
    path = tmp_path / "cur-utf16le.csv"
    path.write_bytes(GPU_FIXTURE.read_text(encoding="utf-8").encode("utf-16-le"))
    assert "cur-utf16le.csv" in str(load_error(path))


def test_empty_cost_and_empty_start_name_the_line(tmp_path):
    lines = GPU_FIXTURE.read_text(encoding="utf-8").splitlines()
    cells = next(csv.reader([lines[0]]))
    cost, start = cells.index("lineItem/UnblendedCost"), cells.index("lineItem/UsageStartDate")
    for index, what in ((cost, "cost"), (start, "start")):
        rows = [next(csv.reader([x])) for x in lines]
        rows[5][index] = ""
        path = tmp_path / f"empty-{what}.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
        e = load_error(path)
        assert e.line == 6 and f"empty-{what}.csv:6:" in str(e) and "empty" in str(e), str(e)
        # which of the two is empty: the start alone was called an empty cost
        said = "the cost is empty" if what == "cost" else "the charge period start is empty"
        assert str(e) == f"{path}:6: {said}; every billing line needs a cost and a start time"


def test_corrupt_and_foreign_parquet(tmp_path):
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1" + b"\x00garbage" * 20)
    assert "corrupt.parquet" in str(load_error(corrupt))
    foreign = tmp_path / "foreign.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 1 AS a, 2 AS b, 3 AS c) TO '{foreign}' (FORMAT parquet)")
    con.close()
    e = load_error(foreign)
    assert "foreign.parquet" in str(e) and "not a billing export" in str(e)


def test_missing_path_and_empty_folder(tmp_path):
    assert "nope.csv" in str(load_error(tmp_path / "nope.csv"))
    (tmp_path / "empty-folder").mkdir()
    (tmp_path / "empty-folder" / "README.md").write_text("no data here\n", encoding="utf-8")
    assert "empty-folder" in str(load_error(tmp_path / "empty-folder"))


def test_bad_file_in_a_folder_is_named(tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "a-good.csv").write_bytes(GPU_FIXTURE.read_bytes())
    (folder / "b-bad.csv").write_bytes((BAD / "cur-bad-cost.csv").read_bytes())
    e = load_error(folder)
    assert "b-bad.csv:4:" in str(e)


def test_failed_file_leaves_no_rows_and_the_store_usable():
    store = Store()
    load_error(BAD / "focus-bad-date.csv", store)  # two good lines precede the bad one
    assert store.lines().execute("SELECT count(*) FROM lines").fetchone()[0] == 0
    [source] = store.load_billing([GPU_FIXTURE])
    assert source.rows == 10
    assert store.lines().execute("SELECT count(*) FROM lines").fetchone()[0] == 10


# ---- the command line -------------------------------------------------------------------------------------

def _one_error_line(output: str) -> str:
    assert "Traceback" not in output, output
    errors = [x for x in output.splitlines() if x.startswith("gpu-auditor: error:")]
    assert len(errors) == 1, output
    return errors[0]


@pytest.mark.parametrize("name", ["cur-bad-cost.csv", "empty.csv", "garbage.csv", "cur-ragged.csv"])
def test_cli_inspect_bad_file(name):
    result = CliRunner().invoke(cli, ["inspect", str(BAD / name)])
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert name in line
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not an escaped exception


def test_cli_inspect_bad_cost_names_line_and_column():
    result = CliRunner().invoke(cli, ["inspect", str(BAD / "cur-bad-cost.csv")])
    line = _one_error_line(result.output)
    assert "cur-bad-cost.csv:4:" in line and "lineItem/UnblendedCost" in line


def test_cli_audit_bad_file_writes_nothing(tmp_path):
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: t\nowner: o@example.com\n", encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(out),
                                      str(BAD / "cur-bad-cost.csv")])
    assert result.exit_code == 2, result.output
    assert "cur-bad-cost.csv:4:" in _one_error_line(result.output)
    assert not (out / "audit.json").exists()
    assert not out.exists() or not any(out.iterdir())


def test_cli_inspect_json_on_the_cur_sample(cur_sample):
    result = CliRunner().invoke(cli, ["inspect", "--json", str(cur_sample)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    f = doc["files"][0]
    assert f["path"] == str(cur_sample)
    assert f["format"] == "aws-cur"
    assert f["rows"] == 1281
    total: dict[str, Decimal] = {}
    with open(cur_sample, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            cur = r["lineItem/CurrencyCode"] or "USD"
            total[cur] = total.get(cur, Decimal(0)) + Decimal(r["lineItem/UnblendedCost"])
    assert f["billed_cost"] == {k: str(v.quantize(Decimal("0.01"), ROUND_HALF_EVEN)) for k, v in total.items()}
    assert f["billed_cost"] == {"USD": "1.68"}
    assert doc["warnings"] == []


# ---- saved audits and policies: the extremes ----------------------------------------------------------------

# The corpus files that are no billing export: each tried below.
OTHER_CASES = ["audit-text-amount.json", "policy-every-error.yml",  # here
               "manifest-forged-annotation.yaml", "cur-secret-and-escape-tags.csv"]  # test_security.py
DEMO = REPO / "fixtures" / "demo"


def _lines_exit_2(result) -> list[str]:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith("gpu-auditor: error: ") for line in lines), result.stderr
    return lines


def _uses_of_a_saved_audit(saved: Path, tmp_path: Path) -> list[list[str]]:
    """Every command that reads a saved audit.json: `report`, `audit --previous`, `audit --baseline`, `email`."""
    audit = ["audit", "-q", "--policy", str(DEMO / "policy.yml"), "--inventory", str(DEMO / "inventory.json"),
             "--quarter", "2026-Q3", "--out", str(tmp_path / "out")]
    return [["report", str(saved), "--format", "md"], ["report", str(saved), "--out", str(tmp_path / "out")],
            [*audit, "--previous", str(saved), str(DEMO / "billing")],
            [*audit, "--baseline", str(saved), str(DEMO / "billing")],
            ["email", "--policy", str(DEMO / "policy.yml"), "--dry-run", "--outbox", str(tmp_path / "out"), str(saved)]]


def test_a_saved_audit_with_a_text_amount_is_one_line_naming_file_and_json_path(tmp_path):
    """It was `decimal.ConversionSyntax`, an internal error, in all four commands."""
    saved = BAD / "audit-text-amount.json"
    for args in _uses_of_a_saved_audit(saved, tmp_path):
        assert _lines_exit_2(CliRunner().invoke(cli, args)) == [
            f'gpu-auditor: error: {saved}: findings[0].monthly_savings: "a lot" is not an amount (a decimal number '
            'like 12.34)'], args[0]
        assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize(("where", "value", "words"), [
    (("summary", "billed_cost", "USD"), "1,234.50", '"1,234.50" is not an amount'),
    (("summary", "billed_cost", "USD"), "NaN", '"NaN" is not an amount'),
    (("summary", "billed_cost", "USD"), "1e30", '"1e30" is out of range'),
    (("summary", "billed_cost"), "100", 'expected object, found text "100"'),
    (("findings", 0, "cost"), {"USD": 1}, '{"USD": 1} is not an amount'),
    (("findings", 0), "i-0abc", 'expected object, found text "i-0abc"'),
])
def test_every_amount_of_a_saved_audit_is_checked(tmp_path, where, value, words):
    doc = json.loads((BAD / "audit-text-amount.json").read_text(encoding="utf-8"))
    doc["findings"][0]["monthly_savings"] = "1.00"
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    saved = tmp_path / "audit.json"
    saved.write_text(json.dumps(doc), encoding="utf-8")
    path = ".".join(str(k) for k in where).replace(".0", "[0]")
    for args in _uses_of_a_saved_audit(saved, tmp_path):
        assert _lines_exit_2(CliRunner().invoke(cli, args)) == [f"gpu-auditor: error: {saved}: {path}: {words}" + (
            " (a decimal number like 12.34)" if "not an amount" in words else
            ": an amount has at most 20 digits before the point" if "range" in words else "")], args[0]


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_a_saved_audit_nested_deeply_is_one_line(tmp_path, depth):
    """It was a RecursionError at 100,000 levels (json), and in the renderers at 1,000."""
    saved = tmp_path / "audit.json"
    saved.write_text('{"schema": "gpu-auditor/audit@1", "window": {}, "summary": {}, "policy": {}, "findings": ['
                     + "[" * depth + "]" * depth + "]}", encoding="utf-8")
    for args in _uses_of_a_saved_audit(saved, tmp_path):
        assert _lines_exit_2(CliRunner().invoke(cli, args)) == [
            f"gpu-auditor: error: {saved}: not an audit: nested more than 64 levels deep"], args[0]


def test_policy_validate_names_every_error_with_its_line():
    """It stopped at the first; the budget of 1e26 passed and failed the audit later with InvalidOperation;
    lead and owner addresses were not checked until an e-mail was sent."""
    policy = BAD / "policy-every-error.yml"
    result = CliRunner().invoke(cli, ["policy", "validate", str(policy)])
    out_of_range = "is out of range: an amount has at most 20 digits before the decimal point (amounts are " \
                   "DECIMAL(38,18))"
    assert _lines_exit_2(result) == [f"gpu-auditor: error: {policy}:{line}" for line in [
        "3: owner: 'finops@example.com, cfo@example.com' holds more than one address, or a name; give one "
        "address like lead@example.com",
        f"5: teams.vision.budget_per_quarter: 100000000000000000000000000 {out_of_range}",
        "5: teams.vision.lead: 'lead-vision@example.com\\nBcc: evil@attacker.example' has a line break or a "
        "control character",
        "6: teams.nlp.budget_per_quarter: must be at least 0, got -5",
        "6: teams.nlp.lead: 'nlp-lead' is not an email address like lead@example.com",
        "7: teams.rl.budget_per_quarter: expected a finite number, got nan",
        f"8: teams.speech.budget_per_quarter: 1e+26 {out_of_range}",
        "10: clauses.idle.min_hour: unknown key 'min_hour'; did you mean 'min_hours'?",
        "10: clauses.idle.max_mean_util_pct: expected a number, got text 'ten'",
        "12: waivers[0].expires: expected a date like 2027-01-31, got '2027-02-30'",
        "12: waivers[0].rule: no rule 'GPU999'",
    ]]


@pytest.mark.parametrize(("budget", "words"), [
    ("99999999999999999999.99", None), ("100000000000000000000", "is out of range"),
    ("1.0e+26", "is out of range"), ("-0.01", "must be at least 0"), (".inf", "expected a finite number"),
    ("-.inf", "expected a finite number"), (".NaN", "expected a finite number"),
])
def test_a_budget_is_what_decimal_38_18_holds(tmp_path, budget, words):
    policy = tmp_path / "policy.yml"
    policy.write_text(f"policy: p\nowner: finops@example.com\nteams:\n  vision:\n    lead: lead@example.com\n"
                      f"    budget_per_quarter: {budget}\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["policy", "validate", str(policy)])
    if words is None:
        assert result.exit_code == 0, result.output
        return
    (line,) = _lines_exit_2(result)
    assert line.startswith(f"gpu-auditor: error: {policy}:6: teams.vision.budget_per_quarter: ") and words in line


@pytest.mark.parametrize(("lead", "words"), [
    ("lead@example.com", None), ('"a@example.com, b@example.com"', "more than one address"),
    ('"a@example.com b@example.com"', "more than one address"), ('"Vision Lead <a@example.com>"', "or a name"),
    ('"a@example.com\\r\\nBcc: x@example.com"', "line break"), ("a@@example.com", "more than one address"),
    ('"@example.com"', "not an email address"), ("a@localhost", "not an email address"), ("alice", "not an email"),
])
def test_lead_and_owner_are_one_address_each(tmp_path, lead, words):
    for owner, team_lead, line, key in (("finops@example.com", lead, 5, "teams.vision.lead"),
                                        (lead, "lead@example.com", 2, "owner")):
        policy = tmp_path / "policy.yml"
        policy.write_text(f"policy: p\nowner: {owner}\nteams:\n  vision:\n    lead: {team_lead}\n", encoding="utf-8")
        result = CliRunner().invoke(cli, ["policy", "validate", str(policy)])
        if words is None:
            assert result.exit_code == 0, result.output
            continue
        (error,) = _lines_exit_2(result)
        assert error.startswith(f"gpu-auditor: error: {policy}:{line}: {key}: ") and words in error, error


# ---- wrong-typed columns: refused from the file's schema, never summed --------------------------------------

FOCUS_ROW = {"BilledCost": "1.5", "BillingCurrency": "'USD'", "ChargePeriodStart": "TIMESTAMP '2026-07-01 00:00:00'",
             "ChargePeriodEnd": "TIMESTAMP '2026-07-01 01:00:00'", "ChargeCategory": "'Usage'",
             "ProviderName": "'AWS'", "ResourceId": "'i-1'", "Tags": "'{}'"}


def _focus_file(path: Path, **override: str) -> Path:
    select = ", ".join(f"{v} AS {k}" for k, v in {**FOCUS_ROW, **override}.items())
    fmt = "PARQUET" if path.suffix == ".parquet" else "JSON"
    duckdb.connect().execute(f"COPY (SELECT {select} FROM range(3)) TO '{path}' (FORMAT {fmt})")
    return path


@pytest.mark.parametrize(("column", "value", "found", "reads_as"), [
    ("BilledCost", "true", "BOOLEAN", "a number (or text holding one)"),
    ("BilledCost", "DATE '2026-01-01'", "DATE", "a number (or text holding one)"),
    ("BilledCost", "[1.5]", "DECIMAL(2,1)[]", "a number (or text holding one)"),
    ("ChargePeriodStart", "true", "BOOLEAN", "a timestamp (or text holding an ISO-8601 time)"),
    ("ChargePeriodStart", "42", "INTEGER", "a timestamp (or text holding an ISO-8601 time)"),
    ("ResourceId", "['i-1', 'i-2']", "VARCHAR[]", "text (an id, a name or a value)"),
    ("ResourceId", "{'id': 'i-1'}", "STRUCT(id VARCHAR)", "text (an id, a name or a value)"),
])
def test_a_column_of_the_wrong_type_is_refused_naming_file_column_and_type(tmp_path, column, value, found, reads_as):
    """A BOOLEAN cost column was read as $1 a line: `inspect` said "billed $9,999.00", `audit` exited 0."""
    path = _focus_file(tmp_path / "focus.parquet", **{column: value})
    for args in (["inspect", str(path)], ["audit", "-q", "--policy", str(DEMO / "policy.yml"), "--out",
                                          str(tmp_path / "out"), str(path)]):
        assert _lines_exit_2(CliRunner().invoke(cli, args)) == [
            f"gpu-auditor: error: {path}: column {column!r}: the column is of type {found}; gpu-auditor reads it as "
            f"{reads_as}"], args[0]
    assert not (tmp_path / "out").exists()


def test_wrong_types_are_named_all_at_once_in_json_too(tmp_path):
    path = _focus_file(tmp_path / "focus.json", BilledCost="true", ChargePeriodEnd="false")
    lines = _lines_exit_2(CliRunner().invoke(cli, ["inspect", str(path)]))
    assert [line.split(": ", 3)[2] for line in lines] == [str(path)] * 2, lines
    assert [line.split(": ", 4)[3] for line in lines] == ["column 'BilledCost'", "column 'ChargePeriodEnd'"], lines
    assert all("of type BOOLEAN" in line for line in lines)


@pytest.mark.parametrize(("column", "value"), [("BilledCost", "CAST(1.5 AS DOUBLE)"), ("BilledCost", "'1.5'"),
                                               ("BilledCost", "CAST(2 AS BIGINT)"), ("ChargePeriodStart",
                                                                                     "'2026-07-01T00:00:00Z'"),
                                               ("ChargePeriodStart", "DATE '2026-07-01'"),
                                               ("ResourceId", "CAST(12345 AS BIGINT)")])
def test_the_types_a_reader_accepts_are_read(tmp_path, column, value):
    path = _focus_file(tmp_path / "focus.parquet", **{column: value})
    result = CliRunner().invoke(cli, ["inspect", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["files"][0]["rows"] == 3


@pytest.mark.parametrize(("column", "value", "said"), [
    # a Parquet or JSON file written from a spreadsheet or a CSV holds every column as text, and "" where a CSV
    # leaves a value empty: no value, as in a CSV (it was "'' is not a number")
    ("BilledCost", "CASE WHEN range = 1 THEN '' ELSE '1.5' END", "2: the cost is empty"),
    ("ChargePeriodStart", "CASE WHEN range = 2 THEN ' ' ELSE '2026-07-01T00:00:00Z' END",
     "3: the charge period start is empty"),
    # NaN in a DOUBLE column: DuckDB's words named no line ("Could not cast value nan to DECIMAL(38,18)")
    ("BilledCost", "CASE WHEN range = 1 THEN 'nan'::DOUBLE ELSE 1.5 END",
     "2: column 'BilledCost': 'nan' is not a number"),
])
def test_an_empty_or_nan_amount_in_parquet_names_its_line(tmp_path, column, value, said):
    path = _focus_file(tmp_path / "focus.parquet", **{column: value})
    assert str(load_error(path)).startswith(f"{path}:{said}")


def test_a_parquet_file_of_text_columns_reads_empty_text_as_no_value(tmp_path):
    """Every column VARCHAR, the optional amounts and times "" on every line: read, each line's cost exactly."""
    path = _focus_file(tmp_path / "focus.parquet", BilledCost="'1.25'", EffectiveCost="''", ListCost="' '",
                       ChargePeriodStart="'2026-07-01T00:00:00Z'", ChargePeriodEnd="''")
    result = CliRunner().invoke(cli, ["inspect", "--json", str(path)])
    assert result.exit_code == 0, result.output
    (figures,) = json.loads(result.stdout)["files"]
    assert figures["rows"] == 3 and figures["billed_cost"] == {"USD": "3.75"}

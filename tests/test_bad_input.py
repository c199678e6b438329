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

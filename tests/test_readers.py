"""The billing readers against real public exports.

Totals are reconciled to the cent with an independent sum (Python's csv module and Decimal over the export's own
cost column), through every container and column spelling the readers accept; format detection; and the
classification of transfer, GPU and commitment lines.

The samples are read in place through the `samples` fixture (tests/conftest.py: ../shared/samples/billing unless
GPU_AUDITOR_SAMPLES says otherwise; SOURCES.md there names the repository, commit and licence of each): the AWS
CUR sample is from finopsfoundation/focus_converters (MIT), the FOCUS 1.0 sample from
FinOps-Open-Cost-and-Usage-Spec/FOCUS-Sample-Data (CC BY 4.0), the FOCUS 1.2 column list from
microsoft/finops-toolkit (MIT). fixtures/billing/cur-gpu-spot.csv is hand-written for these tests.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from auditor.errors import InputError
from auditor.providers.billing.detect import detect_format
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
CUR = "aws_cur_legacy/focus_converters__sample-anonymous-aws-export-dataset.csv"
FOCUS = "focus/FOCUS-Sample-Data__FOCUS-1.0__focus_sample.csv"
FOCUS_12_SCHEMA = "focus/schema/finops-toolkit__FocusCost_1.2-preview.json"
FOCUS_10_SCHEMA = "focus/schema/finops-toolkit__FocusCost_1.0.json"
GPU_FIXTURE = REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"

TEN = Decimal("1e-10")
D = Decimal


# ---- independent reading ----------------------------------------------------------------------------------

def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    return list(reader.fieldnames or []), rows


def independent_total(path: Path, cost: str, currency: str, nulls: tuple[str, ...] = ("",),
                      default_currency: str | None = None) -> dict[str, Decimal]:
    """The export's own cost column summed per currency, without DuckDB."""
    out: dict[str, Decimal] = {}
    for row in read_csv(path)[1]:
        value = row[cost].strip()
        if value in nulls:
            continue
        cur = row[currency].strip() or default_currency
        out[cur] = out.get(cur, D(0)) + D(value)
    return out


def q10(amounts: dict[str, Decimal]) -> dict[str, Decimal]:
    return {k: D(v).quantize(TEN) for k, v in amounts.items()}


def snake(column: str) -> str:
    """`lineItem/UnblendedCost` -> `line_item_unblended_cost`, as Athena-ready CUR exports spell columns."""
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", column).replace("/", "_").replace(":", "_").lower()


def store_totals(store: Store) -> tuple[dict[str, Decimal], dict[str, Decimal], int]:
    rows = store.lines().execute("SELECT BillingCurrency, sum(BilledCost), sum(EffectiveCost) FROM lines "
                             "GROUP BY ALL").fetchall()
    count = store.lines().execute("SELECT count(*) FROM lines").fetchone()[0]
    return {c: b for c, b, _ in rows}, {c: e for c, _, e in rows}, count


def sum_stats(sources, key: str) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for s in sources:
        for cur, amount in s.stats[key].items():
            out[cur] = out.get(cur, D(0)) + amount
    return out


@dataclass(frozen=True)
class Sample:
    """A public sample export as Python's csv module reads it, with its cost column summed independently."""

    path: Path
    header: list[str]
    rows: list[dict[str, str]]
    billed: dict[str, Decimal]
    effective: dict[str, Decimal]


@pytest.fixture(scope="module")
def cur(samples) -> Sample:
    path = samples / CUR
    billed = independent_total(path, "lineItem/UnblendedCost", "lineItem/CurrencyCode", default_currency="USD")
    return Sample(path, *read_csv(path), billed, billed)


@pytest.fixture(scope="module")
def focus(samples) -> Sample:
    path = samples / FOCUS
    return Sample(path, *read_csv(path), independent_total(path, "BilledCost", "BillingCurrency", nulls=("", "NULL")),
                  independent_total(path, "EffectiveCost", "BillingCurrency", nulls=("", "NULL")))


@pytest.fixture(scope="module")
def cur_store(cur):
    store = Store()
    return store, store.load_file(cur.path)


@pytest.fixture(scope="module")
def focus_store(focus):
    store = Store()
    return store, store.load_file(focus.path)


@pytest.fixture(scope="module")
def gpu_store():
    store = Store()
    return store, store.load_file(GPU_FIXTURE)


# ---- reconciliation to the cent ---------------------------------------------------------------------------

def test_samples_are_where_sources_md_says(samples, cur, focus):
    assert (samples / "SOURCES.md").is_file()
    assert len(cur.rows) == 1281 and len(focus.rows) == 1000
    assert set(cur.billed) == {"USD"} and set(focus.billed) == {"USD"}


def test_cur_sample_reconciles_to_the_cent(cur_store, cur):
    _, source = cur_store
    assert source.format == "aws-cur"
    assert source.rows == len(cur.rows) == source.stats["rows"] == 1281
    assert q10(source.stats["billed_cost"]) == q10(cur.billed)
    # Only Usage and Tax lines: amortised cost is the unblended cost, line for line.
    assert {r["lineItem/LineItemType"] for r in cur.rows} == {"Usage", "Tax"}
    assert q10(source.stats["effective_cost"]) == q10(cur.billed)
    # List cost: the public on-demand cost, or the unblended cost where a line has none.
    listed: dict[str, Decimal] = {}
    for r in cur.rows:
        cur = r["lineItem/CurrencyCode"] or "USD"
        listed[cur] = listed.get(cur, D(0)) + D(r["pricing/publicOnDemandCost"] or r["lineItem/UnblendedCost"])
    assert q10(source.stats["list_cost"]) == q10(listed)


def test_cur_sample_effective_equals_unblended_on_every_line(cur_store):
    store, _ = cur_store
    differ = store.lines().execute("SELECT count(*) FROM lines WHERE EffectiveCost IS DISTINCT FROM BilledCost"
                               ).fetchone()[0]
    assert differ == 0


@pytest.mark.heavy
def test_focus_sample_reconciles_to_the_cent(focus_store, focus):
    _, source = focus_store
    assert source.format == "focus-1.0"
    assert source.rows == len(focus.rows) == source.stats["rows"] == 1000
    assert q10(source.stats["billed_cost"]) == q10(focus.billed)
    assert q10(source.stats["effective_cost"]) == q10(focus.effective)
    assert q10(source.stats["list_cost"]) == q10(independent_total(focus.path, "ListCost", "BillingCurrency",
                                                                   nulls=("", "NULL")))
    assert focus.billed != focus.effective  # the two columns really are read separately


# ---- the same totals through every container and spelling -------------------------------------------------

def _rewrite_cur(cur: Sample, tmp_path: Path, name: str, header=lambda h: h, data: bytes | None = None) -> Path:
    text = cur.path.read_text(encoding="utf-8")
    first, rest = text.split("\n", 1)
    cols = next(csv.reader([first]))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([header(c) for c in cols])
    path = tmp_path / name
    path.write_bytes(data if data is not None else (out.getvalue() + rest).encode("utf-8"))
    return path


def _cur_variant(cur: Sample, kind: str, tmp_path: Path) -> list[Path]:
    raw = cur.path.read_bytes()
    if kind == "snake_case":
        return [_rewrite_cur(cur, tmp_path, "cur-snake.csv", snake)]
    if kind == "gzip":
        return [_rewrite_cur(cur, tmp_path, "cur.csv.gz", data=gzip.compress(raw))]
    if kind == "gzip named .csv":
        return [_rewrite_cur(cur, tmp_path, "cur.csv", data=gzip.compress(raw))]
    if kind == "named .txt":
        return [_rewrite_cur(cur, tmp_path, "cur-export.txt", data=raw)]
    if kind == "utf-8 bom":
        return [_rewrite_cur(cur, tmp_path, "cur-bom.csv", data=b"\xef\xbb\xbf" + raw)]
    if kind == "crlf":
        return [_rewrite_cur(cur, tmp_path, "cur-crlf.csv", data=raw.replace(b"\n", b"\r\n"))]
    if kind == "3 parts in a folder":
        header, body = raw.split(b"\n", 1)
        lines = body.splitlines(keepends=True)
        folder = tmp_path / "cur-report" / "20231101-20231201"
        folder.mkdir(parents=True)
        cut = [0, 400, 900, len(lines)]
        for i in range(3):
            part = folder / f"cur-report-{i + 1:05d}.csv"
            part.write_bytes(header + b"\n" + b"".join(lines[cut[i]:cut[i + 1]]))
        return [tmp_path / "cur-report"]
    raise AssertionError(kind)


CUR_VARIANTS = ["snake_case", "gzip", "gzip named .csv", "named .txt", "utf-8 bom", "crlf", "3 parts in a folder"]


@pytest.mark.heavy
@pytest.mark.parametrize("kind", CUR_VARIANTS)
def test_cur_sample_same_totals_in_every_form(kind, tmp_path, cur):
    paths = _cur_variant(cur, kind, tmp_path)
    store = Store()
    sources = store.load_billing(paths)
    assert all(s.format == "aws-cur" for s in sources), [s.format for s in sources]
    assert len(sources) == (3 if kind == "3 parts in a folder" else 1)
    assert sum(s.rows for s in sources) == len(cur.rows)
    assert q10(sum_stats(sources, "billed_cost")) == q10(cur.billed)
    assert q10(sum_stats(sources, "effective_cost")) == q10(cur.billed)
    billed, effective, count = store_totals(store)
    assert count == len(cur.rows)
    assert q10(billed) == q10(cur.billed) and q10(effective) == q10(cur.billed)
    # Every file numbers its own lines from 2 (line 1 is its header).
    for s in sources:
        lo, hi, n = store.lines().execute("SELECT min(x_SourceRow), max(x_SourceRow), count(DISTINCT x_SourceRow) "
                                      "FROM lines WHERE x_SourceFile = ?", [s.path]).fetchone()
        assert (lo, hi, n) == (2, s.rows + 1, s.rows)


def test_cur_report_folder_with_its_manifest(tmp_path, cur):
    """AWS delivers a CUR as <report>/<period>/<report>-Manifest.json next to the data files; the manifest
    describes the report and holds no billing lines."""
    [folder] = _cur_variant(cur, "3 parts in a folder", tmp_path)
    period = folder / "20231101-20231201"
    manifest = {
        "assemblyId": "20231201T000000Z-0000", "account": "123412340534", "bucket": "cur-bucket",
        "reportId": "abc", "reportName": "cur-report", "compression": "GZIP", "contentType": "text/csv",
        "billingPeriod": {"start": "20231101T000000.000Z", "end": "20231201T000000.000Z"},
        "columns": [{"category": "lineItem", "name": "UnblendedCost", "type": "BigDecimal"}],
        "reportKeys": [f"cur-report/20231101-20231201/cur-report-{i:05d}.csv" for i in (1, 2, 3)],
    }
    (period / "cur-report-Manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    store = Store()
    try:
        sources = store.load_billing([folder])
    except InputError as e:
        pytest.fail(f"READER BUG (auditor/providers/detect.py expand/DATA_SUFFIXES): a CUR report folder fails "
                    f"because its <report>-Manifest.json is taken for a billing file: {e}")
    assert sorted(Path(s.path).name for s in sources) == [f"cur-report-{i:05d}.csv" for i in (1, 2, 3)], (
        f"the CUR manifest was read as billing data: {[(s.path, s.format) for s in sources]}")
    assert q10(sum_stats(sources, "billed_cost")) == q10(cur.billed)


@pytest.mark.heavy
def test_cur_snake_case_classifies_like_the_legacy_spelling(cur_store, cur, tmp_path):
    legacy, _ = cur_store
    store = Store()
    store.load_billing([_rewrite_cur(cur, tmp_path, "cur-snake.csv", snake)])
    sql = ("SELECT x_SourceRow, x_CostCategory, x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo, "
           "x_UsageType, RegionId, ServiceName, ChargeCategory, BilledCost FROM lines ORDER BY x_SourceRow")
    assert store.lines().execute(sql).fetchall() == legacy.lines().execute(sql).fetchall()


def _focus_parquet(focus: Sample, tmp_path: Path, kind: str) -> Path:
    out = tmp_path / f"focus-{kind}.parquet"
    src = str(focus.path).replace("'", "''")
    read = f"read_csv('{src}', header = true, all_varchar = true, nullstr = 'NULL')"
    select = {
        "varchar": "SELECT * FROM {r}",
        "typed money": "SELECT * REPLACE (CAST(BilledCost AS DECIMAL(38,12)) AS BilledCost, "
                       "CAST(EffectiveCost AS DECIMAL(38,12)) AS EffectiveCost, "
                       "CAST(ListCost AS DECIMAL(38,12)) AS ListCost) FROM {r}",
        "typed money and times": "SELECT * REPLACE (CAST(BilledCost AS DECIMAL(38,12)) AS BilledCost, "
                                 "CAST(EffectiveCost AS DECIMAL(38,12)) AS EffectiveCost, "
                                 "CAST(ChargePeriodStart AS TIMESTAMP) AS ChargePeriodStart, "
                                 "CAST(ChargePeriodEnd AS TIMESTAMP) AS ChargePeriodEnd) FROM {r}",
    }[kind].format(r=read)
    con = duckdb.connect()
    con.execute(f"COPY ({select}) TO '{str(out).replace(chr(39), chr(39) * 2)}' (FORMAT parquet)")
    con.close()
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["varchar", "typed money", "typed money and times"])
def test_focus_sample_as_parquet_same_totals(kind, tmp_path, focus_store, focus):
    path = _focus_parquet(focus, tmp_path, kind)
    assert path.read_bytes()[:4] == b"PAR1"
    store = Store()
    [source] = store.load_billing([path])
    assert source.format == "focus-1.0"
    assert source.rows == len(focus.rows)
    assert q10(source.stats["billed_cost"]) == q10(focus.billed)
    assert q10(source.stats["effective_cost"]) == q10(focus.effective)
    # Parquet rows are numbered from 1, in file order, and classify exactly as the CSV does.
    lo, hi = store.lines().execute("SELECT min(x_SourceRow), max(x_SourceRow) FROM lines").fetchone()
    assert (lo, hi) == (1, len(focus.rows))
    csv_store, _ = focus_store
    sql = ("SELECT x_SourceRow - {d}, BilledCost, EffectiveCost, ChargePeriodStart, ChargeDescription, "
           "x_CostCategory, x_GpuModel, x_TransferKind, x_TransferFrom, x_TransferTo, Tags FROM lines ORDER BY 1")
    assert store.lines().execute(sql.format(d=0)).fetchall() == csv_store.lines().execute(sql.format(d=1)).fetchall()


# ---- format detection -------------------------------------------------------------------------------------

def _schema_columns(path: Path) -> list[str]:
    return [c["ColumnName"] for c in json.loads(path.read_text(encoding="utf-8"))["Columns"]]


SAMPLE_COLUMNS = {
    "cur-legacy": (lambda s: read_csv(s / CUR)[0], "aws-cur"),
    "cur-snake-case": (lambda s: [snake(c) for c in read_csv(s / CUR)[0]], "aws-cur"),
    "focus-1.0-sample": (lambda s: read_csv(s / FOCUS)[0], "focus-1.0"),
    "focus-1.2-microsoft": (lambda s: _schema_columns(s / FOCUS_12_SCHEMA), "focus-1.2"),
}


@pytest.mark.parametrize("name", SAMPLE_COLUMNS)
def test_detect_format_of_the_samples(name, samples):
    columns_of, expected = SAMPLE_COLUMNS[name]
    columns = columns_of(samples)
    assert detect_format(columns) == expected
    assert detect_format(tuple(columns)) == expected


@pytest.mark.parametrize("columns, expected", [
    pytest.param(["lineItem/UnblendedCost", "lineItem/UsageStartDate"], "aws-cur", id="cur-minimal"),
    pytest.param(["a", "b", "c"], None, id="unknown"),
    pytest.param([], None, id="empty"),
    pytest.param(["lineItem/UnblendedCost"], None, id="cur-without-usage-start"),
])
def test_detect_format(columns, expected):
    assert detect_format(columns) == expected
    assert detect_format(tuple(columns)) == expected


def test_snake_case_helper(cur):
    assert "lineItem/UnblendedCost" in cur.header
    assert snake("lineItem/UnblendedCost") == "line_item_unblended_cost"
    assert snake("lineItem/UsageType") == "line_item_usage_type"
    assert snake("resourceTags/user:team") == "resource_tags_user_team"


def test_detect_microsoft_focus_10_export_as_focus_10(samples):
    """Microsoft's FOCUS 1.0 export (its own column list, FocusVersion 1.0) carries BillingAccountType and
    SubAccountType, which detect.py takes as FOCUS 1.2 markers."""
    doc = json.loads((samples / FOCUS_10_SCHEMA).read_text(encoding="utf-8"))
    assert doc["FocusVersion"] == "1.0"
    columns = [c["ColumnName"] for c in doc["Columns"]]
    got = detect_format(columns)
    assert got == "focus-1.0", (
        f"READER BUG (auditor/providers/detect.py FOCUS_12): Microsoft's FOCUS 1.0 export column list "
        f"({Path(FOCUS_10_SCHEMA).name}) is detected as {got!r}; 'BillingAccountType'/'SubAccountType' are in "
        "Microsoft's 1.0 export, so they do not mark FOCUS 1.2")


# ---- CUR sample: source rows and transfer classification --------------------------------------------------

@pytest.mark.heavy
def test_cur_source_rows_follow_the_file(cur_store, cur):
    store, _ = cur_store
    rows = cur.rows
    lo, hi, n = store.lines().execute("SELECT min(x_SourceRow), max(x_SourceRow), count(DISTINCT x_SourceRow) "
                                  "FROM lines").fetchone()
    assert (lo, hi, n) == (2, len(rows) + 1, len(rows))  # header is line 1; consecutive, no gaps
    got = store.lines().execute("SELECT x_SourceRow, x_UsageType, BilledCost, ChargeDescription, ChargePeriodStart "
                            "FROM lines ORDER BY x_SourceRow").fetchall()
    for line, usage_type, billed, desc, start in got:
        r = rows[line - 2]
        assert (usage_type or "", billed, desc or "") == \
            (r["lineItem/UsageType"], D(r["lineItem/UnblendedCost"]), r["lineItem/LineItemDescription"]), line
        assert start.strftime("%Y-%m-%dT%H:%M:%S") == r["lineItem/UsageStartDate"][:19], line
    # A few lines picked by their line item id, as a person would look them up in the export.
    by_id = {r["identity/LineItemId"]: i + 2 for i, r in enumerate(rows)}
    for item_id in (rows[0]["identity/LineItemId"], rows[640]["identity/LineItemId"], rows[-1]["identity/LineItemId"]):
        r = rows[by_id[item_id] - 2]
        got = store.lines().execute("SELECT x_UsageType, BilledCost, ChargeDescription FROM lines "
                                    "WHERE x_SourceRow = ?", [by_id[item_id]]).fetchone()
        assert got == (r["lineItem/UsageType"] or None, D(r["lineItem/UnblendedCost"]),
                       r["lineItem/LineItemDescription"]), item_id
    assert by_id[rows[0]["identity/LineItemId"]] == 2


@pytest.mark.heavy
def test_source_rows_keep_file_order_in_a_large_file(tmp_path, cur):
    """Line numbers come from row_number() over a parallel scan; check them on ~26k lines."""
    header, rows = cur.header, cur.rows
    out = io.StringIO()
    w = csv.DictWriter(out, header, lineterminator="\n")
    w.writeheader()
    n = 0
    for _ in range(20):
        for r in rows:
            n += 1
            w.writerow({**r, "lineItem/LineItemDescription": f"line {n + 1}"})
    path = tmp_path / "big.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    store = Store()
    store.load_file(path)
    wrong = store.lines().execute("SELECT count(*), min(x_SourceRow) FROM lines "
                              "WHERE ChargeDescription <> 'line ' || x_SourceRow").fetchone()
    assert wrong[0] == 0, f"{wrong[0]} lines carry the wrong x_SourceRow, first at {wrong[1]}"
    assert store.lines().execute("SELECT count(*) FROM lines").fetchone()[0] == n


def _cur_rows_where(cur: Sample, predicate) -> list[int]:
    return [i + 2 for i, r in enumerate(cur.rows) if predicate(r)]


@pytest.mark.heavy
def test_cur_transfer_lines_are_the_ones_with_a_transfer_type(cur_store, cur):
    store, _ = cur_store
    expected = _cur_rows_where(cur, lambda r: r["product/transferType"] != "")
    assert len(expected) >= 424
    got = [r[0] for r in store.lines().execute("SELECT x_SourceRow FROM lines WHERE x_TransferKind IS NOT NULL "
                                           "ORDER BY 1").fetchall()]
    assert got == expected
    cats = store.lines().execute("SELECT DISTINCT x_CostCategory FROM lines WHERE x_TransferKind IS NOT NULL"
                             ).fetchall()
    assert cats == [("transfer",)]
    dirs = store.lines().execute("SELECT count(*) FROM lines WHERE x_TransferKind IS NOT NULL "
                             "AND x_TransferDirection NOT IN ('in', 'out')").fetchone()[0]
    assert dirs == 0


def _classes(store: Store, where: str, params: list) -> Counter:
    return Counter(store.lines().execute(
        f"SELECT x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo FROM lines WHERE {where}",
        params).fetchall())


def test_cur_inter_region_out(cur_store, cur):
    store, _ = cur_store
    n = len(_cur_rows_where(cur, lambda r: r["lineItem/UsageType"] == "USE1-USW2-AWS-Out-Bytes"))
    assert n == 11
    got = _classes(store, "x_UsageType = ?", ["USE1-USW2-AWS-Out-Bytes"])
    assert got == Counter({("inter_region", "out", "us-east-1", "us-west-2"): n})


def test_cur_internet_out(cur_store, cur):
    store, _ = cur_store
    n = len(_cur_rows_where(cur, lambda r: r["lineItem/UsageType"] == "USW2-DataTransfer-Out-Bytes"))
    got = _classes(store, "x_UsageType = ?", ["USW2-DataTransfer-Out-Bytes"])
    assert [(k[0], k[1]) for k in got] == [("internet", "out")] and sum(got.values()) == n == 21


def test_cur_inter_zone(cur_store, cur):
    store, _ = cur_store
    expected = _cur_rows_where(cur, lambda r: "-xAZ-" in r["lineItem/UsageType"]
                               or r["lineItem/UsageType"].endswith("DataTransfer-Regional-Bytes"))
    assert len(expected) == 8
    got = store.lines().execute("SELECT x_SourceRow, x_TransferKind FROM lines WHERE x_UsageType LIKE '%-xAZ-%' "
                            "OR x_UsageType LIKE '%DataTransfer-Regional-Bytes' ORDER BY 1").fetchall()
    assert got == [(line, "inter_zone") for line in expected]


def test_cur_inbound_lines(cur_store, cur):
    store, _ = cur_store
    expected = _cur_rows_where(cur, lambda r: r["lineItem/UsageType"].endswith("-AWS-In-Bytes"))
    got = store.lines().execute("SELECT x_SourceRow, x_TransferKind, x_TransferDirection FROM lines "
                            "WHERE x_UsageType LIKE '%-AWS-In-Bytes' ORDER BY 1").fetchall()
    assert got == [(line, "inter_region", "in") for line in expected] and len(expected) == 46
    # Every line whose usage type says In is inbound, whatever its kind.
    assert store.lines().execute("SELECT count(*) FROM lines WHERE x_UsageType LIKE '%-In-Bytes' "
                             "AND x_TransferDirection IS DISTINCT FROM 'in'").fetchone()[0] == 0


def test_cur_non_transfer_lines_carry_no_transfer_columns(cur_store):
    """x_TransferFrom/x_TransferTo describe a transfer; on S3 requests or Glue jobs they must be NULL (the
    FOCUS reader gates them on x_TransferKind; the CUR reader does not)."""
    store, _ = cur_store
    bad = store.lines().execute(
        "SELECT count(*), any_value(x_UsageType), any_value(x_TransferFrom) FROM lines "
        "WHERE x_TransferKind IS NULL AND (x_TransferDirection IS NOT NULL OR x_TransferFrom IS NOT NULL "
        "OR x_TransferTo IS NOT NULL)").fetchone()
    assert bad[0] == 0, (
        f"READER BUG (auditor/providers/aws.py transfer_from): {bad[0]} non-transfer CUR lines get a transfer "
        f"endpoint, e.g. usage type {bad[1]!r} -> x_TransferFrom {bad[2]!r} (from the usage-type prefix)")


# ---- FOCUS sample: GPU rows, inter-region rows, tags -----------------------------------------------------

def _focus_lines(focus: Sample, predicate) -> list[int]:
    return [i + 2 for i, r in enumerate(focus.rows) if predicate(r)]


def independent_total_where(focus: Sample, predicate) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for r in focus.rows:
        if predicate(r):
            out[r["BillingCurrency"]] = out.get(r["BillingCurrency"], D(0)) + D(r["BilledCost"])
    return out


def test_focus_g5_rows_are_gpu_compute(focus_store, focus):
    store, _ = focus_store
    lines = _focus_lines(focus, lambda r: "g5.4xlarge" in r["ChargeDescription"])
    assert len(lines) == 8
    got = store.lines().execute(
        "SELECT x_SourceRow, x_CostCategory, x_InstanceType, x_GpuModel, x_GpuCount, x_Provider FROM lines "
        "WHERE ChargeDescription LIKE '%g5.4xlarge%' ORDER BY 1").fetchall()
    assert got == [(line, "gpu_compute", "g5.4xlarge", "A10G", 1, "aws") for line in lines]
    # GPU cost of the file is exactly these lines plus the other GPU families in it (g3).
    gpu = independent_total_where(focus, lambda r: re.search(r"\b(g5|g3)\.\d*xlarge\b", r["ChargeDescription"])
                                  and r["ServiceCategory"] == "Compute")
    _, source = focus_store
    assert q10(source.stats["gpu_cost"]) == q10(gpu)


def test_focus_inter_region_rows(focus_store, focus):
    store, _ = focus_store
    desc = "$0.02 per GB - US West (Oregon) data transfer to US East (Northern Virginia)"
    lines = _focus_lines(focus, lambda r: r["ChargeDescription"] == desc)
    assert len(lines) >= 10
    got = store.lines().execute("SELECT x_SourceRow, x_TransferKind, x_TransferDirection, x_TransferFrom, "
                                "x_TransferTo, x_CostCategory FROM lines WHERE ChargeDescription = ? ORDER BY 1",
                                [desc]).fetchall()
    assert got == [(line, "inter_region", "out", "us-west-2", "us-east-1", "transfer") for line in lines]


@pytest.mark.heavy
def test_focus_tags_become_a_map(focus_store, focus):
    store, _ = focus_store
    assert store.lines().execute("SELECT DISTINCT typeof(Tags) FROM lines").fetchall() == [("MAP(VARCHAR, VARCHAR)",)]
    rows = focus.rows
    got = dict(store.lines().execute("SELECT x_SourceRow, Tags FROM lines").fetchall())
    tagged = 0
    for i, r in enumerate(rows):
        tags = got[i + 2]
        if r["Tags"] in ("", "NULL"):
            assert not tags, i + 2
            continue
        tagged += 1
        assert dict(tags) == {k: str(v) for k, v in json.loads(r["Tags"]).items()}, i + 2
    assert tagged > 100
    line = _focus_lines(focus, lambda r: r["Id"] == "712018")[0]
    tags = store.lines().execute("SELECT Tags FROM lines WHERE x_SourceRow = ?", [line]).fetchone()[0]
    assert tags["business_unit"] == "NaplesProcurement"
    assert store.lines().execute("SELECT count(*) FROM lines WHERE Tags['business_unit'] = 'NaplesProcurement'"
                             ).fetchone()[0] == sum(1 for r in rows if '"NaplesProcurement"' in r["Tags"])


def test_focus_first_data_line_is_2(focus_store, focus):
    store, _ = focus_store
    first = focus.rows[0]
    got = store.lines().execute("SELECT BilledCost, ChargeDescription FROM lines WHERE x_SourceRow = 2").fetchone()
    assert got == (D(first["BilledCost"]), first["ChargeDescription"])


# ---- the hand-written CUR fixture: GPU, spot, SageMaker, commitments -------------------------------------

# line: (LineItemType, billed, effective, x_CostCategory, x_GpuModel, x_GpuCount, PricingCategory, team tag)
GPU_LINES = {
    2: ("Usage", D("32.7726"), D("32.7726"), "gpu_compute", "A100", 8, "Standard", "research"),
    3: ("Usage", D("0.3018"), D("0.3018"), "gpu_compute", "A10G", 1, "Dynamic", "vision"),
    4: ("Usage", D("3.825"), D("3.825"), "gpu_compute", "V100", 1, "Standard", "research"),
    5: ("SavingsPlanCoveredUsage", D("32.7726"), D("21.45"), "gpu_compute", "A100", 8, "Committed", "research"),
    6: ("SavingsPlanNegation", D("-32.7726"), D("0"), "gpu_compute", "A100", 8, "Standard", "research"),
    7: ("DiscountedUsage", D("0"), D("0.75"), "gpu_compute", "A10G", 1, "Committed", None),
    8: ("RIFee", D("876.00"), D("12.50") + D("7.25"), "gpu_compute", "A10G", 1, "Committed", None),
    9: ("Usage", D("0.192"), D("0.192"), "other_compute", None, None, "Standard", None),
    10: ("Usage", D("0.20"), D("0.20"), "transfer", None, None, "Standard", "research"),
    11: ("Tax", D("4.00"), D("4.00"), "tax", None, None, None, None),
}


def test_gpu_fixture_matches_its_own_csv():
    _, rows = read_csv(GPU_FIXTURE)
    assert len(rows) == len(GPU_LINES)
    for i, r in enumerate(rows):
        assert r["lineItem/LineItemType"] == GPU_LINES[i + 2][0]
        assert D(r["lineItem/UnblendedCost"]) == GPU_LINES[i + 2][1]


def test_gpu_fixture_per_line(gpu_store):
    store, _ = gpu_store
    got = store.lines().execute(
        "SELECT x_SourceRow, BilledCost, EffectiveCost, x_CostCategory, x_GpuModel, x_GpuCount, PricingCategory, "
        "Tags['team'] FROM lines ORDER BY 1").fetchall()
    assert [g[0] for g in got] == list(GPU_LINES)
    for line, billed, effective, cat, model, count, pricing, team in got:
        exp = GPU_LINES[line]
        assert (billed, effective) == (exp[1], exp[2]), f"line {line} ({exp[0]})"
        assert (cat, model, count, pricing, team) == exp[3:], f"line {line} ({exp[0]})"


@pytest.mark.heavy
def test_gpu_fixture_details(gpu_store):
    store, _ = gpu_store
    row = {r[0]: r[1:] for r in store.lines().execute(
        "SELECT x_SourceRow, x_InstanceType, ChargeCategory FROM lines").fetchall()}
    assert row[2] == ("p4d.24xlarge", "Usage")
    assert row[3] == ("g5.xlarge", "Usage")  # empty product/instanceType: read from SpotUsage:g5.xlarge
    assert row[4] == ("ml.p3.2xlarge", "Usage")  # SageMaker: the instance type as billed
    assert row[8] == ("g5.2xlarge", "Purchase")  # RIFee is a purchase
    assert row[11] == (None, "Tax")
    transfer = store.lines().execute("SELECT x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo "
                                 "FROM lines WHERE x_SourceRow = 10").fetchone()
    # No product/fromRegionCode columns here: the ends come from the usage type's region prefixes.
    assert transfer == ("inter_region", "out", "us-east-1", "us-west-2")
    tags = store.lines().execute("SELECT x_SourceRow, Tags FROM lines WHERE x_SourceRow IN (2, 7) "
                                 "ORDER BY 1").fetchall()
    assert [dict(t) for _, t in tags] == [{"team": "research"}, {}]


def test_gpu_fixture_totals(gpu_store):
    _, source = gpu_store
    billed = sum(v[1] for v in GPU_LINES.values())
    effective = sum(v[2] for v in GPU_LINES.values())
    assert billed == D("917.2914") and effective == D("83.2414")
    gpu = sum(v[1] for v in GPU_LINES.values() if v[3] == "gpu_compute")
    assert gpu == D("912.8994")
    st = source.stats
    assert source.rows == 10
    assert q10(st["billed_cost"]) == q10({"USD": billed})
    assert q10(st["effective_cost"]) == q10({"USD": effective})
    assert q10(st["gpu_cost"]) == q10({"USD": gpu})
    assert q10(st["spot_cost"]) == q10({"USD": D("0.3018")})
    assert q10(st["gpu_spot_cost"]) == q10({"USD": D("0.3018")})
    assert q10(st["by_category"]["gpu_compute"]) == q10({"USD": gpu})
    assert q10(st["by_category"]["transfer"]) == q10({"USD": D("0.20")})
    assert q10(st["by_category"]["other_compute"]) == q10({"USD": D("0.192")})
    assert q10(st["by_category"]["tax"]) == q10({"USD": D("4.00")})


def test_gpu_fixture_gpu_hours(gpu_store):
    """GPU-hours count usage only (Usage, DiscountedUsage, SavingsPlanCoveredUsage, as AWS's own dashboards
    do): p4d 1 h x 8 + spot g5 1 h + SageMaker p3 1 h + SP-covered p4d 1 h x 8 + RI-covered g5 1 h = 19. The
    RIFee's 744 hours are the reservation's hours in the month, and the SavingsPlanNegation repeats the
    covered hour: counting them double-counts."""
    _, source = gpu_store
    got = D(str(source.stats["gpu_hours"]))
    assert got == D(19), (
        f"READER BUG (tables/store.py _stats gpu_hours): GPU-hours of {GPU_FIXTURE.name} are {got}, expected 19; "
        "the RIFee line's UsageAmount (744 reservation hours) and the SavingsPlanNegation line are counted "
        "as GPU usage")

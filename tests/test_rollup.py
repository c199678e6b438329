"""The `costs` table holds billing lines summed per file, UTC day and everything the audit groups by
(tables/normalize.py: rollup_sql). These tests hold it to the lines themselves (the `lines` view reads the
same files one row per line): every amount, count and time, exactly, on real samples and fixtures, in CSV and
in Parquet (which groups by a hash of the key columns), including when hashes clash."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

import auditor.tables.normalize as normalize
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
FILES = [  # a str is a public sample (the `locate` and `samples` fixtures)
    "aws_cur_legacy/focus_converters__sample-anonymous-aws-export-dataset.csv",
    "focus/FOCUS-Sample-Data__FOCUS-1.0__focus_sample.csv",
    "azure/finops-toolkit__EA_ActualCost_Small.csv",
    "gcp_bigquery/koku__gcp__2022-08-01_5.csv",
    REPO / "fixtures" / "billing" / "cur-gpu-spot.csv",
    REPO / "fixtures" / "billing" / "gcp" / "gcp-detailed-export.jsonl",
    REPO / "fixtures" / "demo" / "billing" / "aws-cur-2026-07.csv",
    REPO / "fixtures" / "demo" / "billing" / "focus-azure-2026-q3.csv",
]
# What the summaries group by; Tags as text, since a MAP does not sort.
KEYS = ("x_SourceFile, date_trunc('day', ChargePeriodStart), BillingCurrency, ResourceId, x_UsageType, "
        "x_CostCategory, ChargeCategory, PricingCategory, x_TransferKind, x_TransferFrom, x_TransferTo, x_GpuModel, "
        "x_GpuCount, x_InstanceType, CommitmentDiscountId, CommitmentDiscountStatus, RegionId, SubAccountId, "
        "CAST(Tags AS VARCHAR)")


def sums(store: Store, table: str) -> list[tuple]:
    count = "sum(x_Lines)" if table == "costs" else "count(*)"
    rows = (store.lines() if table == "lines" else store.con).execute(
        f"SELECT {KEYS}, sum(BilledCost), sum(EffectiveCost), sum(ListCost), sum(ConsumedQuantity), "
        f"min(ChargePeriodStart), max(ChargePeriodEnd), {count}, min(x_SourceRow) FROM {table} GROUP BY ALL"
    ).fetchall()
    return sorted(rows, key=repr)


def as_parquet(path: Path, folder: Path) -> Path:
    """The file as Parquet, every column text, as an export converted by hand would be."""
    out = folder / (path.name.split(".")[0] + ".parquet")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * FROM read_csv('{path}', all_varchar = true, header = true)) TO '{out}' "
                "(FORMAT parquet)")
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("path", FILES, ids=lambda p: Path(p).name)
def test_costs_rows_sum_the_lines_exactly(path, locate):
    store = Store()
    [source] = store.load_billing([locate(path)])
    rollup, lines = sums(store, "costs"), sums(store, "lines")
    assert rollup == lines
    assert source.rows == store.lines().execute("SELECT count(*) FROM lines").fetchone()[0]


@pytest.mark.slow
def test_a_quarter_of_hourly_lines_collapses(tmp_path):
    """The benchmark generator's quarter of hourly lines, in every format it writes (CUR Parquet, CUR gzip CSV,
    FOCUS Parquet): a day's lines of one resource are one row, and the rows still sum the lines exactly."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import generate

    info = generate.generate(20000, tmp_path / "bench")
    for fmt, files in info["formats"].items():
        store = Store()
        store.load_billing([Path(f) for f in files])
        rows, lines = store.con.execute("SELECT count(*), sum(x_Lines) FROM costs").fetchone()
        assert lines == store.lines().execute("SELECT count(*) FROM lines").fetchone()[0] == 20000
        assert rows * 3 < lines, (fmt, rows, lines)
        assert sums(store, "costs") == sums(store, "lines")


@pytest.mark.heavy
def test_high_churn_lines_collapse_though_every_description_differs(tmp_path):
    """The high-churn shape (short-lived nodes, a description unique to every line): the description is no
    grouping key, so a node's day of lines of one kind is one row; the instance type read from the description
    is each line's own, every sum exact, and a row's description is that of its first line."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import generate

    info = generate.generate(20000, tmp_path / "bench", ("churn-parquet",))
    store = Store()
    store.load_billing([Path(f) for f in info["formats"]["churn-parquet"]])
    rows, lines = store.con.execute("SELECT count(*), sum(x_Lines) FROM costs").fetchone()
    assert lines == store.lines().execute("SELECT count(*) FROM lines").fetchone()[0] == 20000
    assert store.con.execute("SELECT count(DISTINCT ChargeDescription) FROM lines").fetchone()[0] > lines // 2
    assert rows * 5 < lines, (rows, lines)
    assert sums(store, "costs") == sums(store, "lines")
    assert store.con.execute("SELECT count(*) FROM costs c JOIN lines l USING (x_SourceFile, x_SourceRow) "
                             "WHERE c.ChargeDescription IS DISTINCT FROM l.ChargeDescription").fetchone()[0] == 0
    # Grouped by the columns themselves (as for CSV): the same rows.
    columns = Store()
    monkey = pytest.MonkeyPatch()
    monkey.setattr(normalize, "KEY_HASH", "(hash({}) % 2)")
    try:
        columns.load_billing([Path(f) for f in info["formats"]["churn-parquet"]])
    finally:
        monkey.undo()
    assert sums(columns, "costs") == sums(store, "costs")
    assert columns.lines().execute("SELECT count(*) FROM costs c JOIN lines l USING (x_SourceFile, x_SourceRow) "
                               "WHERE c.ChargeDescription IS DISTINCT FROM l.ChargeDescription").fetchone()[0] == 0


@pytest.mark.heavy
@pytest.mark.parametrize("path", [FILES[0], FILES[6]], ids=lambda p: Path(p).name)
def test_parquet_groups_by_hash_and_equals_the_lines(path, tmp_path, locate):
    store = Store()
    store.load_billing([as_parquet(locate(path), tmp_path)])
    assert sums(store, "costs") == sums(store, "lines")


@pytest.mark.heavy
def test_a_hash_clash_falls_back_to_grouping_by_the_columns(tmp_path, monkeypatch):
    parquet = as_parquet(FILES[6], tmp_path)
    exact = Store()
    exact.load_billing([parquet])
    # Three hash values for hundreds of distinct keys: clashes are certain.
    monkeypatch.setattr(normalize, "KEY_HASH", "(hash({}) % 3)")
    clashing = Store()
    [source] = clashing.load_billing([parquet])
    assert source.rows == exact.sources[0].rows
    assert sums(clashing, "costs") == sums(exact, "costs") == sums(exact, "lines")
    # And the hashed query itself refuses to give clashing groups.
    from auditor.providers.billing.columns import Columns
    from auditor.providers.billing.detect import sniff
    from auditor.tables.normalize import CLASH, rollup_sql
    from auditor.tables.store import COSTS

    s = sniff(parquet, clashing.con)
    exprs, _ = clashing.reader_sql(s.format, Columns(s.columns, s.fields, s.types))
    sql = rollup_sql(exprs, Columns(s.columns, s.fields, s.types), clashing._relation(s), 1, str(parquet), s.format,
                     list(COSTS), "(file_row_number + 1)", by_hash=True, rescan=True)
    with pytest.raises(duckdb.Error, match=CLASH):
        clashing.con.execute(f"SELECT count(*), sum(BilledCost) FROM ({sql})").fetchall()
    # So does the join of each classified key back by its hash (normalize.select_sql), on the lines themselves.
    lines = normalize.select_sql(exprs, Columns(s.columns, s.fields, s.types), clashing._relation(s), 1, str(parquet),
                                 s.format, list(COSTS), "(file_row_number + 1)", by_hash=True)
    with pytest.raises(duckdb.Error, match=CLASH):
        clashing.con.execute(f"SELECT count(*), sum(BilledCost) FROM ({lines})").fetchall()


@pytest.mark.heavy
def test_a_csv_groups_by_hash_in_one_scan_and_falls_back_on_a_clash(monkeypatch):
    """A CSV's lines grouped by a hash of their keys, each hash's keys a grouping set of its own (read once):
    the same rows as grouped by the columns; a clash refused by the query and read again by the columns."""
    path = FILES[6]
    exact = Store()
    exact.load_billing([path])
    assert sums(exact, "costs") == sums(exact, "lines")
    from auditor.providers.billing.columns import Columns
    from auditor.providers.billing.detect import sniff
    from auditor.tables.normalize import CLASH, rollup_sql
    from auditor.tables.store import COSTS

    s = sniff(path, exact.con)
    cols = Columns(s.columns, s.fields, s.types)
    exprs, _ = exact.reader_sql(s.format, cols)

    def grouped(**how: bool) -> str:
        sql = rollup_sql(exprs, cols, exact._relation(s), 2, str(path), s.format, list(COSTS), **how)
        return f"SELECT count(*), sum(BilledCost), sum(x_Lines) FROM ({sql})"

    by_columns = exact.con.execute(grouped()).fetchall()
    assert exact.con.execute(grouped(keys_apart=True)).fetchall() == by_columns
    # Three hash values for hundreds of distinct keys: clashes are certain.
    monkeypatch.setattr(normalize, "KEY_HASH", "(hash({}) % 3)")
    with pytest.raises(duckdb.Error, match=CLASH):
        exact.con.execute(grouped(keys_apart=True)).fetchall()
    clashing = Store()
    [source] = clashing.load_billing([path])
    assert source.rows == exact.sources[0].rows
    assert sums(clashing, "costs") == sums(exact, "costs")


@pytest.mark.heavy
def test_files_read_side_by_side_keep_their_order_and_amounts(tmp_path):
    demo = sorted((REPO / "fixtures" / "demo" / "billing").iterdir())
    together = Store()
    sources = together.load_billing(demo)
    assert [s.path for s in sources] == [str(p) for p in demo]
    for path, source in zip(demo, sources, strict=True):
        alone = Store()
        [one] = alone.load_billing([path])
        assert one.stats == source.stats
    assert sums(together, "costs") == sums(together, "lines")


def test_a_line_without_a_cost_is_named_among_lines_of_its_day(tmp_path):
    path = tmp_path / "focus.csv"
    header = "BilledCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ProviderName,ResourceId\n"
    body = "".join(f"{'' if h == 5 else '1.25'},USD,2026-07-01T{h:02d}:00:00Z,2026-07-01T{h + 1:02d}:00:00Z,Usage,"
                   "AWS,i-1\n" for h in range(10))
    path.write_text(header + body)
    from auditor.errors import InputError

    with pytest.raises(InputError) as e:
        Store().load_billing([path])
    assert e.value.line == 7  # the header is line 1; the sixth line has no cost
    assert "cost is empty" in str(e.value)


@pytest.mark.heavy
def test_tags_are_classified_by_their_own_columns_and_sum_the_lines(tmp_path):
    """Tag churn (a run tag that changes every few hours on the same node and usage type): the tag map is built
    once per distinct value of the tag columns alone, the rest once per distinct value of the other columns
    (normalize.split), and the rows still sum the lines exactly. Where another output reads a tag column, the
    tags stay in that output's key."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import generate

    from auditor.providers.billing.columns import Columns
    from auditor.providers.billing.detect import sniff
    from auditor.tables.schema import COSTS

    info = generate.generate(20000, tmp_path / "bench", ("tagchurn-parquet",))
    files = [Path(f) for f in info["formats"]["tagchurn-parquet"]]
    store = Store()
    store.load_billing(files)
    assert sums(store, "costs") == sums(store, "lines")
    assert store.con.execute("SELECT count(DISTINCT Tags) FROM costs").fetchone()[0] > 1000

    sniffed = sniff(files[0], store.con)
    cols = Columns(sniffed.columns, sniffed.fields, sniffed.types)
    exprs, _ = store.reader_sql(sniffed.format, cols)
    tag_columns = sorted(c for c in sniffed.columns if c.startswith("resource_tags_"))
    groups = normalize.split(exprs, cols)
    assert (["Tags"], tag_columns) in groups
    assert not any(set(key) & set(tag_columns) for outputs, key in groups if outputs != ["Tags"])
    # Each key's classification is computed before the join, once per key (materialized: DuckDB would otherwise
    # move it above the join, onto every row).
    sql = normalize.select_sql(exprs, cols, "t", 1, "f", sniffed.format, list(COSTS))
    assert sql.count("AS MATERIALIZED") == len(groups)

    exprs["x_Namespace"] = f"CASE WHEN {tag_columns[0]} = 'a' THEN 'b' END"  # another output reads a tag column
    [key] = [key for outputs, key in normalize.split(exprs, cols) if "Tags" in outputs]
    assert set(tag_columns) < set(key)


def test_the_columns_an_expression_reads_are_found_quoted_or_as_bare_words():
    referenced = normalize.referenced
    top = ["lineItem/UsageType", "product", "region", "Region2", "cost", "costs", "a b"]
    expr = ('CASE WHEN "lineItem/UsageType" LIKE \'%Box%\' THEN COST ELSE ("product"."region") END '
            "|| t.costs_x || 'the region' || \"a b\"")
    # quoted names; a bare name in any case as a word, and in a literal (a false positive, which costs only
    # speed); never a name inside another word, after a dot, or only in a longer name
    assert referenced(expr, top) == {"lineItem/UsageType", "product", "region", "cost", "a b"}
    assert referenced("region2 + 1", top) == {"Region2"}
    assert referenced("x.region", top) == set()

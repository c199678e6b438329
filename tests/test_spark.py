"""`--engine spark`: the same normalization SQL, translated to Spark's dialect, run on Spark in local mode, must
give the summaries DuckDB gives, to the cent: totals, categories, providers, transfer volume, GPU-hours, spend
per team, per resource and per transfer flow; on hand-written and real public exports (AWS CUR, FOCUS, GCP as
CSV, JSON and Avro, Azure EA, MCA and pay-as-you-go), the benchmark generator's CUR and FOCUS Parquet, and the
demo audit end to end through the CLI. The rewrites of DuckDB functions Spark lacks or reads otherwise give, on
Spark, the values DuckDB gives.
"""

from __future__ import annotations

import json
import os
import random
import sys
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from auditor.policy import load_policy
from auditor.providers.billing.azure import US_DATES
from auditor.providers.redact import redact_sql
from auditor.tables import breakdown, entities, spark_sql, stats
from auditor.tables import spark as engine
from auditor.tables.sql import spend_team_sql, tag_sql, team_sql
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
FIXTURES = REPO / "fixtures" / "billing"
CENT = Decimal("0.01")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from generate import generate

    out = tmp_path_factory.mktemp("bench")
    generate(600, out, ("cur-parquet", "focus-parquet", "churn-parquet"))
    return out


def cents(value):
    """Every Decimal in a nested structure rounded to the cent (the audit rounds once, at output)."""
    if isinstance(value, Decimal):
        return value.quantize(CENT)
    if isinstance(value, dict):
        return {k: cents(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [cents(v) for v in value]
    return value


def summaries(store: Store) -> dict:
    window = store.data_window()
    policy = load_policy(DEMO / "policy.yml")
    figures = stats.window_stats(store.con, window)  # line counts too: a reduced row carries its lines' count
    return cents({
        "window": (window.start, window.end),
        "stats": figures,
        "teams": breakdown.spend_by_team(store, window, spend_team_sql(policy), tag_sql(policy.project_tags)),
        # Per resource: its spend and every tag set it was billed under, with the spend under each; every
        # instance type of every resource, below. (Not the category: a resource's is its costliest line's, and a
        # tie, as between $0 lines, goes either way. Nor the one instance type and tag set resource_spend
        # picks: the first of several rows in the order `costs` holds them, which is not the same on Spark.)
        "resources": {r.id: (r.cost, sorted((sorted(t.items()), c, v) for t, c, v in r.tag_sets))
                      for r in entities.resource_spend(store, window, None)},
        "instance_types": store.con.execute("SELECT DISTINCT ResourceId, x_InstanceType FROM costs "
                                            "ORDER BY ALL").fetchall(),
        "flows": {f.id: (f.gb, f.cost) for f in entities.transfer_flows(store, window, None)},
        # Capacity reservations, the provider's split and FOCUS's GPU and commitment columns (issue 18).
        "gpu_columns": store.con.execute(
            "SELECT CapacityReservationId, CapacityReservationStatus, x_SplitParentId, x_SplitResourceId, "
            "x_SplitMethod, x_GpuCount, CommitmentDiscountUnit, ContractApplied, sum(x_SplitCost), "
            "sum(x_SplitUnusedCost), sum(CommitmentDiscountQuantity) FROM costs GROUP BY ALL ORDER BY ALL").fetchall(),
    })


def both(paths: list[Path], spark) -> tuple[dict, dict]:
    duck = Store()
    duck.load_billing(paths)
    on_spark = Store()
    engine.load_billing(on_spark, paths, spark=spark)
    # A file's line count is the export's, not the reduced rows'.
    assert [s.rows for s in on_spark.sources] == [s.rows for s in duck.sources]
    return summaries(duck), summaries(on_spark)


FILES = {  # a str is a public sample (the `locate` and `samples` fixtures)
    "cur-gpu-spot": FIXTURES / "cur-gpu-spot.csv",
    "focus-sample": "focus/FOCUS-Sample-Data__FOCUS-1.0__focus_sample.csv",
    "cur-sample": "aws_cur_legacy/focus_converters__sample-anonymous-aws-export-dataset.csv",
    # GCP: repeated records as Python-repr text (CSV), real lists (JSON, and Avro through its Parquet copy)
    "gcp-csv": FIXTURES / "gcp" / "gcp-detailed-export.csv",
    "gcp-json": FIXTURES / "gcp" / "gcp-detailed-export.jsonl",
    "gcp-avro": FIXTURES / "gcp" / "gcp-detailed-export.avro",
    "gcp-koku": "gcp_bigquery/koku__gcp__2022-08-01_5.csv",
    # Azure: US and ISO dates, Tags without braces, JSON AdditionalInfo, a BOM
    "azure-ea": FIXTURES / "azure" / "ea-cost-details.csv",
    "azure-ea-short-dates": FIXTURES / "azure" / "ea-short-dates.csv",
    "azure-mca": FIXTURES / "azure" / "mca-cost-details.csv",
    "azure-payg": FIXTURES / "azure" / "payg-usage-details.csv",
    "azure-ea-sample": "azure/finops-toolkit__EA_ActualCost_Small.csv",
    # Capacity reservations, split cost allocation, FOCUS 1.3 (fixtures/billing/gpu/make_gpu_billing.py)
    "cur-forgotten-gpu": FIXTURES / "gpu" / "cur-forgotten-gpu.csv",
    "cur2-eks-split": FIXTURES / "gpu" / "cur2-eks-split.csv",
    "focus-1.3-gpu": FIXTURES / "gpu" / "focus-1.3-gpu.csv",
}


@pytest.mark.parametrize("name", list(FILES))
def test_spark_summaries_equal_duckdb(name, spark, locate):
    duck, on_spark = both([locate(FILES[name])], spark)
    assert on_spark == duck
    assert duck["stats"]["billed_cost"], "the fixture has spend"


def test_spark_parquet_cur_and_focus_equal_duckdb(generated, spark):
    for fmt in ("cur-parquet", "focus-parquet", "churn-parquet"):
        files = sorted((generated / fmt).iterdir())[:3 if fmt == "churn-parquet" else 1]  # few nodes a month
        duck, on_spark = both(files, spark)
        assert on_spark == duck, fmt
        assert duck["flows"] and duck["stats"]["gpu_cost"], "transfer and GPU lines are there to compare"


def test_demo_audit_through_the_cli_on_spark(spark, tmp_path):
    from auditor.cli import cli

    args = ["audit", "--policy", str(DEMO / "policy.yml"), "--inventory", str(DEMO / "inventory.json"),
            "--quarter", "2026-Q3", "--as-of", "2026-10-01", "-q", str(DEMO / "billing")]
    runner = CliRunner()
    duck = runner.invoke(cli, [*args, "--out", str(tmp_path / "duckdb")])
    on_spark = runner.invoke(cli, [*args, "--out", str(tmp_path / "spark"), "--engine", "spark"])
    assert duck.exit_code == 0, duck.output
    assert on_spark.exit_code == 0, on_spark.output
    a, b = (json.loads((tmp_path / d / "audit.json").read_text()) for d in ("duckdb", "spark"))
    for key in ("billed_cost", "effective_cost", "gpu_cost", "spot_cost", "by_category", "by_provider", "by_team",
                "transfer_gb_out", "gpu_hours", "monthly_savings"):
        assert b["summary"][key] == a["summary"][key], key
    assert [s["rows"] for s in b["inputs"]["billing"]] == [s["rows"] for s in a["inputs"]["billing"]]
    fingerprints = lambda doc: sorted((f["rule"], f["resource"], f.get("cost")) for f in doc["findings"])  # noqa: E731
    assert fingerprints(b) == fingerprints(a)
    assert a["findings"], "the demo has findings to compare"


def test_translation_rewrites_what_sqlglot_leaves_in_duckdb_terms():
    sql = spark_sql.to_spark("SELECT timezone('UTC', CAST(t AS TIMESTAMPTZ)) AS a, d SIMILAR TO '.* to .+' AS b, "
                          "regexp_extract(d, '(.+) to (.+)', ['src', 'dst']) AS c, k[6:] AS e FROM x")
    assert "TIMEZONE" not in sql.upper() and "SIMILAR" not in sql.upper()
    assert "RLIKE '^(?:.* to .+)$'" in sql
    assert "NAMED_STRUCT('src', REGEXP_EXTRACT(d, '(.+) to (.+)'), 'dst', REGEXP_EXTRACT(d, '(.+) to (.+)', 2))" in sql
    assert "SUBSTRING(k, 6)" in sql


# DuckDB expressions the readers use that Spark lacks or reads otherwise, over values that tell the readings
# apart: NULLs, empty and missing things, several formats, first match against every match.
SEMANTICS = [
    "list_sum(list_transform(l, lambda a: CAST(a AS DECIMAL(38,18))))",
    "len(list_filter(l, lambda t: starts_with(t, '1')))",
    "json_valid(j)",
    "CASE WHEN json_valid(j) THEN json_extract_string(j, '$[*].amount') END",
    # (a DOUBLE's text differs, 1e-05 or 1.0E-5; what the readers use is the number)
    "list_transform(json_extract_string(to_json(list_transform(l, lambda a: {'amount': CAST(a AS DOUBLE), 'n': 1})), "
    "'$[*].amount'), lambda a: CAST(a AS DECIMAL(38,18)))",
    f"CAST(strptime(d, {US_DATES}) AS VARCHAR)",
    "regexp_replace(r, 'o(.)', '<\\1$>')",
    "regexp_replace(r, 'o(.)', '<\\1$>', 'g')",
    "regexp_replace(r, 'B', '-', 'i')",
    redact_sql("r"),
]
ROWS = """(VALUES
    (['1.25', '-0.5', NULL], '[{"amount": -1.085546, "type": "X"}, {"type": "Y"}, {"amount": null}]', '09/21/2023',
     'foo boo https://user:pw@host/path?sig=abc&se=1 x'),
    ([], '{"a": 1, "a": 2}', '9/2/2023 13:05:09', 'no match'),  -- a key twice is valid JSON to DuckDB
    ([NULL], '[{''amount'': 1}]', '9/2/2023 1:05:09 PM', 'bob'),
    (NULL, NULL, NULL, NULL),
    (['10.000000000000000001', '1e-5'], '[]', '12/31/2023 23:59', 'token=s3cr3t; o'),
    (NULL, '[1, {"amount": 2}, [3], {"amount": [4, 5], "b": {}}]', NULL, NULL),
    (NULL, '{"amount": 6}', NULL, NULL)) AS t(l, j, d, r)"""


@pytest.mark.parametrize("expr", SEMANTICS)
def test_rewritten_functions_read_on_spark_as_on_duckdb(expr, spark):
    sql = f"SELECT {expr} AS v FROM {ROWS}"
    duck = [v for (v,) in duckdb.connect().execute(sql).fetchall()]
    on_spark = [r.v for r in spark.sql(spark_sql.to_spark(sql)).collect()]
    assert on_spark == duck, spark_sql.to_spark(sql)
    assert any(v not in (None, [], False) for v in duck), "the values tell something apart"


# Doubles whose exact binary value and shortest text part at the decimal kept: 1e19 is 9999999999999999538.76...
# to DuckDB; 1.005 is 1.00 (its product 100.49999999999999), which Spark's own cast reads as 1.005, so 1.01. Also
# halves after scaling (rounded away from zero), each limb's edge (2^52, 2^63 and 2^104 times 10^-18 and past
# them), a subnormal, signs, and a spread of amounts from a seeded generator.
DOUBLES = [16.1539, -16.1539, 0.1, 2.675, 1e-05, 1.5e-18, 2.5e-18, -2.5e-18, 3.4999999999999996e-18, 0.0, -0.0,
           5e-324, 123456789.12345679, 0.0045035996273704955, 9.223372036854776, 9.3, -9.3, 20282409603651.67,
           4.5e16, -4.5e16, 1e19, 99999999999999.98, 1234.5678, 1.005, 0.575, 5.4499999999999997e-05] + \
    [round(random.Random(7).uniform(-1, 1) * 10 ** e, 9) for e in range(-6, 14)] + \
    [random.Random(i).lognormvariate(0, 6) for i in range(40)]


@pytest.mark.parametrize("decimal", ["DECIMAL(38,18)", "DECIMAL(18,6)", "DECIMAL(12,2)"])
def test_a_double_cast_to_decimal_on_spark_as_on_duckdb(decimal, spark):
    values = ", ".join(f"(CAST({v!r} AS DOUBLE))" for v in DOUBLES)
    fits = "WHERE abs(d) < 1e9" if decimal != "DECIMAL(38,18)" else ""
    sql = f"SELECT CAST(d AS {decimal}) AS v FROM (VALUES {values}) AS t(d) {fits}"
    duck = [v for (v,) in duckdb.connect().execute(sql).fetchall()]
    on_spark = [r.v for r in spark.sql(spark_sql.to_spark(sql)).collect()]
    assert on_spark == duck
    assert len(duck) > 40
    native = [r.v for r in spark.sql(sql).collect()]  # Spark's own cast, of the shortest text
    assert native != duck, "the values tell Spark's own cast (of the shortest text) apart"


def test_a_cast_of_amounts_already_cast_is_a_plain_cast_and_reads_as_on_duckdb(spark):
    # BilledCost is a cost cast plus its credits cast, cast again: only what may be a DOUBLE (a column, a literal
    # with an exponent, a quotient) gets the exact conversion; the rest is a plain cast, or each inner conversion
    # would be written into the outer one many times over (385 KB of Spark SQL for a GCP export, 10x the plan).
    nested = "CAST((CAST(d AS DECIMAL(38,18)) + COALESCE(CAST(e AS DECIMAL(38,18)), 0)) AS DECIMAL(38,18))"
    assert spark_sql.to_spark(f"SELECT {nested} FROM t").upper().count("TYPEOF(") == 2
    chosen = "CAST(CASE WHEN d > 0 THEN CAST(d AS DECIMAL(38,18)) ELSE 0 END AS DECIMAL(38,18))"
    assert spark_sql.to_spark(f"SELECT {chosen} FROM t").upper().count("TYPEOF(") == 1
    pairs = zip(DOUBLES, DOUBLES[1:], strict=False)
    values = ", ".join(f"(CAST({v!r} AS DOUBLE), CAST({w!r} AS DOUBLE))" for v, w in pairs)
    sql = (f"SELECT {nested} AS a, CAST(d + 1 AS DECIMAL(38,18)) AS b, CAST(1e-5 * 3 AS DECIMAL(38,18)) AS c, "
           "CAST(7 / 2 AS DECIMAL(12,2)) AS q, CAST(0.1 + 0.2 AS DECIMAL(38,18)) AS s, "
           "CAST(-(CAST(e AS DECIMAL(18,6)) * 2) AS DECIMAL(38,18)) AS n, "
           "CAST(CASE WHEN d > 0 THEN CAST(d AS DECIMAL(38,18)) WHEN d < -1 THEN 0 END AS DECIMAL(38,18)) AS k, "
           "CAST(CASE WHEN d > 0 THEN d ELSE 0 END AS DECIMAL(38,18)) AS m "
           f"FROM (VALUES {values}) AS t(d, e) WHERE abs(d) < 1e9 AND abs(e) < 1e9")
    duck = duckdb.connect().execute(sql).fetchall()
    assert len(duck) > 40
    assert [tuple(r) for r in spark.sql(spark_sql.to_spark(sql)).collect()] == duck


def test_a_lookup_table_reads_on_spark_as_on_duckdb(spark):
    # case_map: a MAP literal (one constant a query) rather than a CASE of a WHEN a key; a key it lacks and a NULL
    # give the default (or NULL), on both engines.
    from auditor.providers.billing.columns import case_map

    mapping = {f"us east {i}": f"eastus{i}" for i in range(40)} | {"West Europe": "westeurope"}
    sql = (f"SELECT {case_map('k', mapping)} AS a, {case_map('lower(k)', mapping, 'upper(k)')} AS b "
           "FROM (VALUES ('us east 7'), ('US EAST 7'), ('West Europe'), ('nowhere'), (NULL)) AS t(k)")
    duck = duckdb.connect().execute(sql).fetchall()
    assert duck == [("eastus7", "eastus7"), (None, "eastus7"), ("westeurope", "WEST EUROPE"), (None, "NOWHERE"),
                    (None, None)]
    assert "TRY_ELEMENT_AT(MAP(" in spark_sql.to_spark(sql).upper()
    assert [tuple(r) for r in spark.sql(spark_sql.to_spark(sql)).collect()] == duck


def test_translation_refuses_what_it_cannot_translate_faithfully():
    for sql in ("SELECT list_sum(l) FROM x", "SELECT json_extract_string(j, '$[*].a.b') FROM x",
                "SELECT regexp_replace(r, 'a', 'b', 'm') FROM x"):
        with pytest.raises(ValueError, match="cannot translate"):
            spark_sql.to_spark(sql)


def test_spark_sums_the_split_of_hourly_lines_as_duckdb(spark, tmp_path):
    """CUR 2.0 split cost allocation hour by hour (as AWS delivers it), every hour's lines alike: reduced to days,
    the split and unused amounts are summed on Spark as on DuckDB (they were kept as keys there: 1/24 of them).
    The day of fixtures/billing/gpu/cur2-eks-split.csv repeated for each of 24 hours: the pods' split moves 24 x
    786.5424 from the node's team, 24 x 524.4027 of it to research."""
    import csv

    from auditor.tables.split import provider_split

    with open(FIXTURES / "gpu" / "cur2-eks-split.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    day = [r for r in rows if r["line_item_usage_start_date"].startswith("2026-07-01")]
    path = tmp_path / "cur2-hourly-split.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        for h in range(24):
            start, end = f"2026-07-01T{h:02d}:00:00.000Z", f"2026-07-01T{h + 1:02d}:00:00.000Z" if h < 23 else \
                "2026-07-02T00:00:00.000Z"
            for k, r in enumerate(day):
                w.writerow({**r, "identity_line_item_id": f"h{h}-{k}", "identity_time_interval": f"{start}/{end}",
                            "line_item_usage_start_date": start, "line_item_usage_end_date": end})
    duck, on_spark = both([path], spark)
    assert on_spark == duck
    team = team_sql(load_policy(DEMO / "policy.yml"))
    splits = []
    for store in (Store(), Store()):
        (store.load_billing([path]) if not splits else engine.load_billing(store, [path], spark=spark))
        splits.append(provider_split(store, store.data_window(), team))
    assert splits[0] == splits[1]
    assert splits[0]["split_cost"]["USD"] + splits[0]["unused_cost"]["USD"] == 24 * Decimal("786.5424")
    assert sum(v["USD"] for t, v in splits[0]["moves"].items() if v["USD"] > 0) == 24 * Decimal("786.5424")


def test_findings_teams_follow_the_split_on_spark_as_on_duckdb(spark, tmp_path):
    """The provider's split decides a finding's team on Spark as on DuckDB: the split node of
    fixtures/billing/gpu/cur2-eks-split.csv (tagged ml-platform, its cost split whole to research and vision,
    research the larger) has its findings and its action under research, and team spend, budgets and findings
    agree to the cent on both engines."""
    from auditor.core import run_audit
    from auditor.window import parse_quarter

    policy = load_policy(DEMO / "policy.yml")
    path = FIXTURES / "gpu" / "cur2-eks-split.csv"
    q3 = parse_quarter("2026-Q3")
    audits = [run_audit(policy, [path], window=q3),
              run_audit(policy, [path], window=q3,
                        engine=lambda store, paths, progress=None: engine.load_billing(store, paths, spark=spark))]
    seen = [({(f.rule, f.resource): (f.team, f.cost, f.monthly_savings) for f in a.findings},
             {x["resource"]: x["team"] for x in a.summary["actions"]},
             cents(a.summary["by_team"]), cents(a.summary["teams"])) for a in audits]
    assert seen[0] == seen[1]
    findings, acts, _, _ = seen[0]
    assert acts["i-0eksgpu000000001"] == "research"
    assert {team for (_, res), (team, _, _) in findings.items() if res == "i-0eksgpu000000001"} == {"research"}


def test_a_billing_file_named_in_latin1_reads_on_spark_as_on_duckdb(spark, tmp_path):
    """A file whose name is not UTF-8 (latin-1 `coût.csv`, the bytes b'co\\xfbts.csv') is read on Spark as DuckDB reads
    it: through its link of a UTF-8 name (issue 30), to the cent, and named with its byte escaped."""
    raw = os.fsencode(tmp_path) + b"/co\xfbts.csv"
    with open(raw, "wb") as f:
        f.write((FIXTURES / "gpu" / "cur2-eks-split.csv").read_bytes())
    path = Path(os.fsdecode(raw))
    duck = Store()
    duck.load_billing([path])
    on_spark = Store()
    engine.load_billing(on_spark, [path], spark=spark)
    expected = summaries(duck)
    assert summaries(on_spark) == expected and expected["stats"]["billed_cost"]
    assert [s.path for s in on_spark.sources] == [s.path for s in duck.sources] == [str(tmp_path / "co\\xfbts.csv")]


@pytest.mark.parametrize("as_type", ["STRUCT(InstanceType VARCHAR, GpuCount INTEGER)", "MAP(VARCHAR, VARCHAR)"])
def test_focus_price_details_of_a_parquet_export_read_on_spark_as_on_duckdb(spark, tmp_path, as_type):
    """A FOCUS Parquet export holds SkuPriceDetails as a STRUCT or a MAP, not JSON text: the FOCUS reader writes it
    as JSON (to_json) before reading its InstanceType and GpuCount, which DuckDB would do by itself and Spark does
    not. The line's instance type and GPU count are the export's own, p5.48xlarge and 8, on both engines."""
    src = tmp_path / "focus.csv"
    src.write_text("BilledCost,EffectiveCost,ListCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd,"
                   "ChargeCategory,ServiceCategory,ProviderName,ResourceId,RegionId,SkuPriceDetails\n"
                   '10.00,10.00,10.00,USD,2024-09-01T00:00:00Z,2024-09-01T01:00:00Z,Usage,Compute,AWS,i-1,us-east-1,'
                   '"{""InstanceType"": ""p5.48xlarge"", ""GpuCount"": 8}"\n', encoding="utf-8")
    path = tmp_path / "focus.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (CAST(CAST(SkuPriceDetails AS JSON) AS {as_type}) AS SkuPriceDetails) "
                   f"FROM read_csv('{src}', all_varchar=true)) TO '{path}' (FORMAT parquet)")
    duck = Store()
    duck.load_billing([path])
    on_spark = Store()
    engine.load_billing(on_spark, [path], spark=spark)
    sql = "SELECT x_InstanceType, x_GpuCount, BilledCost FROM costs"
    assert on_spark.con.execute(sql).fetchall() == duck.con.execute(sql).fetchall() == [
        ("p5.48xlarge", 8, Decimal("10.00"))]


def test_cur2_parquet_with_map_columns_reads_on_spark_as_on_duckdb(spark, tmp_path):
    """CUR 2.0 Parquet holds resource_tags and product as MAPs, which Spark cannot take the DISTINCT of: the
    expressions that read them are computed per line there, and the summaries are DuckDB's to the cent."""
    from test_readers_cur2 import write_cur2_parquet

    duck, on_spark = both([write_cur2_parquet(tmp_path)], spark)
    assert on_spark == duck
    assert duck["stats"]["billed_cost"] and any(tags for _, tags in duck["resources"].values()), "tags to compare"


@pytest.mark.parametrize(("empty", "what"), [("BilledCost", "the cost is empty on 3 lines"),
                                             ("ChargePeriodStart", "the charge period start is empty on 3 lines")])
def test_lines_without_a_cost_or_start_are_counted_as_lines_on_spark(spark, tmp_path, empty, what):
    """Spark sums the lines of one resource, day and tag set into one row before classifying it: the refusal of
    lines without a cost or a start still counts the lines (three, two of them in one row with a line that has
    both), names the file, and keeps nothing of it."""
    from billing_csv import charge, write

    from auditor.errors import InputError

    day = datetime(2026, 7, 1)
    rows = [charge("vm-a", day + timedelta(hours=h)) for h in range(3)] + [charge("vm-b", day)]
    for row in (rows[0], rows[2], rows[3]):
        row[empty] = ""
    path = write(tmp_path / "focus.csv", rows)
    store = Store()
    with pytest.raises(InputError, match=what) as refused:
        engine.load_billing(store, [path], spark=spark)
    assert refused.value.path == str(path)
    assert store.con.execute("SELECT count(*) FROM costs").fetchone() == (0,)


def test_a_file_that_is_not_utf8_is_refused_on_spark_as_on_duckdb(spark, tmp_path):
    """A CSV saved as Windows-1252 (`caf\\xe9`): DuckDB refuses its line; Spark, which reads the byte as U+FFFD,
    refuses the file, and no line of it is kept. A UTF-8 file beside it is read."""
    bad = REPO / "fixtures" / "bad" / "cur-latin1-row.csv"
    good = tmp_path / "cur-utf8.csv"
    good.write_bytes(bad.read_bytes().replace(b"caf\xe9-", b"cafe-"))
    store = Store()
    with pytest.raises(engine.InputError) as refused:
        engine.load_billing(store, [good, bad], spark=spark)
    assert refused.value.path == str(bad)
    assert refused.value.message == (
        "the file is not UTF-8 text (Latin-1 or Windows-1252?): Spark reads such a byte as '\ufffd'; save the file "
        "as UTF-8 (read it with --engine duckdb for the line and column)")
    assert store.con.execute("SELECT count(*) FROM costs").fetchone() == (0,)
    assert [s.path for s in engine.load_billing(Store(), [good], spark=spark)] == [str(good)]


def test_tags_that_differ_only_in_case_read_on_spark_as_on_duckdb(spark, tmp_path):
    """Two AWS tags in case (`resourceTags/user:team`, `resourceTags/user:Team`): two tags on Spark too, from a CSV
    (Spark names the columns its own way: renamed by their places); a Parquet or JSON file, whose twins Spark
    cannot read apart, is refused with the way to read it."""
    import pyarrow.parquet as pq

    path = REPO / "fixtures" / "bad" / "cur-tag-case.csv"
    duck, on_spark = Store(), Store()
    duck.load_billing([path])
    engine.load_billing(on_spark, [path], spark=spark)
    tags = "SELECT Tags FROM costs"
    assert on_spark.con.execute(tags).fetchall() == duck.con.execute(tags).fetchall() == [
        ({"team": "nlp", "Team": "vision"},)]
    parquet = tmp_path / "cur.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{path}', all_varchar = true)) TO '{parquet}'")  # `..._Team_1`
    table = pq.read_table(parquet)
    pq.write_table(table.rename_columns([c.removesuffix("_1") for c in table.column_names]), parquet)
    with pytest.raises(engine.InputError, match="differ only in case .* read the file with --engine duckdb"):
        engine.load_billing(Store(), [parquet], spark=spark)
    # `Équipe` and `équipe`: two tags to DuckDB, which folds ASCII letters alone; one name to Spark, even in a CSV
    unicode = tmp_path / "cur-unicode.csv"
    unicode.write_text(path.read_text(encoding="utf-8").replace("user:team", "user:équipe").replace(
        "user:Team", "user:Équipe"), encoding="utf-8")
    duck = Store()
    duck.load_billing([unicode])
    assert duck.con.execute(tags).fetchall() == [({"équipe": "nlp", "Équipe": "vision"},)]
    with pytest.raises(engine.InputError, match="differ only in case .* read the file with --engine duckdb"):
        engine.load_billing(Store(), [unicode], spark=spark)

"""`--engine spark` on every shape of the benchmark (benchmarks/generate.py), at small sizes: its audit.json equals
DuckDB's figure by figure. The high-churn shape (thousands of short-lived resources, descriptions that name each
line's hour and price, amounts as Parquet DOUBLEs): every figure equals DuckDB's, exactly before any rounding, and
what Spark sends back to the driver is the reduced rows (one per file, UTC day and distinct resource, usage type,
tags and the like), never one per line. On heavy tag churn with ties made on purpose (tagchurn-parquet), Spark
groups the lines into rows of another grain than DuckDB, and every choice among equals is made by a stated key over
sums. The many-files shapes (parts-csv-gz, tiny-files) are read by Spark as one scan per folder, each line naming
its file, and each file's own figures (its lines, its period, its costs) are DuckDB's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.tables import spark as engine
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
LINES = 12_000  # some 250 short-lived resources
TAGCHURN_LINES = 20_000  # 71 nodes, every tie below among them (test_tagchurn_data_holds_every_tie)


SMALL = 6_000  # lines of today's formats and the many-files shapes
# The many-files shapes made smaller: 120 gzip parts and 102 tiny files, 40 and 34 a month (past the 32 files at
# which Spark lists a folder's files in a job of its own, as it does a large export's)
PARTS, TINY_FILES = 40, 99


def _generate(lines: int, out: Path, shapes: tuple[str, ...]) -> dict:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import generate

    with pytest.MonkeyPatch.context() as m:
        m.setattr(generate, "PARTS", PARTS)
        m.setattr(generate, "TINY_FILES", TINY_FILES)
        return generate.generate(lines, out, shapes)


@pytest.fixture(scope="module")
def churn(tmp_path_factory) -> dict:
    return _generate(LINES, tmp_path_factory.mktemp("churn"), ("churn-parquet",))


@pytest.fixture(scope="module")
def tagchurn(tmp_path_factory) -> dict:
    return _generate(TAGCHURN_LINES, tmp_path_factory.mktemp("tagchurn"), ("tagchurn-parquet",))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict:
    return _generate(SMALL, tmp_path_factory.mktemp("small"),
                     ("cur-parquet", "focus-parquet", "cur-csv-gz", "parts-csv-gz", "tiny-files"))


# Per resource, day and everything the audit groups by: every amount summed, lines counted, first and last times.
FIGURES = """
    SELECT x_SourceFile, date_trunc('day', ChargePeriodStart) AS day, ResourceId, x_UsageType, x_CostCategory,
           x_InstanceType, x_GpuModel, BillingCurrency, RegionId,
           CAST(list_sort(map_entries(Tags)) AS VARCHAR) AS tags,  -- Spark sorts a map's keys
           sum(BilledCost), sum(EffectiveCost), sum(ListCost), sum(ConsumedQuantity), sum(x_Lines),
           min(ChargePeriodStart), max(ChargePeriodEnd)
    FROM costs GROUP BY ALL ORDER BY ALL"""


def test_spark_figures_equal_duckdb_exactly_and_only_reduced_rows_come_back(churn, spark):
    files = [Path(p) for p in churn["formats"]["churn-parquet"]]
    duck = Store()
    duck.load_billing(files)
    on_spark = Store()
    engine.load_billing(on_spark, files, spark=spark)
    lines = sum(s.rows for s in duck.sources)
    assert lines == LINES
    described = duck.lines().execute("SELECT count(DISTINCT ChargeDescription) FROM lines").fetchone()[0]
    assert described > LINES / 2, "the shape: descriptions name the hour and the price"
    # Exact: DECIMAL sums of the very same per-line amounts (a DOUBLE cast as DuckDB casts it), not only to the cent.
    figures = duck.con.execute(FIGURES).fetchall()
    assert on_spark.con.execute(FIGURES).fetchall() == figures
    assert len({r[2] for r in figures}) > 200, "many short-lived resources"
    # What came back to the driver is the costs table Spark's rows were inserted into: one row per resource-day
    # and classification key at most, so at most DuckDB's rollup (which groups the export's own columns) and
    # far fewer than the lines.
    returned = on_spark.con.execute("SELECT count(*), sum(x_Lines) FROM costs").fetchone()
    assert returned[1] == lines
    assert returned[0] <= duck.con.execute("SELECT count(*) FROM costs").fetchone()[0]
    assert returned[0] <= len(figures) < lines / 5
    assert returned[0] < described / 2, "grouped by description, the rows would not collapse"
    keys = on_spark.con.execute("SELECT count(*) FROM (SELECT DISTINCT x_SourceFile, "
                                "date_trunc('day', ChargePeriodStart), * EXCLUDE (x_SourceFile, ChargeDescription, "
                                "BilledCost, EffectiveCost, ListCost, ConsumedQuantity, ChargePeriodStart, "
                                "ChargePeriodEnd, x_Lines) FROM costs)").fetchone()[0]
    assert keys == returned[0], "no two rows share a file, a day and a key: the description is no key"


SHAPES = {"churn-parquet": "churn", "tagchurn-parquet": "tagchurn", "cur-parquet": "small", "focus-parquet": "small",
          "cur-csv-gz": "small", "parts-csv-gz": "small", "tiny-files": "small"}


# The ties tagchurn-parquet is made with (benchmarks/generate.py): one node in seven bills exactly $1 a line, and the
# last hour of every tagged node is billed under two tag sets of its own, half the lines each. Counted over the raw
# export, so that each choice among equals the audit makes (entities.resource_spend, entities.transfer_flows) is
# exercised: a node's tag sets charged last, at equal cost; a node's usage types on one day, at equal cost; and
# resources at equal cost among a transfer route's top five.
TIES = {
    "last tag sets": """
        WITH s AS (SELECT rid, team, owner, project, run, max(e) AS e, sum(c) AS c FROM l GROUP BY ALL),
             last AS (SELECT * FROM s QUALIFY e = max(e) OVER (PARTITION BY rid)),
             top AS (SELECT * FROM last QUALIFY c = max(c) OVER (PARTITION BY rid))
        SELECT count(*) FROM (SELECT rid FROM top GROUP BY rid HAVING count(*) >= 2)""",
    "usage types of a day": """
        WITH s AS (SELECT rid, day, ut, sum(c) AS c FROM l GROUP BY ALL),
             top AS (SELECT * FROM s QUALIFY c = max(c) OVER (PARTITION BY rid, day))
        SELECT count(*) FROM (SELECT rid, day FROM top GROUP BY ALL HAVING count(*) >= 2)""",
    "top five of a transfer route": """
        WITH s AS (SELECT account, ut, rid, sum(c) AS c FROM l WHERE family = 'Data Transfer' GROUP BY ALL),
             top AS (SELECT * FROM s QUALIFY row_number() OVER (PARTITION BY account, ut ORDER BY c DESC, rid) <= 5)
        SELECT count(*) FROM (SELECT account, ut, c FROM top GROUP BY ALL HAVING count(*) >= 2)""",
}


@pytest.mark.slow  # the data of the Spark comparison below; 2 s to make
def test_tagchurn_data_holds_every_tie(tagchurn):
    import duckdb

    files = ", ".join(f"'{f}'" for f in tagchurn["formats"]["tagchurn-parquet"])
    con = duckdb.connect()
    con.execute(f"""CREATE VIEW l AS SELECT line_item_resource_id AS rid, line_item_usage_account_id AS account,
        line_item_usage_type AS ut, product_product_family AS family, line_item_usage_end_date AS e,
        date_trunc('day', line_item_usage_start_date) AS day, CAST(line_item_unblended_cost AS DECIMAL(38, 9)) AS c,
        resource_tags_user_team AS team, resource_tags_user_owner AS owner, resource_tags_user_project AS project,
        resource_tags_user_run AS run FROM read_parquet([{files}])
        WHERE line_item_resource_id IS NOT NULL AND line_item_line_item_type = 'Usage'""")
    ones, tagged_ones = con.execute("SELECT count(*), count(team) FROM (SELECT rid, max(team) AS team FROM l "
                                    "GROUP BY rid HAVING min(c) = 1 AND max(c) = 1)").fetchone()
    assert ones >= 5 and tagged_ones >= 4, (ones, tagged_ones)
    tied = {what: con.execute(sql).fetchone()[0] for what, sql in TIES.items()}
    # each tagged $1 node's last hour, but a node cut short by the line count of its month (its last hour unbilled)
    assert tied["last tag sets"] >= tagged_ones * 3 // 4, tied
    assert tied["usage types of a day"] >= ones, tied  # each $1 node's days, one at least
    assert tied["top five of a transfer route"] >= 1, tied


def test_every_benchmark_shape_is_compared():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import generate

    assert set(SHAPES) == set(generate.FORMATS + generate.SHAPES)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_spark_audit_json_equals_duckdb_on_every_shape(shape, request, spark, tmp_path):
    from auditor.cli import cli

    data = request.getfixturevalue(SHAPES[shape])
    files = data["formats"][shape]
    args = ["audit", "--policy", data["policy"], "--inventory", data["inventories"][shape], "-q",
            "--as-of", "2026-10-01", *files]
    runner = CliRunner()
    duck = runner.invoke(cli, [*args, "--out", str(tmp_path / "duckdb")])
    on_spark = runner.invoke(cli, [*args, "--out", str(tmp_path / "spark"), "--engine", "spark",
                                   "--spark-conf", "spark.sql.shuffle.partitions=3"])
    assert duck.exit_code in (0, 1), duck.output
    assert on_spark.exit_code == duck.exit_code, on_spark.output
    a, b = (json.loads((tmp_path / d / "audit.json").read_text()) for d in ("duckdb", "spark"))
    assert a["findings"] and a["summary"]["billed_cost"], "findings and spend to compare"
    assert {k: v for k, v in b.items() if k != "inputs"} == {k: v for k, v in a.items() if k != "inputs"}
    # Each file by its name, with its own lines and figures (DuckDB reads the many-files shapes as one scan too)
    billing = [{k: v for k, v in s.items() if k != "first_row"} for s in a["inputs"]["billing"]]
    assert [{k: v for k, v in s.items() if k != "first_row"} for s in b["inputs"]["billing"]] == billing
    assert sum(s["rows"] for s in billing) == (TINY_FILES * 20 if shape == "tiny-files" else data["lines"])
    if shape in ("parts-csv-gz", "tiny-files"):
        assert len(billing) == 3 * (PARTS if shape == "parts-csv-gz" else TINY_FILES // 3 + 1)  # files a month


def test_spark_settings_are_checked_before_anything_runs(tmp_path):
    from auditor.cli import cli

    policy = REPO / "fixtures" / "demo" / "policy.yml"
    billing = str(REPO / "fixtures" / "demo" / "billing")
    runner = CliRunner()
    wrong = runner.invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "a"), "--engine", "spark",
                                "--spark-conf", "driver.memory", billing])
    assert wrong.exit_code == 2
    assert "--spark-conf 'driver.memory': expected a Spark setting as KEY=VALUE" in wrong.output
    unused = runner.invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "b"),
                                 "--spark-conf", "spark.driver.memory=8g", billing])
    assert unused.exit_code == 2
    assert "--spark-master and --spark-conf are for --engine spark" in unused.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists(), "nothing written"
    assert engine.parse_conf(["spark.driver.memory = 8g", "spark.sql.shuffle.partitions=8"]) == \
        {"spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "8"}

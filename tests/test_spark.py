"""`--engine spark`: the same normalization SQL, translated to Spark's dialect, run on Spark in local mode, must
give the summaries DuckDB gives, to the cent: totals, categories, providers, transfer volume, GPU-hours, spend
per team, per resource and per transfer flow; on hand-written and real public exports (CSV, gzip CSV), the
benchmark generator's CUR and FOCUS Parquet, and the demo audit end to end through the CLI.
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.engine import team_sql
from auditor.engines import spark as engine
from auditor.policy import load_policy
from auditor.store import BILLING_ENGINE, Store

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO.parent / "shared" / "samples" / "billing"
DEMO = REPO / "fixtures" / "demo"
CENT = Decimal("0.01")
# Line counts are not kept by the reduction (a reduced row stands for a day of lines); everything else is.
PER_LINE = {"rows", "lines_by_category"}


@pytest.fixture(scope="module")
def spark():
    s = engine.session("local[2]")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from generate import generate

    out = tmp_path_factory.mktemp("bench")
    generate(600, out, ("cur-parquet", "focus-parquet"))
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
    stats = {k: v for k, v in store.window_stats(window).items() if k not in PER_LINE}
    return cents({
        "window": (window.start, window.end),
        "stats": stats,
        "teams": store.spend_by(window, team_sql(policy)),
        # (not the category: a resource's is its costliest line's, and a tie, as between $0 lines, goes either way)
        "resources": {r.id: (r.cost, r.instance_type, r.tags) for r in store.resource_spend(window)},
        "flows": {f.id: (f.gb, f.cost) for f in store.transfer_flows(window)},
    })


def both(paths: list[Path], spark) -> tuple[dict, dict]:
    duck = Store()
    duck.load_billing(paths)
    on_spark = Store()
    engine.load_billing(on_spark, paths, spark=spark)
    # A file's line count is the export's, not the reduced rows'.
    assert [s.rows for s in on_spark.sources] == [s.rows for s in duck.sources]
    return summaries(duck), summaries(on_spark)


@pytest.mark.parametrize("name", ["cur-gpu-spot", "focus-sample", "cur-sample"])
def test_spark_summaries_equal_duckdb(name, spark):
    paths = {"cur-gpu-spot": [REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"],
             "focus-sample": [SAMPLES / "focus" / "FOCUS-Sample-Data__FOCUS-1.0__focus_sample.csv"],
             "cur-sample": [SAMPLES / "aws_cur_legacy" / "focus_converters__sample-anonymous-aws-export-dataset.csv"],
             }[name]
    duck, on_spark = both(paths, spark)
    assert on_spark == duck
    assert duck["stats"]["billed_cost"], "the fixture has spend"


def test_spark_parquet_cur_and_focus_equal_duckdb(generated, spark):
    for fmt in ("cur-parquet", "focus-parquet"):
        files = sorted((generated / fmt).iterdir())[:1]
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
    assert BILLING_ENGINE.get() is None, "--engine spark holds for its own run only"
    a, b = (json.loads((tmp_path / d / "audit.json").read_text()) for d in ("duckdb", "spark"))
    for key in ("billed_cost", "effective_cost", "gpu_cost", "spot_cost", "by_category", "by_provider", "by_team",
                "transfer_gb_out", "gpu_hours", "monthly_savings"):
        assert b["summary"][key] == a["summary"][key], key
    assert [s["rows"] for s in b["inputs"]["billing"]] == [s["rows"] for s in a["inputs"]["billing"]]
    fingerprints = lambda doc: sorted((f["rule"], f["resource"], f.get("cost")) for f in doc["findings"])  # noqa: E731
    assert fingerprints(b) == fingerprints(a)
    assert a["findings"], "the demo has findings to compare"


def test_translation_rewrites_what_sqlglot_leaves_in_duckdb_terms():
    sql = engine.to_spark("SELECT timezone('UTC', CAST(t AS TIMESTAMPTZ)) AS a, d SIMILAR TO '.* to .+' AS b, "
                          "regexp_extract(d, '(.+) to (.+)', ['src', 'dst']) AS c, k[6:] AS e FROM x")
    assert "TIMEZONE" not in sql.upper() and "SIMILAR" not in sql.upper()
    assert "RLIKE '^(?:.* to .+)$'" in sql
    assert "NAMED_STRUCT('src', REGEXP_EXTRACT(d, '(.+) to (.+)'), 'dst', REGEXP_EXTRACT(d, '(.+) to (.+)', 2))" in sql
    assert "SUBSTRING(k, 6)" in sql

"""The benchmark harness works (benchmarks/run.py): the generator writes the same quarter as CUR Parquet, CUR
gzip CSV and FOCUS Parquet, which the audit reads to the same totals; the harness runs the audit, the DuckDB
floor and the pandas way on those files, finds the same billed total with each, and writes its report. Nothing
here is timed: the measurements are BENCHMARKS.md's, made by the harness at 1M and 10M lines.
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import generate  # noqa: E402
import run  # noqa: E402

from auditor.tables import stats  # noqa: E402
from auditor.tables.store import Store  # noqa: E402

LINES = 2000
pytestmark = pytest.mark.slow  # generates a quarter in three formats and runs the harness's subprocesses


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    generate.generate(LINES, out / str(LINES))
    return out


def test_generator_writes_three_months_in_every_format_with_the_same_totals(data):
    info = json.loads((data / str(LINES) / "DONE.json").read_text())
    totals = {}
    for fmt in generate.FORMATS:
        files = [Path(p) for p in info["formats"][fmt]]
        assert len(files) == 3 and all(f.stat().st_size > 0 for f in files)
        store = Store()
        sources = store.load_billing(files)
        assert sum(s.rows for s in sources) == LINES
        assert {s.format for s in sources} == {"focus-1.0" if fmt.startswith("focus") else "aws-cur"}
        figures = stats.window_stats(store.con, store.data_window())
        assert figures["period_start"].isoformat() == "2026-07-01T00:00:00"
        assert "2026-09-30" < figures["period_end"].isoformat() <= "2026-10-01T00:00:00"  # three months
        # GPU and other instances, storage, transfer between regions, spot, and some lines without tags.
        assert {"gpu_compute", "other_compute", "storage", "transfer"} <= set(figures["by_category"])
        assert figures["spot_cost"]["USD"] > 0 and "inter_region" in figures["transfer_gb_out"]
        untagged = store.lines().execute("SELECT count(*) FROM lines WHERE cardinality(Tags) = 0").fetchone()[0]
        assert 0 < untagged < LINES
        totals[fmt] = {k: figures[k]["USD"].quantize(Decimal("0.01")) for k in ("billed_cost", "gpu_cost", "spot_cost")}
    assert totals["cur-parquet"] == totals["cur-csv-gz"] == totals["focus-parquet"]
    inventory = json.loads(Path(info["inventory"]).read_text())
    assert inventory["assets"] and inventory["gpu_usage"] and inventory["jobs"]


def test_generator_is_deterministic(data, tmp_path):
    again = generate.generate(LINES, tmp_path / "again", ("cur-parquet",))
    first = json.loads((data / str(LINES) / "DONE.json").read_text())["formats"]["cur-parquet"]
    for a, b in zip(first, again["formats"]["cur-parquet"], strict=True):
        con = Store().con
        diff = con.execute(f"SELECT count(*) FROM (SELECT * FROM read_parquet('{a}') EXCEPT ALL "
                           f"SELECT * FROM read_parquet('{b}'))").fetchone()[0]
        assert diff == 0


def test_harness_measures_audit_floor_and_pandas_on_the_same_files(data, tmp_path):
    results = run.run([LINES], data, ("cur-parquet", "cur-csv-gz"), run.TOOLS, log=lambda _: None)
    assert len(results["runs"]) == 8  # audit, inspect, floor and pandas on each
    for r in results["runs"]:
        assert r["rc"] == 0, r.get("stderr")
        assert r["wall_s"] > 0 and r["peak_rss"] > 10 * 2**20 and r["lines_per_s"] > 0
    same_total = [c for c in results["checks"] if "same billed total" in c["target"]]
    assert len(same_total) == 4 and all(c["met"] for c in same_total), same_total  # and inspect's, per format
    results["machine"], results["date"] = run.machine(), "today"
    text = run.render(results, "python benchmarks/run.py --lines 2000")
    assert "| cur-parquet | audit |" in text and "| cur-csv-gz | pandas |" in text and "## Targets" in text


def test_issue_15_shapes_high_churn_and_many_parts(tmp_path, monkeypatch):
    """The high-churn shape: short-lived resources of about 48 lines, most untagged, every line its own
    description (so nothing a rollup groups by collapses); the many-parts shape: today's CUR lines in gzip
    parts, and a folder of tiny files; the floor reads them to the same totals as the lines. The benchmark
    writes 2,001 parts and 5,000 tiny files; a tenth of each here, the same shape made in a tenth of the time."""
    monkeypatch.setattr(generate, "PARTS", generate.PARTS // 10)
    monkeypatch.setattr(generate, "TINY_FILES", generate.TINY_FILES // 10)
    n = 20000
    info = generate.generate(n, tmp_path, ("churn-parquet", "parts-csv-gz", "cur-csv-gz", "tiny-files"))
    con = Store().con
    churn = "[" + ", ".join(f"'{f}'" for f in info["formats"]["churn-parquet"]) + "]"
    lines, resources, untagged, keys, described = con.execute(f"""
        SELECT count(*), count(DISTINCT line_item_resource_id),
               count(DISTINCT line_item_resource_id) FILTER (WHERE resource_tags_user_team IS NULL),
               count(DISTINCT (line_item_resource_id, line_item_usage_type, line_item_line_item_description,
                               date_trunc('day', line_item_usage_start_date))),
               count(DISTINCT (line_item_resource_id, line_item_line_item_description))
        FROM read_parquet({churn})""").fetchone()
    assert lines == n and keys == n and described == n
    assert 30 < n / resources < 70 and 0.5 < untagged / resources < 0.7
    parts = sorted(Path(info["formats"]["parts-csv-gz"][0]).rglob("*.csv.gz"))
    tiny = sorted(Path(info["formats"]["tiny-files"][0]).rglob("*.csv"))
    assert len(parts) == 3 * generate.PARTS and len(tiny) >= generate.TINY_FILES
    sums = {}
    for fmt in ("parts-csv-gz", "cur-csv-gz", "tiny-files"):
        out = run.measure([sys.executable, str(REPO / "benchmarks" / "floor.py"), fmt, *info["formats"][fmt]])
        assert out["rc"] == 0, out["stderr"]
        sums[fmt] = json.loads(out["stdout"])
    same = lambda s: {**s, "total": {k: round(v, 2) for k, v in s["total"].items()}}  # noqa: E731 - float sums
    assert same(sums["parts-csv-gz"]) == same(sums["cur-csv-gz"]) and sums["cur-csv-gz"]["lines"] == n
    assert sums["tiny-files"]["lines"] == generate.lines_of(info, "tiny-files") == generate.TINY_FILES * 20


def test_tree_measurement_counts_a_child_the_process_does_not_wait_for():
    # As PySpark starts its JVM: a child that burns CPU and holds memory, still running when the parent exits
    # (which it does once the child says it has burnt its CPU, and the harness has polled it since).
    child = ("import time; b = bytearray(200 << 20); t = time.process_time()\n"
             "while time.process_time() - t < 1.2: pass\n"
             "print('done', flush=True); time.sleep(5)")
    parent = (f"import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', {child!r}], "
              "stdout=subprocess.PIPE); c.stdout.readline(); time.sleep(0.5)")
    plain = run.measure([sys.executable, "-c", parent])
    tree = run.measure([sys.executable, "-c", parent], tree=True)
    assert plain["rc"] == tree["rc"] == 0
    assert plain["cpu_s"] < 1.0, "the child's CPU is not in the parent's rusage"
    assert tree["others_cpu_s"] >= 1.0 and tree["cpu_s"] >= tree["python_cpu_s"] + 1.0
    assert tree["others_peak_rss"] >= 200 << 20 and tree["peak_rss"] >= tree["others_peak_rss"]


def test_differences_name_every_figure_that_differs():
    a = {"generated_at": "x", "summary": {"billed_cost": {"USD": "1.00"}}, "findings": [{"cost": "2"}, {"cost": "3"}]}
    b = {"generated_at": "y", "summary": {"billed_cost": {"USD": "1.01"}}, "findings": [{"cost": "2"}]}
    assert run.differences(a, a | {"generated_at": "z"}) == []
    assert run.differences(a, b) == ["/findings: 2 items, 1", "/summary/billed_cost/USD: '1.00' != '1.01'"]

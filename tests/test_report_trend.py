"""Quarter over quarter (`audit --previous`), re-rendering a saved audit (`gpu-auditor report`), and the
audit's generated_at (never the clock)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.core import run_audit
from auditor.model import fmt_money, money
from auditor.outputs.report import render_html, render_json, render_md
from auditor.policy import load_policy
from auditor.tables.store import Store
from auditor.trend import compare
from auditor.window import parse_quarter

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
IDLE_H100 = "i-0a1f3c5e7b9d24680"
RETIRED = "i-0retired5e7b9d2468"


def last_quarter(doc: dict) -> dict:
    """The demo organisation's 2026-Q2 audit, made from its real 2026-Q3 audit.json for these tests (the demo
    data set has one quarter): the nightly dataset copy (NET001) and the two spot jobs (SPOT001) only began in
    Q3, the idle H100 was still under its waiver, and an idle A10G box (RETIRED) was open and has since gone."""
    prev = copy.deepcopy(doc)
    prev["window"] = {"start": "2026-04-01T00:00:00Z", "end": "2026-07-01T00:00:00Z", "label": "2026-Q2"}
    prev["generated_at"], prev["as_of"] = "2026-07-10T00:00:00Z", "2026-07-10"
    prev["trend"] = None
    kept = []
    for f in prev["findings"]:
        if f["rule"] in ("NET001", "SPOT001"):
            continue
        if f["resource"] == IDLE_H100:
            f["waived"] = True
            f["waiver"] = {"reason": "kept warm for the detector v3 launch", "owner": "lead-vision@example.com",
                           "expires": "2026-08-31"}
        kept.append(f)
    gone = copy.deepcopy(next(f for f in kept if f["rule"] == "GPU001"))
    gone.update(resource=RETIRED, team="platform", waived=False, waiver=None, monthly_savings="2120.40",
                message="g5.xlarge platform-old-a10g averaged 1.1% GPU utilisation over 2,184 h",
                fingerprint=hashlib.sha256(RETIRED.encode()).hexdigest()[:16])
    prev["findings"] = kept + [gone]
    s = prev["summary"]
    s["billed_cost"], s["gpu_cost"], s["monthly_savings"] = {"USD": "251000.00"}, {"USD": "220500.00"}, \
        {"USD": "8405.41"}
    s["by_team"] = {"vision": {"USD": "120000.00"}, "nlp": {"USD": "70000.00"}, "platform": {"USD": "50000.00"},
                    "(unattributed)": {"USD": "11000.00"}}
    return prev


@pytest.fixture(scope="module")
def q3(demo_audit_result):
    """The demo's 2026-Q3 audit as of 2026-10-15 with its inventory: the session's (conftest.py)."""
    assert demo_audit_result.as_of == date(2026, 10, 15)
    return demo_audit_result


@pytest.fixture(scope="module")
def previous_file(q3, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("q2") / "audit.json"
    path.write_text(json.dumps(last_quarter(q3.to_dict()), indent=2), encoding="utf-8")
    return path


def run(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)


def demo_args(out: Path, *extra) -> list:
    return ["audit", "-q", "--policy", DEMO / "policy.yml", "--inventory", DEMO / "inventory.json",
            "--quarter", "2026-Q3", "--as-of", "2026-10-15", "--out", out, *extra, DEMO / "billing"]


# ---- the comparison ------------------------------------------------------------------------------------------


def test_trend_sorts_findings_by_fingerprint(q3):
    doc = q3.to_dict()
    trend = compare(doc, last_quarter(doc))
    f = trend["findings"]
    fp = {x["resource"]: x["fingerprint"] for x in doc["findings"]}
    assert [x["resource"] for x in f["resolved"]] == [RETIRED]
    assert f["resolved"][0]["now"] == "gone"
    new = {x["resource"] for x in f["new"]}
    assert {x["resource"] for x in doc["findings"] if x["rule"] in ("NET001", "SPOT001")} <= new
    assert IDLE_H100 in new  # its waiver lapsed: open now, waived then
    assert next(x for x in f["new"] if x["resource"] == IDLE_H100)["was_waived"] is True
    still = {x["fingerprint"] for x in f["still_open"]}
    open_now = {x["fingerprint"] for x in doc["findings"] if not x["waived"]}
    assert still == open_now - {x["fingerprint"] for x in f["new"]}
    assert fp["i-0c2e4a6b8d0f13579"] in still  # the oversized A100, open in both quarters
    assert all(x["since"] == "2026-Q2" for x in f["still_open"])
    counts = trend["findings"]["counts"]
    assert counts == {"previous_open": len([x for x in last_quarter(doc)["findings"] if not x["waived"]]),
                      "open": len(open_now), "new": len(f["new"]), "still_open": len(still), "resolved": 1}


def test_trend_spend_change(q3):
    doc = q3.to_dict()
    trend = compare(doc, last_quarter(doc))
    billed = trend["billed_cost"]
    now = Decimal(doc["summary"]["billed_cost"]["USD"])
    assert billed["previous"] == {"USD": "251000.00"} and billed["current"] == {"USD": str(now)}
    assert billed["change"] == {"USD": str(now - Decimal("251000.00"))}
    assert billed["change_pct"] == {"USD": round(float((now - 251000) / 251000 * 100), 1)}
    nlp = Decimal(doc["summary"]["by_team"]["nlp"]["USD"])
    assert trend["by_team"]["nlp"]["change"] == {"USD": str(nlp - Decimal("70000.00"))}


def test_still_open_keeps_the_quarter_it_was_first_seen(q3):
    doc = q3.to_dict()
    prev = last_quarter(doc)
    oversized = next(f for f in prev["findings"] if f["resource"] == "i-0c2e4a6b8d0f13579")
    prev["trend"] = {"findings": {"still_open": [{"fingerprint": oversized["fingerprint"], "since": "2026-Q1"}]}}
    still = {f["resource"]: f["since"] for f in compare(doc, prev)["findings"]["still_open"]}
    assert still["i-0c2e4a6b8d0f13579"] == "2026-Q1"
    assert {v for k, v in still.items() if k != "i-0c2e4a6b8d0f13579"} == {"2026-Q2"}


# ---- the CLI: audit --previous, report, generated_at ---------------------------------------------------------


@pytest.fixture(scope="module")
def with_previous(previous_file, tmp_path_factory) -> Path:
    """The demo audited with --previous (last quarter's audit.json): the folder it wrote."""
    out = tmp_path_factory.mktemp("with-previous") / "audit"
    result = run(*demo_args(out, "--previous", previous_file))
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.heavy
def test_audit_with_previous_writes_the_trend(previous_file, with_previous):
    out = with_previous
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["inputs"]["previous"] == {"path": str(previous_file),
                                         "sha256": hashlib.sha256(previous_file.read_bytes()).hexdigest()}
    assert doc["trend"]["previous"]["label"] == "2026-Q2"
    assert doc["trend"]["findings"]["counts"]["resolved"] == 1
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Resolved since last quarter (1)" in html and RETIRED in html
    now = Decimal(doc["summary"]["billed_cost"]["USD"])
    assert f"up {fmt_money(now - 251000)} (+{(now - 251000) / 251000 * 100:.1f}%) on 2026-Q2" in html
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Against the audit of 2026-Q2: 1 resolved" in md


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", r"prev\.json:1: not valid JSON"),
    ('{"schema": "something/else"}', "not a gpu-auditor audit.json"),
    ('{"schema": "gpu-auditor/audit@1", "window": {}}', "not a complete audit"),
])
def test_a_bad_previous_audit_is_one_line_exit_2(tmp_path, content, message):
    bad = tmp_path / "prev.json"
    bad.write_text(content, encoding="utf-8")
    result = run(*demo_args(tmp_path / "out", "--previous", bad))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.search(message, result.stderr), result.stderr
    assert not (tmp_path / "out").exists()  # checked before the audit ran: nothing written


@pytest.mark.heavy
def test_report_rerenders_a_saved_audit(with_previous, tmp_path):
    out = with_previous
    for fmt, name in (("md", "report.md"), ("html", "report.html"), ("csv", "findings.csv"),
                      ("json", "audit.json")):
        result = run("report", out / "audit.json", "--format", fmt)
        assert result.exit_code == 0, result.output
        assert result.stdout == (out / name).read_text(encoding="utf-8"), fmt
    again = tmp_path / "again"
    result = run("report", out / "audit.json", "--out", again)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in again.iterdir()) == ["actions.csv", "findings.csv", "jobs.csv", "report.html",
                                                       "report.md"]
    for name in ("findings.csv", "report.html", "report.md"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_report_for_one_team(demo_folder):
    out = demo_folder  # the session's demo audit: these arguments (conftest.demo_run)
    result = run("report", out / "audit.json", "--team", "nlp", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = result.stdout.strip().splitlines()[1:]
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert len(rows) == sum(1 for f in doc["findings"] if f["team"] == "nlp") > 0
    html = run("report", out / "audit.json", "--team", "nlp", "--format", "html").stdout
    assert "2026-Q3 · team nlp" in html


@pytest.fixture(scope="module")
def gpu001_only(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu001") / "audit"
    assert run(*demo_args(out, "--rule", "GPU001")).exit_code == 0
    return out


@pytest.mark.heavy
@pytest.mark.parametrize(("args", "message"), [
    (["--team", "nobody", "--format", "md"], "no team 'nobody' in the audit"),
    (["--format", "md", "--format", "html"], "exactly one --format"),
])
def test_report_usage_errors(gpu001_only, args, message):
    result = run("report", gpu001_only / "audit.json", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_report_of_a_missing_or_foreign_file(tmp_path):
    result = run("report", tmp_path / "nope.json", "--format", "md")
    assert result.exit_code == 2 and "nope.json: no audit.json found here" in result.stderr
    (tmp_path / "x.json").write_text("[1, 2]", encoding="utf-8")
    result = run("report", tmp_path / "x.json", "--format", "md")
    assert result.exit_code == 2 and "not a gpu-auditor audit.json" in result.stderr


@pytest.mark.heavy
def test_generated_at_is_never_the_clock(demo_folder, tmp_path):
    a, b = demo_folder, tmp_path / "b"  # the session's demo audit (conftest.demo_run: these arguments), and another
    assert run(*demo_args(b)).exit_code == 0
    for name in ("audit.json", "report.md", "report.html", "findings.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    doc = json.loads((a / "audit.json").read_text(encoding="utf-8"))
    assert doc["generated_at"] == "2026-10-15T00:00:00Z"  # the as-of date
    assert doc["as_of"] == "2026-10-15"


@pytest.mark.heavy
def test_generated_at_from_option_and_source_date_epoch(tmp_path):
    result = run(*demo_args(tmp_path / "opt", "--rule", "GPU001", "--generated-at", "2026-10-20T14:30:00+02:00"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "opt" / "audit.json").read_text())["generated_at"] == "2026-10-20T12:30:00Z"
    result = run(*demo_args(tmp_path / "env", "--rule", "GPU001"), env={"SOURCE_DATE_EPOCH": "1792497600"})
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "env" / "audit.json").read_text())["generated_at"] == "2026-10-20T12:00:00Z"
    result = run(*demo_args(tmp_path / "bad", "--rule", "GPU001"), env={"SOURCE_DATE_EPOCH": "yesterday"})
    assert result.exit_code == 2 and "SOURCE_DATE_EPOCH 'yesterday'" in result.stderr


@pytest.mark.heavy
def test_same_inputs_same_bytes_in_process(q3):
    again = run_audit(load_policy(DEMO / "policy.yml"), [DEMO / "billing"], DEMO / "inventory.json",
                      parse_quarter("2026-Q3"), date(2026, 10, 15))
    again.as_of = date(2026, 10, 15)
    assert render_json(again) == render_json(q3)
    assert render_md(again) == render_md(q3)
    assert render_html(again) == render_html(q3)


@pytest.mark.heavy
def test_previous_window_from_the_billing(tmp_path):
    """Auditing August, the billing read also holds July: the report compares with it without --previous."""
    result = run("audit", "-q", "--policy", DEMO / "policy.yml", "--since", "2026-08-01", "--until", "2026-09-01",
                 "--as-of", "2026-09-15", "--out", tmp_path, DEMO / "billing")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "audit.json").read_text(encoding="utf-8"))
    pw = doc["summary"]["previous_window"]
    assert pw["label"] == "2026-07-01 to 2026-07-31"
    store = Store()
    store.load_billing([DEMO / "billing"])
    july = store.lines().execute("SELECT sum(BilledCost) FROM lines WHERE ChargePeriodStart >= '2026-07-01' "
                             "AND ChargePeriodStart < '2026-08-01'").fetchone()[0]
    assert pw["billed_cost"]["USD"] == str(money(july))
    assert doc["trend"] is None
    assert "From the billing of 2026-07-01 to 2026-07-31" in (tmp_path / "report.html").read_text(encoding="utf-8")

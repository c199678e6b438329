"""`gpu-auditor audit --baseline audit.json`: report and fail only on findings that are not in a previous audit
(matched by fingerprint); the known ones are listed, marked, under `baseline` in audit.json."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.core import run_audit
from auditor.model import Finding, Severity
from auditor.policy import load_policy
from auditor.window import parse_quarter

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
SCHEMA = json.loads((REPO / "auditor" / "data" / "audit.schema.json").read_text(encoding="utf-8"))
OVERSIZED_A100 = "i-0c2e4a6b8d0f13579"


def audit(out: Path, *extra: str):
    args = ["audit", "-q", "--policy", DEMO / "policy.yml", "--inventory", DEMO / "inventory.json", "--quarter",
            "2026-Q3", "--as-of", "2026-10-15", "--out", out, *extra, DEMO / "billing"]
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8")) if (out / "audit.json").exists() else None
    return result, doc


def valid(doc: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)


@pytest.fixture(scope="module")
def full(demo_run):
    """The demo audit without a baseline: the session's (conftest.demo_run), with these arguments."""
    assert demo_run.exit_code == 0, demo_run.output
    return json.loads((demo_run.folder / "audit.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """Last quarter's audit ran only GPU001 and TAG001."""
    out = tmp_path_factory.mktemp("partial")
    result, doc = audit(out, "--rule", "GPU001", "--rule", "TAG001")
    assert result.exit_code == 0, result.output
    return out / "audit.json", doc


def prints(findings: list[dict]) -> list[str]:
    return sorted(f["fingerprint"] for f in findings)


def test_without_a_baseline_nothing_is_marked(full):
    assert full["baseline"] is None
    assert full["findings"] and not any(f["in_baseline"] for f in full["findings"])
    valid(full)


@pytest.mark.heavy
def test_a_baseline_with_every_finding_leaves_nothing_to_report(full, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(full), encoding="utf-8")
    result, doc = audit(tmp_path / "out", "--baseline", base, "--fail-on", "info")
    assert result.exit_code == 0, result.output  # high findings exist, but all are known
    assert doc["findings"] == []
    assert doc["summary"]["findings"]["total"] == 0 and doc["summary"]["findings"]["waived"] == 0
    known = doc["baseline"]["findings"]
    assert doc["baseline"]["known"] == len(known) == len(full["findings"])
    assert prints(known) == prints(full["findings"])
    assert all(f["in_baseline"] for f in known)
    assert doc["baseline"]["path"] == str(base) and doc["baseline"]["window"] == "2026-Q3"
    assert f"baseline          {len(known)} known finding(s) in {base}, not reported" in result.stdout
    # the known findings keep their waiver marks
    assert [f["waived"] for f in known if f["resource"] == "i-0bench4f1a2b3c4d5"] == [True]
    valid(doc)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "findings.csv").read_text(encoding="utf-8"))))
    assert rows == []


@pytest.mark.heavy
def test_only_new_findings_are_reported_and_fail(full, partial, tmp_path):
    base, last = partial
    result, doc = audit(tmp_path / "out", "--baseline", base, "--fail-on", "high")
    assert result.exit_code == 1, result.output  # SPOT001, COM001 and BUD001 (high) are new
    old = {(f["rule"], f["resource"]) for f in last["findings"]}
    assert {f["rule"] for f in last["findings"]} == {"GPU001", "TAG001"}
    assert {(f["rule"], f["resource"]) for f in doc["findings"]} == \
        {(f["rule"], f["resource"]) for f in full["findings"]} - old
    assert prints(doc["baseline"]["findings"]) == prints(last["findings"])
    assert not any(f["in_baseline"] for f in doc["findings"])
    rows = list(csv.DictReader(io.StringIO((tmp_path / "out" / "findings.csv").read_text(encoding="utf-8"))))
    assert sorted(r["fingerprint"] for r in rows) == prints(doc["findings"])
    valid(doc)


@pytest.mark.heavy
def test_a_baseline_run_can_be_the_next_baseline(full, tmp_path):
    first = tmp_path / "first.json"
    first.write_text(json.dumps(full), encoding="utf-8")
    result, second = audit(tmp_path / "second", "--baseline", first)
    assert result.exit_code == 0 and second["findings"] == []
    # the second audit.json lists every finding under baseline: used as the next baseline, all are still known
    result, third = audit(tmp_path / "third", "--baseline", tmp_path / "second" / "audit.json", "--fail-on", "low")
    assert result.exit_code == 0, result.output
    assert third["findings"] == [] and prints(third["baseline"]["findings"]) == prints(full["findings"])


@pytest.mark.heavy
def test_a_changed_recommendation_is_a_new_finding(tmp_path):
    """The fingerprint holds rule, resource and what was recommended: the same machine with another
    recommended type is a new finding."""
    base = tmp_path / "base.json"
    stale = Finding(rule="GPU002", name="oversized-gpu", severity=Severity.MEDIUM, resource=OVERSIZED_A100,
                    message="m", entity_type="GpuAsset", key="g5.48xlarge")
    same = Finding(rule="GPU002", name="oversized-gpu", severity=Severity.MEDIUM, resource="i-0bench4f1a2b3c4d5",
                   message="m", entity_type="GpuAsset", key="g6.48xlarge")
    base.write_text(json.dumps({"schema": "gpu-auditor/audit@1", "window": {}, "summary": {}, "policy": {},
                                "findings": [stale.to_dict() | {"cost": None}, same.to_dict()]}), encoding="utf-8")
    result = run_audit(load_policy(DEMO / "policy.yml"), [DEMO / "billing"], DEMO / "inventory.json",
                       parse_quarter("2026-Q3"), date(2026, 10, 15), select=["GPU002"], baseline=base)
    assert OVERSIZED_A100 in {f.resource for f in result.findings}
    assert [f.resource for f in result.known] == ["i-0bench4f1a2b3c4d5"]
    assert result.known[0].in_baseline and result.known[0].waived
    assert all(not f.in_baseline for f in result.findings)
    assert result.summary["findings"]["total"] == len(result.findings)


@pytest.mark.parametrize("content, message", [
    (None, "no audit.json found"),
    ("{not json", "not valid JSON"),
    ('{"schema": "something-else", "findings": []}', "not a gpu-auditor audit.json"),
    ('["a", "list"]', "not a gpu-auditor audit.json"),
])
def test_a_bad_baseline_is_one_input_error(tmp_path, content, message):
    base = tmp_path / "base.json"
    if content is not None:
        base.write_text(content, encoding="utf-8")
    result, doc = audit(tmp_path / "out", "--baseline", base)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gpu-auditor: error: {base}") and message in lines[0]
    assert doc is None and not (tmp_path / "out").exists()

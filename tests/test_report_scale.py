"""Findings at scale: a rule with thousands of findings lists its costliest SHOWN_PER_RULE in the HTML, Markdown
and e-mail, then one line for the rest (how many, their cost and saving, per team); findings.csv and
audit.json keep every finding."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.model import Finding, Severity, fmt_money
from auditor.outputs import mail
from auditor.outputs.report import write_outputs
from auditor.outputs.view import SHOWN_PER_RULE
from auditor.policy import load_policy

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
MANY = 3000
IDLE = 400


@pytest.fixture(scope="module")
def big(demo_audit_result, tmp_path_factory) -> tuple[dict, Path]:
    audit = demo_audit_result  # run_audit of the demo, 2026-Q3, today 2026-10-15, with the inventory (conftest)
    extra = [Finding(rule="TAG001", name="missing-required-tags", severity=Severity.MEDIUM,
                     resource=f"i-scale{i:05d}", message="missing tags: team", entity_type="ResourceSpend",
                     provider="aws", team=("ml-research" if i % 3 else None), cost=Decimal(i) / 100,
                     remediation="Tag it.", key=f"scale{i}") for i in range(MANY)]
    extra += [Finding(rule="GPU001", name="idle-gpu", severity=Severity.HIGH, resource=f"i-idle{i:05d}",
                      message="idle", entity_type="GpuAsset", provider="aws", team="vision", cost=Decimal(i),
                      monthly_savings=Decimal(i) / 2, clause="idle", key=f"idle{i}") for i in range(IDLE)]
    out = tmp_path_factory.mktemp("report")
    write_outputs(replace(audit, findings=list(audit.findings) + extra), out)
    return json.loads((out / "audit.json").read_text()), out


def test_csv_and_json_keep_every_finding(big):
    doc, out = big
    rows = list(csv.DictReader(io.StringIO((out / "findings.csv").read_text())))
    assert len(rows) == len(doc["findings"]) > MANY
    assert sum(1 for f in doc["findings"] if f["resource"].startswith("i-scale")) == MANY


@pytest.mark.heavy
def test_reports_show_the_costliest_and_sum_the_rest(big):
    doc, out = big
    tag = sorted((f for f in doc["findings"] if f["rule"] == "TAG001"),
                 key=lambda f: (f["waived"], -Decimal(f.get("monthly_savings") or 0), -Decimal(f["cost"] or 0),
                                f["resource"]))
    rest = tag[SHOWN_PER_RULE:]
    rest_cost = {"USD": sum(Decimal(f["cost"]) for f in rest if f.get("cost") is not None)}
    html, md = (out / "report.html").read_text(), (out / "report.md").read_text()
    for text in (html, md):
        shown = {f["resource"] for f in tag[:SHOWN_PER_RULE]}
        assert all(r in text for r in shown)
        assert not any(f["resource"] in text for f in rest if f["resource"].startswith("i-scale"))
        assert f"nd {len(rest)} more" in text
        assert fmt_money(rest_cost) in text
    assert "ml-research" in md.split(f"and {len(rest)} more")[1].splitlines()[0]
    assert len(html) < 2_000_000 and len(md) < 1_000_000


@pytest.mark.heavy
def test_email_shows_the_costliest_and_counts_the_rest(big):
    doc, _ = big
    owner = mail.route(doc, load_policy(DEMO / "policy.yml"))[-1]
    msg = mail.compose(doc, owner, "auditor@example.com", "owner@example.com", "k")
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert text.count("i-scale") <= 2 * SHOWN_PER_RULE
    assert "more (by team: (unattributed) " in text and "every one in the attached findings CSV" in text
    assert "every one in the attached findings CSV" in html
    assert len(text.encode()) < 100_000 and len(html.encode()) < 100_000  # the body a mail client shows whole
    [csv_file] = [a for a in msg.iter_attachments() if a.get_content_type() == "text/csv"]
    assert csv_file.get_content().count("i-scale") > 2 * SHOWN_PER_RULE  # every one, in the attachment


def test_idle_and_oversized_machines_show_the_costliest_and_sum_the_rest(big):
    doc, out = big
    idle = sorted((f for f in doc["findings"] if f["clause"] in ("idle", "rightsizing")),
                  key=lambda f: (f["waived"], -Decimal(f.get("monthly_savings") or 0), -Decimal(f["cost"] or 0),
                                 f["resource"]))
    rest = idle[SHOWN_PER_RULE:]
    saving = {"USD": sum(Decimal(f["monthly_savings"]) for f in rest if f.get("monthly_savings") is not None)}
    html, md = (out / "report.html").read_text(), (out / "report.md").read_text()
    for text in (html, md):
        section = text.split("Idle and oversized machines")[1].split("Machines")[0]
        assert sum(1 for f in idle[:SHOWN_PER_RULE] if f["resource"] in section) == SHOWN_PER_RULE
        assert not any(f["resource"] in section for f in rest)
        assert f"nd {len(rest)} more" in section and fmt_money(saving) in section

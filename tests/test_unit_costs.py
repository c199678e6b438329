"""Unit costs (tables/unitcost.py, summary.unit_costs, the report's Unit costs section) on a quarter written for the
test. Team nlp runs two Azure ML jobs on Standard_NC24ads_A100_v4 (1 GPU, $3.673/h, so $88.152 per 24 GPU-hours):
ft-1 for 10 days ($881.52, 240 GPU-hours) at 50% measured utilisation, labelled `tokens: 2.4B`; ft-2 for 5 days
($440.76, 120 GPU-hours) at 25%, labelled `train_tokens: "600000000"`. The right answers, from the module's docs:
ft-1 costs $881.52 / 120 used GPU-hours = $7.35 and $881.52 / 2,400 million tokens = $0.37; the team $1,322.28 /
150 = $8.82 a used GPU-hour and $1,322.28 / 3,000 = $0.44 per million tokens; against a previous audit at $7.00
a used GPU-hour, +26.0%."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from decimal import Decimal

import billing_csv
import pytest
from conftest import REPO

from auditor.core import run_audit
from auditor.outputs.report import render_html, render_md
from auditor.policy import load_policy
from auditor.window import parse_quarter

DEMO = REPO / "fixtures" / "demo"
JOBS = "/subscriptions/s/resourcegroups/rg/providers/microsoft.machinelearningservices/workspaces/w/jobs/"
START = datetime(2026, 8, 3)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("unitcost")
    charges, jobs = [], []
    for name, days, util, tags in (("ft-1", 10, 50.0, {"team": "nlp", "tokens": "2.4B"}),
                                   ("ft-2", 5, 25.0, {"team": "nlp", "train_tokens": "600000000"})):
        for d in range(days):
            day = START + timedelta(days=d)
            charges.append(billing_csv.charge(JOBS + name, day, {"team": "nlp"}))
        jobs.append({"id": JOBS + name, "platform": "azureml", "provider": "azure", "name": name,
                     "state": "Completed", "instance_type": "Standard_NC24ads_A100_v4", "instance_count": 1,
                     "start_time": f"{START:%Y-%m-%dT%H:%M:%SZ}",
                     "end_time": f"{START + timedelta(days=days):%Y-%m-%dT%H:%M:%SZ}", "tags": tags,
                     "mean_util_pct": util})
    billing = billing_csv.write(folder / "billing.csv", charges)
    inventory = folder / "inventory.json"
    inventory.write_text(json.dumps({"version": 1, "assets": [], "jobs": jobs}))
    return billing, inventory


def audit(inputs, previous=None) -> dict:
    billing, inventory = inputs
    return run_audit(load_policy(DEMO / "policy.yml"), [billing], inventory, parse_quarter("2026-Q3"),
                     date(2026, 10, 15), select=["GPU001"], previous=previous).to_dict()


@pytest.mark.heavy
def test_per_job_and_per_team(inputs):
    u = json.loads(json.dumps(audit(inputs)["summary"]["unit_costs"], default=str))
    jobs = {j["name"]: j for j in u["jobs"]}
    assert (jobs["ft-1"]["cost"], jobs["ft-1"]["used_gpu_hours"]) == ("881.52", "120.0")
    assert (jobs["ft-1"]["cost_per_used_gpu_hour"], jobs["ft-1"]["cost_per_million_tokens"]) == ("7.35", "0.37")
    assert jobs["ft-2"]["tokens"] == "600000000" and jobs["ft-2"]["used_gpu_hours"] == "30.0"
    nlp = u["teams"]["nlp"]["USD"]
    assert (nlp["cost"], nlp["used_gpu_hours"], nlp["cost_per_used_gpu_hour"], nlp["cost_per_million_tokens"]) == \
        ("1322.28", "150.0", "8.82", "0.44")
    assert Decimal(nlp["tokens"]) == Decimal("3000000000")
    assert nlp["change_pct"]["cost_per_used_gpu_hour"] is None and u["previous_window"] is None
    assert u["total"]["USD"]["cost_per_used_gpu_hour"] == "8.82"


@pytest.mark.heavy
def test_change_against_the_previous_audit(inputs):
    before = json.loads(json.dumps(audit(inputs), default=str))
    before["summary"]["unit_costs"]["window"] = "2026-Q2"
    before["summary"]["unit_costs"]["teams"]["nlp"]["USD"]["cost_per_used_gpu_hour"] = "7.00"
    now = audit(inputs, previous={"path": "q2/audit.json", "sha256": "0" * 64, "doc": before})
    u = json.loads(json.dumps(now["summary"]["unit_costs"], default=str))
    assert u["previous_window"] == "2026-Q2"
    assert u["teams"]["nlp"]["USD"]["change_pct"] == {"cost_per_used_gpu_hour": 26.0, "cost_per_million_tokens": 0.0,
                                                      "cost_per_million_samples": None}
    md = render_md(now)
    assert "## Unit costs" in md and "| nlp | $1,322.28 | 150.0 | $8.82 (+26.0%) | $0.44 (+0.0%) | – |" in md
    assert 'id="unit-costs"' in render_html(now) and "$8.82" in render_md(now, team="nlp")

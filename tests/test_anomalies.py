"""GPU spend anomalies end to end (tables/daily.py, ANOM001, outputs/anomalies.py) on a quarter written for the
test: team nlp runs one A100 VM at $88.152 a day all of 2026-Q3; on Tuesday 2026-08-18 a second VM and a job
billed as its own resource add $1,000 and $500. The right answer, from the rule's docs: one anomalous day,
$1,500 above a baseline of $88.15, driven by the job ($500) and the second VM ($1,000), seen alike by team nlp,
its account and its instance family; one jump, so counted once, under the team (the tie goes to the team): one
finding and one action of $1,500, the $1,500 once in every total; no other day is out of line."""

from __future__ import annotations

import json
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import billing_csv
import pytest
from conftest import REPO

from auditor.core import run_audit
from auditor.outputs.report import render_html, render_md
from auditor.policy import load_policy
from auditor.window import parse_quarter

DEMO = REPO / "fixtures" / "demo"
VM = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/"
JOB = "/subscriptions/s/resourcegroups/rg/providers/microsoft.machinelearningservices/workspaces/w/jobs/sweep-42"
SPIKE = date(2026, 8, 18)


@pytest.fixture(scope="module")
def audit(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("anomaly")
    charges = []
    day = date(2026, 7, 1)
    while day < date(2026, 10, 1):
        spend = [(VM + "nlp-a100-01", "88.152")]
        if day == SPIKE:
            spend += [(VM + "nlp-a100-02", "1000"), (JOB, "500")]
        charges += [billing_csv.charge(resource, day, {"team": "nlp"}, cost) for resource, cost in spend]
        day += timedelta(days=1)
    billing = billing_csv.write(folder / "billing.csv", charges)
    inventory = folder / "inventory.json"
    inventory.write_text(json.dumps({"version": 1, "assets": [], "jobs": [{"id": "sweep-42", "platform": "azureml",
                                                             "name": "sweep-42", "provider": "azure"}]}))
    return run_audit(load_policy(DEMO / "policy.yml"), [billing], inventory, parse_quarter("2026-Q3"),
                     date(2026, 10, 15), select=["ANOM001"]).to_dict()


@pytest.mark.heavy
def test_the_one_spike_is_counted_once_under_the_team(audit):
    [f] = [f for f in audit["findings"] if f["rule"] == "ANOM001"]
    assert (f["evidence"]["dimension"], f["team"]) == ("team", "nlp")
    [day] = f["evidence"]["anomalies"]
    assert day["date"] == "2026-08-18" and "counted_under" not in day
    assert (day["spend"], day["baseline"], day["excess"]) == ("1588.15", "88.15", "1500.00")
    assert [(d["resource"], d["change"]) for d in day["drivers"]] == [(VM.lower() + "nlp-a100-02", "1000.00"),
                                                                     (JOB.lower(), "500.00")]
    assert [d["job"] for d in day["drivers"]] == [None, "sweep-42"]
    assert Decimal(f["cost"]) == Decimal("1500.00") and f["monthly_savings"] is None
    assert len(f["evidence"]["days"]) == 92


@pytest.mark.heavy
def test_the_spike_dollars_are_in_every_total_once(audit):
    summary = audit["summary"]
    [action] = [a for a in summary["actions"] if a["rule"] == "ANOM001"]
    assert (action["team"], Decimal(action["cost"])) == ("nlp", Decimal("1500.00"))
    assert Decimal(summary["findings_cost"]["USD"]) == Decimal("1500.00")
    [clause] = [c for c in audit["clauses"] if c.get("rule") == "ANOM001" or c.get("clause") == "spend_anomalies"]
    assert Decimal(clause["cost"]["USD"]) == Decimal("1500.00")


def test_the_report_charts_the_spike(audit):
    md = render_md(audit)
    assert "## Spend anomalies" in md
    assert "| Team nlp | 2026-08-18 | $1,588.15 | $88.15 | +$1,500.00 |" in md
    html = render_html(audit)
    assert html.count('class="anomaly"') == 1  # the one red day, in the series it counts in


def test_the_team_report_has_its_own_series_only(audit):
    md = render_md(audit, team="nlp")
    assert "| Team nlp | 2026-08-18 |" in md and "Account " not in md.split("## Spend anomalies")[1][:2000]


@pytest.mark.heavy
def test_the_owners_email_charts_it(audit, tmp_path: Path):
    from auditor.outputs.mail.compose import html_part, view
    from auditor.outputs.mail.route import route

    owner = next(letter for letter in route(audit, load_policy(DEMO / "policy.yml")) if letter.is_owner)
    html = html_part(audit, owner, view(audit, owner, "finops@example.com"))
    assert "Spend anomalies" in html and html.count('class="anomaly"') == 1


def test_a_day_counted_in_another_series_says_so_in_the_report(demo_folder):
    """The demo's platform benchmark (i-0bench...) rose $527.04 a day on 2026-08-04..09, seen by team platform,
    its account and the p4d family; on 2026-08-05 the family also saw a vision job's rise ($922.32 in all), more
    than the team's $527.04, so that day counts under the family, and the team's row says so."""
    md = (demo_folder / "report.md").read_text()
    assert ("| Team platform | 2026-08-05 | $860.07 | $333.03 | +$527.04 (counted under Instance family aws p4d) |"
            in md)
    assert "| Instance family aws p4d | 2026-08-05 | $1,449.36 | $527.04 | +$922.32 |" in md

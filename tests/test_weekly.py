"""The charts' figures (auditor/tables/weekly.py): GPU compute per ISO week and team adds up, per currency and to
the cent, to the window's GPU compute as the summary shows it; utilisation per week adds up to the fleet's
bands; a top finding's sparkline is its resource's billing, day by day."""

from __future__ import annotations

import shutil
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.core import run_audit
from auditor.model import fmt_money
from auditor.outputs.report import render_md
from auditor.policy import load_policy
from auditor.tables.store import Store
from auditor.window import parse_quarter

DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo"
Q3 = parse_quarter("2026-Q3")


def audit_of(billing: Path) -> dict:
    return run_audit(load_policy(DEMO / "policy.yml"), [billing], DEMO / "inventory.json", Q3,
                     date(2026, 10, 15)).to_dict()


@pytest.fixture(scope="module")
def two_currencies(tmp_path_factory) -> dict:
    """The demo with its Azure export billed in euros: two currencies, each charted apart."""
    folder = tmp_path_factory.mktemp("billing")
    for f in (DEMO / "billing").iterdir():
        shutil.copy(f, folder / f.name)
    azure = folder / "focus-azure-2026-q3.csv"
    azure.write_text(azure.read_text(encoding="utf-8").replace(",USD,", ",EUR,"), encoding="utf-8")
    return audit_of(folder)


@pytest.mark.heavy
def test_weekly_gpu_compute_adds_up_to_the_window_to_the_cent(two_currencies):
    s = two_currencies["summary"]
    assert set(s["gpu_cost"]) == {"USD", "EUR"}
    for cur, total in s["gpu_cost"].items():
        cells = [Decimal(v) for w in s["weekly"]["weeks"] for v in w["gpu_cost"].get(cur, {}).values()]
        assert len(cells) > 20 and sum(cells) == Decimal(total), cur  # exact: Decimal, not float
    weeks = [w["week"] for w in s["weekly"]["weeks"]]
    assert weeks[0] == "2026-W27" and weeks[-1] == "2026-W40" and len(weeks) == len(set(weeks)) == 14
    # each team's weeks add up to the team's GPU compute as the team's own view shows it, within a cent per week
    for team, detail in s["team_spend"].items():
        gpu = detail["by_category"].get("gpu_compute", {}).get("USD")
        if gpu is not None:
            weekly = sum(Decimal(w["gpu_cost"].get("USD", {}).get(team, "0")) for w in s["weekly"]["weeks"])
            assert abs(weekly - Decimal(gpu)) <= Decimal("0.14"), team


@pytest.mark.heavy
def test_weekly_utilisation_adds_up_to_the_fleet_bands(two_currencies):
    s = two_currencies["summary"]
    for band, hours in s["fleet"]["utilisation"].items():
        weekly = sum(Decimal(per[band]) for w in s["weekly"]["weeks"] for per in (w["utilisation"] or {}).values())
        assert abs(weekly - Decimal(hours)) <= Decimal("0.1") * 14 * 4, band  # one decimal per week and team
        assert weekly > 0


@pytest.mark.heavy
def test_sparklines_are_the_billing_of_the_top_findings_resources(two_currencies):
    s = two_currencies["summary"]
    assert s["sparklines"]
    store = Store()
    store.load_billing([DEMO / "billing"])
    for resource, line in s["sparklines"].items():
        assert line["start"] == "2026-07-01" and len(line["days"]) == 92
        expected = store.con.execute(f"SELECT sum(BilledCost) FROM costs WHERE {Q3.where()} AND ResourceId = ? "
                                     "AND BillingCurrency = ?", [resource, line["currency"]]).fetchone()[0]
        if line["currency"] == "USD":
            assert abs(sum(Decimal(d) for d in line["days"]) - expected) <= Decimal("0.005") * 92, resource


@pytest.mark.heavy
def test_markdown_has_the_weekly_table(two_currencies):
    md = render_md(two_currencies)
    assert "## Week by week" in md and "| 2026-W27 (2026-06-29) |" in md
    week = two_currencies["summary"]["weekly"]["weeks"][5]
    eur = sum(Decimal(v) for v in week["gpu_cost"]["EUR"].values())
    assert eur > 0 and f"and {fmt_money(eur, 'EUR')} |" in md  # euros beside the dollars, never added to them


def test_the_actions_shown_first_are_the_top_ones_and_each_teams_first():
    """weekly.shown_first: the organisation's top actions, then each team's first (teams by name, an action with
    no team under the unattributed), in rank order: the actions whose resources get a sparkline."""
    from auditor.figures import TOP_ACTIONS
    from auditor.model import UNATTRIBUTED
    from auditor.tables.weekly import shown_first

    teams = ["vision", None, "nlp", "vision", "nlp", None] * (TOP_ACTIONS + 2)
    acts = [{"resource": f"r{i}", "team": team} for i, team in enumerate(teams)]
    first = {t: [a for a in acts if (a["team"] or UNATTRIBUTED) == t][:TOP_ACTIONS]
             for t in ("(unattributed)", "nlp", "vision")}
    assert UNATTRIBUTED == "(unattributed)" and all(len(v) == TOP_ACTIONS for v in first.values())
    assert shown_first(acts) == acts[:TOP_ACTIONS] + first["(unattributed)"] + first["nlp"] + first["vision"]
    assert shown_first([]) == []

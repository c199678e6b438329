"""The summary's rounding (tables/summary.py: _round_breakdowns): every breakdown rounded once, to the cent, so that
its parts add up to the figure it breaks down as that is shown; a team's GPU compute is the one the org's "by
team" table shows for it. Worked by hand on a summary of sub-cent amounts, with figures.apportion's rule: each
part rounded down, the cents left to the largest remainders (ties by key); the total rounded half to even."""

from __future__ import annotations

from decimal import Decimal

from auditor.tables.summary import _pct, _round_breakdowns

D = Decimal


def usd(amount: str) -> dict[str, Decimal]:
    return {"USD": D(amount)}


def summary() -> dict:
    return {
        "billed_cost": usd("10.006"),  # shown as 10.01
        "gpu_cost": usd("6.004"),  # shown as 6.00
        "by_category": {"gpu_compute": usd("6.004"), "storage": usd("2.001"), "other": usd("2.001")},
        "by_provider": {"aws": usd("5.003"), "gcp": usd("5.003")},
        "by_team": {"nlp": usd("7.004"), "cv": usd("3.002")},
        "breakdown": {
            "team": [{"key": "nlp", "billed_cost": usd("7.004"), "gpu_cost": usd("4.003")},
                     {"key": "cv", "billed_cost": usd("3.002"), "gpu_cost": usd("2.001")}],
            "provider": [{"key": "aws", "billed_cost": usd("5.003"), "gpu_cost": usd("3.0025")},
                         {"key": "gcp", "billed_cost": usd("5.003"), "gpu_cost": usd("3.0015")}]},
        "team_spend": {
            "nlp": {"by_category": {"gpu_compute": usd("4.003"), "storage": usd("3.001")},
                    "by_provider": {"aws": usd("3.502"), "gcp": usd("3.502")},
                    "by_project": {"p1": usd("4.5"), "p2": usd("2.504")},
                    "gpu_by_provider": {"aws": usd("2.0035"), "gcp": usd("1.9995")},
                    "gpu_by_project": {"p1": usd("4.003")},
                    "by_model": {"A100": {"billed_cost": usd("2.506")}, "L4": {"billed_cost": usd("1.497")}}},
            "cv": {"by_category": {"other": usd("3.002")}, "by_provider": {"gcp": usd("3.002")},
                   "by_project": {}, "gpu_by_provider": {}, "gpu_by_project": {}, "by_model": {}}},
        "fleet": {"by_model": [{"model": "A100", "billed_cost": usd("3.755")},
                               {"model": "L4", "billed_cost": usd("2.249")}]},
    }


def test_the_orgs_breakdowns_add_up_to_the_total_shown():
    s = summary()
    _round_breakdowns(s)
    # GPU compute keeps the headline's 6.00; storage and other share the 4.01 left, the cent to "other" (a tie)
    assert s["by_category"] == {"gpu_compute": usd("6.00"), "storage": usd("2.00"), "other": usd("2.01")}
    assert s["by_provider"] == {"aws": usd("5.01"), "gcp": usd("5.00")}  # a tie: by key
    assert s["by_team"] == {"nlp": usd("7.01"), "cv": usd("3.00")}  # .004 over .002
    assert s["breakdown"]["team"] == [{"key": "nlp", "billed_cost": usd("7.01"), "gpu_cost": usd("4.00")},
                                      {"key": "cv", "billed_cost": usd("3.00"), "gpu_cost": usd("2.00")}]
    # 3.0025 + 3.0015 to 6.00: 3.00 and 3.00, no cent left
    assert s["breakdown"]["provider"] == [{"key": "aws", "billed_cost": usd("5.01"), "gpu_cost": usd("3.00")},
                                          {"key": "gcp", "billed_cost": usd("5.00"), "gpu_cost": usd("3.00")}]
    # the fleet's models to the GPU compute shown: 3.75 + 2.24, the cent left to L4 (.009 over .005)
    assert s["fleet"]["by_model"] == [{"model": "A100", "billed_cost": usd("3.75")},
                                      {"model": "L4", "billed_cost": usd("2.25")}]


def test_a_teams_breakdowns_add_up_to_its_spend_and_its_gpu_compute_shown():
    s = summary()
    _round_breakdowns(s)
    nlp, cv = s["team_spend"]["nlp"], s["team_spend"]["cv"]
    # nlp's spend is 7.01 (by team) and its GPU compute 4.00 (the org's "by team" table): storage is the 3.01 left
    assert nlp["by_category"] == {"gpu_compute": usd("4.00"), "storage": usd("3.01")}
    assert nlp["by_provider"] == {"aws": usd("3.51"), "gcp": usd("3.50")}
    assert nlp["by_project"] == {"p1": usd("4.50"), "p2": usd("2.51")}
    # GPU parts add up to the team's GPU compute: 2.00 + 1.99, the cent to gcp (.0095 over .0035)
    assert nlp["gpu_by_provider"] == {"aws": usd("2.00"), "gcp": usd("2.00")}
    assert nlp["gpu_by_project"] == {"p1": usd("4.00")}
    assert nlp["by_model"] == {"A100": {"billed_cost": usd("2.50")}, "L4": {"billed_cost": usd("1.50")}}
    # cv has no GPU compute: nothing pinned, its one category and provider are its 3.00
    assert cv["by_category"] == {"other": usd("3.00")}
    assert cv["by_provider"] == {"gcp": usd("3.00")}
    assert cv["by_project"] == cv["gpu_by_provider"] == cv["gpu_by_project"] == cv["by_model"] == {}


def test_share_of_a_budget_in_percent():
    assert _pct(D(1), D(3)) == 33.3
    assert _pct(D(2), D(3)) == 66.7
    assert _pct(D("12.50"), D(10)) == 125.0
    assert _pct(D(5), None) is None
    assert _pct(D(5), D(0)) is None

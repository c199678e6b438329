"""The two sums every view shares (auditor/figures.py): savings counted once per resource, and parts rounded to add up
to their rounded total."""

from __future__ import annotations

import random
from decimal import Decimal as D

from auditor.figures import action_totals, actions, apportion, apportion_amounts
from auditor.model import Finding, Severity, money


def _f(resource, currency, rule, saving, severity=Severity.MEDIUM, confidence="high", cost=None):
    return Finding(rule=rule, name=rule.lower(), severity=severity, resource=resource, message=f"{rule} {resource}",
                   entity_type="GpuAsset", monthly_savings=saving, currency=currency, confidence=confidence,
                   cost=cost)


def test_one_resource_is_saved_once_under_the_largest_then_first_rule():
    found = [_f("flow", "USD", "REG002", D("98.10")), _f("flow", "USD", "NET001", D("98.10")),
             _f("i-1", "USD", "GPU002", D("500")), _f("i-1", "USD", "GPU001", D("900")),
             _f("i-1", "EUR", "GPU002", D("7")), _f("bkt", "USD", "TAG001", None)]
    acts = actions(found)
    assert action_totals(acts, "saving") == {"USD": D("998.10"), "EUR": D("7")}
    assert [f.counted_under for f in found] == ["NET001", None, "GPU001", None, None, None]
    assert len(acts) == 4  # flow, i-1 (USD), i-1 (EUR), bkt
    i1 = next(a for a in acts if a["resource"] == "i-1" and a["currency"] == "USD")
    assert (i1["rule"], i1["saving"], [r["rule"] for r in i1["reasons"]]) == ("GPU001", D("900"), ["GPU001", "GPU002"])


def test_apportioned_parts_add_up_to_the_rounded_total():
    parts = {"a": D("0.005"), "b": D("0.005"), "c": D("1.333")}
    assert apportion(parts) == {"a": D("0.01"), "b": D("0.00"), "c": D("1.33")}  # 1.343 -> 1.34
    rng = random.Random(16)
    for _ in range(200):
        parts = {i: D(rng.randint(-10**7, 10**7)) / D(10**rng.randint(2, 6)) for i in range(rng.randint(1, 9))}
        shares = apportion(parts)
        assert sum(shares.values()) == money(sum(parts.values()))
        assert all(abs(shares[k] - parts[k]) < D("0.01") for k in parts)


def test_each_currency_is_apportioned_on_its_own():
    out = apportion_amounts({"x": {"USD": D("0.004"), "EUR": D("1.005")}, "y": {"USD": D("0.004")}})
    assert out == {"x": {"USD": D("0.01"), "EUR": D("1.00")}, "y": {"USD": D("0.00")}}


# ---- each figure on its own, the right answers from the module's docs ----------------------------------------

def test_a_findings_team_is_its_resources_or_the_organisations():
    from auditor.figures import ORGANISATION, finding_team
    assert finding_team("SteadyGpuSpend", "vision") == ORGANISATION  # the organisation's, whatever the tags
    assert finding_team("UnattributedSpend", None) == finding_team("WaiverStatus", None) == ORGANISATION
    assert finding_team("GpuSpendSeries", "vision") == "vision"  # a team's series is the team's
    assert finding_team("GpuSpendSeries", None) == ORGANISATION  # an account's or a family's spans teams
    assert finding_team("GpuAsset", "vision") == "vision"
    assert finding_team("GpuAsset", None) is None  # unattributed, not the organisation's


def test_an_amount_of_the_findings_is_summed_per_currency():
    from auditor.figures import sum_money
    found = [_f("a", "USD", "GPU001", D("1.10"), cost=D("5")), _f("b", "USD", "GPU002", None, cost=D("2.50")),
             _f("c", "EUR", "GPU001", D("3"))]
    assert sum_money(found, "monthly_savings") == {"USD": D("1.10"), "EUR": D("3")}
    assert sum_money(found, "cost") == {"USD": D("7.50")}
    assert sum_money([], "cost") == {}


def test_the_action_takes_a_saving_that_counts_then_the_largest_then_the_most_severe_then_the_first_rule():
    def take(*found):
        return actions(list(found))[0]["rule"]
    assert take(_f("r", "USD", "A", None), _f("r", "USD", "B", D("1"))) == "B"  # a saving before none
    assert take(_f("r", "USD", "A", D("900"), confidence="low"), _f("r", "USD", "B", D("1"))) == "B"  # counts first
    assert take(_f("r", "USD", "A", D("1")), _f("r", "USD", "B", D("2"))) == "B"  # the largest
    assert take(_f("r", "USD", "A", D("0.00")), _f("r", "USD", "B", D("0.50"))) == "B"  # a saving of 0 is 0
    assert take(_f("r", "USD", "B", D("2")), _f("r", "USD", "A", D("2"), severity=Severity.HIGH)) == "A"
    assert take(_f("r", "USD", "B", D("2"), severity=Severity.HIGH), _f("r", "USD", "A", D("2"))) == "B"
    assert take(_f("r", "USD", "B", D("2")), _f("r", "USD", "A", D("2"))) == "A"  # then the first rule


def test_an_action_folds_its_resources_findings():
    high = _f("i-1", "USD", "GPU001", D("900"), severity=Severity.HIGH, cost=D("300"))
    high.wasted, high.team, high.still_running = D("300"), None, True
    other = _f("i-1", "USD", "GPU002", D("500"), severity=Severity.MEDIUM, cost=D("400"))
    other.wasted, other.team, other.owner = D("250"), "vision", "ann@example.com"
    low = _f("i-1", "USD", "SPOT001", None, severity=Severity.CRITICAL)
    a = actions([other, low, high])[0]
    assert {k: v for k, v in a.items() if k != "reasons"} == {
        "resource": "i-1", "currency": "USD", "rule": "GPU001", "name": "gpu001", "message": "GPU001 i-1",
        "severity": "critical", "team": "vision", "owner": "ann@example.com", "saving": D("900"), "to_check": None,
        "confidence": "high", "wasted": D("300"), "wasted_to_check": None, "cost": D("400"), "still_running": True}
    assert a["reasons"] == [
        {"rule": f.rule, "name": f.name, "severity": f.severity.label, "message": f.message,
         "monthly_savings": f.monthly_savings, "confidence": f.confidence, "fingerprint": f.fingerprint}
        for f in (high, other, low)]
    assert (high.counted_under, other.counted_under, low.counted_under) == (None, "GPU001", None)
    # a saving to check: the action's saving and waste are "to check", not in the headline
    check = _f("i-2", "USD", "GPU002", D("70"), confidence="medium")
    check.wasted = D("20")
    b = actions([check])[0]
    assert (b["saving"], b["to_check"], b["wasted"], b["wasted_to_check"], b["confidence"], b["cost"]) == (
        None, D("70"), None, D("20"), "medium", None)
    # without a team the organisation's entities are the organisation's
    org = Finding(rule="COM001", name="c", severity=Severity.LOW, resource="g5", message="m",
                  entity_type="SteadyGpuSpend")
    assert actions([org])[0]["team"] == "(organisation)"


def test_actions_rank_by_severity_then_saving_then_to_check_then_cost_then_resource_then_currency():
    found = [_f("e", "USD", "R", None, cost=D("9")), _f("f", "USD", "R", None, cost=D("10")),
             _f("h", "USD", "R", D("0.50"), confidence="low"), _f("i", "USD", "R", None, cost=D("0.50")),
             _f("j", "USD", "R", None),
             _f("d", "USD", "R", D("5"), confidence="low"), _f("c", "USD", "R", D("6"), confidence="low"),
             _f("b", "USD", "R", D("1")), _f("a", "USD", "R", D("2")), _f("z", "USD", "R", None, Severity.HIGH),
             _f("g", "USD", "R", None), _f("g", "EUR", "R", None)]
    assert [(a["resource"], a["currency"]) for a in actions(found)] == [
        ("z", "USD"), ("a", "USD"), ("b", "USD"), ("c", "USD"), ("d", "USD"), ("h", "USD"), ("f", "USD"),
        ("e", "USD"), ("i", "USD"), ("g", "EUR"), ("g", "USD"), ("j", "USD")]


def test_action_totals_by_a_key_add_up_to_the_total():
    from auditor.figures import action_totals_by
    acts = [{"team": "a", "currency": "USD", "saving": D("1")}, {"team": "b", "currency": "USD", "saving": D("2")},
            {"team": "a", "currency": "USD", "saving": D("3")}, {"team": "a", "currency": "EUR", "saving": D("4")},
            {"team": "b", "currency": "USD", "saving": None}]
    assert action_totals_by(acts, "saving", lambda a: a["team"]) == {"a": {"USD": D("4"), "EUR": D("4")},
                                                                     "b": {"USD": D("2")}}
    assert action_totals(acts, "saving") == {"USD": D("6"), "EUR": D("4")}
    assert action_totals([], "saving") == {}


def test_savings_by_count_the_taken_findings_of_high_confidence():
    from auditor.figures import savings_by
    found = [_f("i-1", "USD", "GPU001", D("900")), _f("i-1", "USD", "GPU002", D("500")),
             _f("i-2", "USD", "GPU002", D("40")), _f("i-3", "USD", "GPU002", D("70"), confidence="low"),
             _f("i-4", "EUR", "GPU001", D("8")), _f("i-5", "USD", "TAG001", None), _f("i-6", "USD", "GPU001", D("100"))]
    actions(found)
    assert savings_by(found, lambda f: f.rule) == {"GPU001": {"USD": D("1000"), "EUR": D("8")},
                                                   "GPU002": {"USD": D("40")}}


def test_apportion_to_a_target_a_cent_off_moves_the_parts_with_the_smallest_remainders_down():
    # parts 0.004 + 1.336 = 1.34; target 1.33: every part rounded down (0.00 + 1.33) is the target already
    assert apportion({"a": D("0.004"), "b": D("1.336")}, D("1.33")) == {"a": D("0.00"), "b": D("1.33")}
    # parts 1.35 rounded down to 1.34, target 1.33: a cent less, from the smallest remainder (a's .004 < b's .006)
    assert apportion({"a": D("0.014"), "b": D("1.336")}, D("1.33")) == {"a": D("0.00"), "b": D("1.33")}
    # equal remainders: the cents go by key
    assert apportion({"c": D("0.005"), "b": D("0.005"), "a": D("0.005")}) == {
        "a": D("0.01"), "b": D("0.01"), "c": D("0.00")}
    # equal remainders (half a cent each): the cent goes by key, not to the part that rounds half to even
    assert apportion({"a": D("0.025"), "b": D("0.015")}) == {"a": D("0.03"), "b": D("0.01")}
    # more cents than parts: round and round
    assert apportion({"a": D("0"), "b": D("0")}, D("0.03")) == {"a": D("0.02"), "b": D("0.01")}
    assert apportion({"a": D("0"), "b": D("0")}, D("-0.03")) == {"a": D("-0.01"), "b": D("-0.02")}
    assert apportion({}) == {} and apportion({}, D("1.00")) == {}  # no part to give a cent to


def test_apportion_amounts_to_targets_with_pinned_parts():
    items = {"gpu": {"USD": D("10.004")}, "x": {"USD": D("1.003")}, "y": {"USD": D("2.003")}}
    # gpu pinned at 10.00 (shown in the headline); x and y make up the rest of 13.02: 3.02
    out = apportion_amounts(items, {"USD": D("13.02")}, {"gpu": {"USD": D("10.00")}, "gone": {"USD": D("1")}})
    assert out == {"gpu": {"USD": D("10.00")}, "x": {"USD": D("1.01")}, "y": {"USD": D("2.01")}}
    # a pinned part without the currency pins none of it
    items["x"]["EUR"] = D("2.004")
    out = apportion_amounts(items, {"USD": D("13.02"), "EUR": D("2.00")}, {"gpu": {"USD": D("10.00")}})
    assert out["x"] == {"USD": D("1.01"), "EUR": D("2.00")}
    del items["x"]["EUR"]
    # a currency without a target: its parts' own rounded sum (13.01), the cent to the largest remainder (gpu's)
    assert apportion_amounts(items, {"EUR": D("1")}) == {"gpu": {"USD": D("10.01")}, "x": {"USD": D("1.00")},
                                                         "y": {"USD": D("2.00")}}

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

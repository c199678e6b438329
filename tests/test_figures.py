"""The two sums every view shares (auditor/figures.py): savings counted once per resource, and parts rounded to add up
to their rounded total."""

from __future__ import annotations

import random
from decimal import Decimal as D

from auditor.figures import apportion, apportion_amounts, count_savings
from auditor.model import money


def test_one_resource_is_saved_once_under_the_largest_then_first_rule():
    rows = [("flow", "USD", "REG002", D("98.10")), ("flow", "USD", "NET001", D("98.10")),
            ("i-1", "USD", "GPU002", D("500")), ("i-1", "USD", "GPU001", D("900")),
            ("i-1", "EUR", "GPU002", D("7")), ("bkt", "USD", "TAG001", None)]
    totals, under = count_savings(rows)
    assert totals == {"USD": D("998.10"), "EUR": D("7")}
    assert under == ["NET001", None, "GPU001", None, None, None]


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

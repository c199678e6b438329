"""GPU006 runs over its candidates only (Rule.candidates, tables/entities.py NARROWS): the GPU machines the bill
shows on `min_days` days or more and on `min_billed_days_pct` percent or more of the days their provider billed
anything. The selection is made in SQL; it must keep every machine the rule may flag, count every machine it
looked at, and give the findings of the rule over every machine.

Every machine is the demo's Azure A100 VM (a $88.152 day), billed whole days of July 2026; the provider billed
on 20 days (July 1 to 20), so 90 percent is 18 days."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import billing_csv
import pytest

from auditor.context import Context
from auditor.core import configured_rules, run_rules
from auditor.model import BilledGpuMachine
from auditor.policy import load_policy
from auditor.providers.catalog import load_catalog
from auditor.rule import BilledDays
from auditor.tables import gpu_machines  # noqa: F401 (registers the BilledGpuMachine builders)
from auditor.tables.entities import build, examined
from auditor.tables.store import Store
from auditor.window import parse_quarter

# machine id as billed -> the days of July it is billed on
BILLED = {
    "m-20": range(1, 21),
    "m-18": range(1, 19),
    "m-17": range(4, 21),
    "m-7": range(1, 8),
    "m-6": range(10, 16),
    "M-CASE": range(1, 11),   # one machine in two spellings: 10 days so,
    "m-case": range(11, 19),  # and 8 more, 18 days in all
}
MACHINES = 6  # m-case is M-CASE

# Stated from GPU006's docs: billed on min_days days or more and on pct percent of the 20 days or more.
CASES = [
    (7, 90, {"m-20", "m-18", "M-CASE"}),
    (7, 30, {"m-20", "m-18", "m-17", "M-CASE", "m-7"}),
    (1, "29.99", {"m-20", "m-18", "m-17", "M-CASE", "m-7", "m-6"}),  # 6 days are 30%: just over 29.99
    (1, "30.01", {"m-20", "m-18", "m-17", "M-CASE", "m-7"}),         # and just under 30.01
    ("6.5", 0, {"m-20", "m-18", "m-17", "M-CASE", "m-7"}),
    (19, 0, {"m-20"}),
]


def policy_text(min_days, pct) -> str:
    return f"""\
policy: GPU candidates
version: "1"
owner: finops@example.com
currency: USD
clauses:
  forgotten_in_billing:
    text: No GPU machine runs without an owner.
    min_days: {min_days}
    min_billed_days_pct: {pct}
    min_confidence: low
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpus")
    charges = [billing_csv.charge(rid, date(2026, 7, day), {}) for rid, days in BILLED.items() for day in days]
    store = Store(load_catalog())
    store.load_billing([billing_csv.write(tmp / "focus.csv", charges)])
    yield store
    store.close()


def rules_of(tmp_path, min_days, pct):
    (tmp_path / "policy.yml").write_text(policy_text(min_days, pct))
    policy = load_policy(tmp_path / "policy.yml")
    return policy, [r for r in configured_rules(policy) if r.id == "GPU006"]


@pytest.mark.parametrize(("min_days", "pct", "candidates"), CASES)
def test_GPU006_runs_over_the_machines_it_may_flag_only(store, tmp_path, min_days, pct, candidates):
    window = parse_quarter("2026-Q3")
    policy, rules = rules_of(tmp_path, min_days, pct)
    narrowed = build(store, window, policy, BilledGpuMachine, rules)
    assert {m.id for m in narrowed} == candidates
    assert examined(narrowed) == MACHINES  # the clause counts every machine it looked at
    whole = {m.id: m for m in build(store, window, policy, BilledGpuMachine)}
    assert len(whole) == MACHINES and whole["M-CASE"].billed_days == 18
    for m in narrowed:  # each candidate built whole
        assert m == whole[m.id]
    ctx = Context(store.catalog, policy, window)
    found = run_rules(rules, {BilledGpuMachine: narrowed}, ctx)
    every = run_rules(rules, {BilledGpuMachine: list(whole.values())}, ctx)
    assert [f.to_dict() for f in found] == [f.to_dict() for f in every]
    assert {f.resource for f in found} == candidates  # none owned, none with a job: each is flagged at `low`


def test_GPU006_candidates_are_its_options(tmp_path):
    """The terms are the options as written (6.5 days, 0.1 percent), not the floats nearest them."""
    assert rules_of(tmp_path, 7, 90)[1][0].candidates() == BilledDays(Decimal("7"), Decimal("90"))
    assert rules_of(tmp_path, "6.5", "0.1")[1][0].candidates() == BilledDays(Decimal("6.5"), Decimal("0.1"))

"""TAG001 runs over its candidates only (Rule.candidates, tables/entities.py NARROWS): the resources whose lines of
a tag set lacking a required tag cost the rule's `min_cost` in the policy's currency, or anything in another. The
selection is made in SQL, once per distinct tag set; it must keep every resource the rule flags (where SQL cannot
be sure a tag is there as Context.tag finds it, the resource is kept and the rule judges it), and its findings
must be those of the rule over every resource.

The policy requires `team` and `owner` with `min_cost: 10` (USD); each resource is billed one day of July 2026."""

from __future__ import annotations

from datetime import date

import billing_csv
import pytest

from auditor.context import Context
from auditor.core import configured_rules, run_rules
from auditor.model import ResourceSpend
from auditor.policy import Policy, load_policy
from auditor.providers.catalog import load_catalog
from auditor.tables.entities import build, examined
from auditor.tables.store import Store
from auditor.window import Window, parse_quarter

POLICY = """\
policy: Tag candidates
version: "1"
owner: finops@example.com
currency: USD
clauses:
  tagging:
    text: Every resource carries team and owner tags.
    required_tags: [team, owner]
    min_cost: 10
"""

DAY = date(2026, 7, 1)
# resource -> [(tags, cost, currency)], one day each
BILLED = {
    "r-tagged": [({"team": "a", "owner": "b"}, "50", "USD")],
    "r-spaced-keys": [({" Team ": "a", "OWNER": "b"}, "50", "USD")],   # keys match ignoring case and spaces
    "r-missing": [({"team": "a"}, "50", "USD")],
    "r-empty": [({"team": "a", "owner": ""}, "50", "USD")],
    "r-blank": [({"team": "a", "owner": "\t"}, "50", "USD")],           # white space only: no owner
    "r-accented": [({"team": "a", "owner": "é"}, "50", "USD")],          # an owner, but no ASCII letter
    "r-cheap": [({"team": "a"}, "9.99", "USD")],                         # under min_cost
    "r-exact": [({"team": "a"}, "10", "USD")],                           # at min_cost
    "r-mixed": [({"team": "a", "owner": "b"}, "100", "USD"), ({"team": "a"}, "6", "USD"),
                ({"owner": "b"}, "5", "USD")],                           # 11 untagged, over two sets
    "r-euro": [({"team": "a"}, "50", "EUR")],                            # no rate: never held to min_cost
    "r-other-key": [({"team": "a", "ówner": "b"}, "50", "USD")],         # a key that is not `owner`: no owner
    "r-twice": [({"team": "a", "owner": "b", "OWNER ": ""}, "50", "USD")],  # an owner under one of its spellings
}
# Stated from the rule's docs: untagged cost >= $10 flags; the EUR resource has no rate, so it is not flagged.
FLAGGED = {"r-missing", "r-empty", "r-blank", "r-exact", "r-mixed", "r-other-key"}
# What SQL keeps: those, the owner it cannot be sure of ("é"), and the EUR one (the rule converts, or not).
CANDIDATES = FLAGGED | {"r-accented", "r-euro"}


def load(tmp) -> tuple[Store, Window, Policy, list]:
    charges = []
    for n, (rid, lines) in enumerate(BILLED.items()):
        for i, (tags, cost, cur) in enumerate(lines):
            charges.append(billing_csv.charge(rid, date(2026, 7, 1 + i), tags, cost, BillingCurrency=cur,
                                              SkuId=f"sku-{n}"))
    path = billing_csv.write(tmp / "focus.csv", charges)
    (tmp / "policy.yml").write_text(POLICY)
    policy = load_policy(tmp / "policy.yml")
    store = Store(load_catalog())
    store.load_billing([path])
    rules = [r for r in configured_rules(policy) if r.id == "TAG001"]
    return store, parse_quarter("2026-Q3"), policy, rules


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    store, window, policy, rules = load(tmp_path_factory.mktemp("tags"))
    yield store, window, policy, rules
    store.close()


def test_only_the_resources_the_rule_may_flag_are_built(audited):
    store, window, policy, rules = audited
    narrowed = build(store, window, policy, ResourceSpend, rules)
    assert {s.id for s in narrowed} == CANDIDATES
    assert examined(narrowed) == len(BILLED)  # the clause still counts every resource it looked at
    whole = {s.id: s for s in build(store, window, policy, ResourceSpend)}
    assert len(whole) == len(BILLED)
    for s in narrowed:  # each candidate built whole: every tag set, every currency
        assert s == whole[s.id]


def test_the_findings_are_those_over_every_resource(audited):
    store, window, policy, rules = audited
    ctx = Context(store.catalog, policy, window)
    narrowed = run_rules(rules, {ResourceSpend: build(store, window, policy, ResourceSpend, rules)}, ctx)
    whole = run_rules(rules, {ResourceSpend: build(store, window, policy, ResourceSpend)}, ctx)
    assert {f.resource for f in narrowed} == FLAGGED
    assert [f.to_dict() for f in narrowed] == [f.to_dict() for f in whole]
    mixed = next(f for f in narrowed if f.resource == "r-mixed")
    assert mixed.evidence["missing_tags"] == ["team", "owner"] and mixed.evidence["untagged_cost"] == "11.00"


def test_only_the_candidates_tag_sets_are_made(tmp_path):
    """Python holds a tag set's dict only where an entity shows it (Store.tags): the narrowed build makes the sets
    of the candidates (each built whole, every set it was billed under), not the other resources' sets."""
    store, window, policy, rules = load(tmp_path)
    try:
        build(store, window, policy, ResourceSpend, rules)
        made = [sorted(tags.items()) for tags in store._tags.values()]
    finally:
        store.close()
    shown = {tuple(sorted(tags.items())) for rid in CANDIDATES for tags, _, _ in BILLED[rid]}
    assert sorted(map(tuple, made)) == sorted(shown)
    for rid in ("r-spaced-keys", "r-twice"):  # billed under sets of their own, and not candidates
        assert tuple(sorted(BILLED[rid][0][0].items())) not in shown


def test_a_rule_without_candidates_gets_every_entity(audited):
    store, window, policy, _ = audited
    assert len(build(store, window, policy, ResourceSpend, [])) == len(BILLED)


def test_costs_are_fetched_for_the_ids_asked_only_and_still_found_by_arn(tmp_path):
    """A machine's cost (GpuAsset, Job) is fetched for its own id: its lines under its id in any case, else under an
    ARN or path that ends with it (ByResource.of); a resource of no machine asked for is not fetched."""
    from auditor.tables.entities import ByResource, _by_resource
    from auditor.tables.stats import per_currency

    billed = {"arn:aws:ec2:us-east-1:111:instance/i-abc": "10", "I-ABC": "5", "x:i-abc-2": "7",
              "projects/p/zones/z/instances/vm-1": "3", "i-other": "100"}
    path = billing_csv.write(tmp_path / "focus.csv", [billing_csv.charge(rid, DAY, {}, cost, SkuId=f"s{n}")
                                                      for n, (rid, cost) in enumerate(billed.items())])
    store = Store(load_catalog())
    try:
        store.load_billing([path])
        window = parse_quarter("2026-Q3")
        asked = _by_resource(store, window, ["i-ABC", "vm-1", "i-none"], "sum(BilledCost)")
        every = ByResource(per_currency(store.con, "SELECT lower(ResourceId), BillingCurrency, sum(BilledCost) "
                                        f"FROM costs WHERE {window.where()} GROUP BY ALL"))
        assert sorted(asked.amounts) == ["arn:aws:ec2:us-east-1:111:instance/i-abc", "i-abc",
                                         "projects/p/zones/z/instances/vm-1"]
        for rid in ("i-ABC", "vm-1", "i-none"):
            assert asked.of(rid) == every.of(rid)
        assert asked.of("i-abc") == {"USD": 5} and asked.of("vm-1") == {"USD": 3} and asked.of("i-none") == {}
    finally:
        store.close()


def test_TAG001_candidates_are_its_options(tmp_path):
    """What the SQL narrows by (Rule.candidates) is the rule's own options: its required keys in their order, and
    its minimum as the exact amount written (0.1, not the float nearest it). Named for TAG001, so that its mutation
    run (.ci/mutation.py, `-k TAG001`) runs it."""
    from decimal import Decimal

    from auditor.registry import get_rule
    from auditor.rule import Untagged

    MissingRequiredTags = get_rule("TAG001")
    assert MissingRequiredTags().candidates() == Untagged(("team", "owner", "project"), Decimal("1"))
    narrowed = MissingRequiredTags({"required_tags": ["owner", "cost-center"], "min_cost": 0.1}).candidates()
    assert narrowed == Untagged(("owner", "cost-center"), Decimal("0.1"))
    assert type(narrowed.keys) is tuple and type(narrowed.min_cost) is Decimal
    path = tmp_path / "policy.yml"
    path.write_text(POLICY)
    rule, = (r for r in configured_rules(load_policy(path)) if r.id == "TAG001")
    assert rule.candidates() == Untagged(("team", "owner"), Decimal("10"))

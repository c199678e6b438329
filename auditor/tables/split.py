"""The provider's own split of shared machines (AWS split cost allocation data for EKS and ECS, FOCUS 1.3
allocated charges), used for team spend in place of the machine's own tags where the export has it.

AWS bills the node in full on its own line and adds, per pod and hour, a line with no cost of its own that
carries the pod's share (`splitLineItem/SplitCost`) and its share of the node's idle capacity (`UnusedCost`):
those shares move from the node's team to each pod's team; what they leave of the node's cost stays with the
node's. FOCUS 1.3 allocated charges are the node's cost already split into rows, each with its own tags: they are
counted as they are, and only reported here as the provider's figures."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from auditor.tables.store import Store
from auditor.window import Window


def provider_split(store: Store, window: Window, team_key: str) -> dict[str, Any] | None:
    """What the provider's split moves between teams ({team: {currency: amount}}, summing to zero per currency),
    and its figures: split and unused cost per currency, machines and pods. None when the export has no split."""
    w = window.where()
    store.tag_set_ids()
    rows = store.con.execute(f"""
        WITH kids AS (SELECT lower(x_SplitParentId) AS parent, BillingCurrency, Tags,
                             sum(COALESCE(x_SplitCost, 0)) AS split, sum(COALESCE(x_SplitUnusedCost, 0)) AS unused
                      FROM costs WHERE {w} AND x_SplitParentId IS NOT NULL
                        AND lower(x_SplitParentId) IS DISTINCT FROM lower(ResourceId) GROUP BY ALL),
             -- a machine's team: that of its costliest tag set (of equal cost, the first by id)
             parents AS (SELECT parent, BillingCurrency, first(Tags ORDER BY cost DESC, tag_set) AS Tags FROM (
                             SELECT lower(ResourceId) AS parent, BillingCurrency, x_TagSet AS tag_set,
                                    any_value(Tags) AS Tags, sum(BilledCost) AS cost
                             FROM costs WHERE {w} AND lower(ResourceId) IN (SELECT parent FROM kids)
                               AND x_SplitParentId IS NULL GROUP BY ALL) GROUP BY ALL),
             moved AS (SELECT parent, BillingCurrency, sum(split + unused) AS amount FROM kids GROUP BY ALL)
        SELECT COALESCE({team_key}, '(unattributed)'), BillingCurrency, sum(split + unused) FROM kids GROUP BY ALL
        UNION ALL
        SELECT COALESCE({team_key}, '(unattributed)'), BillingCurrency, -sum(amount)
        FROM parents JOIN moved USING (parent, BillingCurrency) GROUP BY ALL""").fetchall()
    [(machines, pods)] = store.con.execute(f"""
        SELECT count(DISTINCT lower(x_SplitParentId)), count(DISTINCT x_SplitResourceId) FROM costs
        WHERE {w} AND x_SplitParentId IS NOT NULL""").fetchall()
    if not machines:
        return None
    figures = store.con.execute(f"""
        SELECT BillingCurrency, sum(COALESCE(x_SplitCost, 0)), sum(COALESCE(x_SplitUnusedCost, 0)),
               list(DISTINCT x_SplitMethod ORDER BY x_SplitMethod)
        FROM costs WHERE {w} AND x_SplitParentId IS NOT NULL GROUP BY 1 ORDER BY 1""").fetchall()
    moves: dict[str, dict[str, Decimal]] = {}
    for team, cur, amount in rows:
        per = moves.setdefault(team, {})
        per[cur] = per.get(cur, Decimal(0)) + amount
    return {"moves": {t: {c: a for c, a in v.items() if a} for t, v in sorted(moves.items()) if any(v.values())},
            "split_cost": {cur: split for cur, split, _, _ in figures},
            "unused_cost": {cur: unused for cur, _, unused, _ in figures},
            "methods": sorted({m for *_, methods in figures for m in methods}),
            "machines": machines, "pods": pods}


def apply(by_team: dict[str, dict[str, Decimal]], moves: dict[str, dict[str, Decimal]]) -> None:
    """Team spend ({team: {currency: amount}}) with the provider's split moved in."""
    for team, per in moves.items():
        target = by_team.setdefault(team, {})
        for cur, amount in per.items():
            target[cur] = target.get(cur, Decimal(0)) + amount

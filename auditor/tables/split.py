"""The provider's own split of shared machines (AWS split cost allocation data for EKS and ECS, FOCUS 1.3
allocated charges), used for team spend in place of the machine's own tags where the export has it.

AWS bills the node in full on its own line and adds, per pod and hour, a line with no cost of its own that
carries the pod's share (`splitLineItem/SplitCost`) and its share of the node's idle capacity (`UnusedCost`):
those shares move from the node's team to each pod's team; what they leave of the node's cost stays with the
node's. Every view of team spend reads `with_split` (breakdowns, team reports, budgets: BUD001), and
`provider_split` reports the same moves. FOCUS 1.3 allocated charges are the node's cost already split into
rows, each with its own tags: they are counted as they are, and only reported here as the provider's figures."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from auditor.tables.sql import GPU_HOURS
from auditor.tables.store import Store
from auditor.window import Window


def moved_sql(where: str, parent: bool = False) -> str:
    """The provider's split as rows shaped like `costs` (Tags, x_TagSet, category, GPU model, currency, provider,
    BilledCost and the day as ChargePeriodStart): per pod tag set and day, its split and unused cost, under its
    node's category and GPU model (a GPU node's shares are GPU compute on its GPU); per node, the same amount
    taken back from its own tags. They add up to zero per node and currency, so any sum over `costs` plus these
    rows moves team spend and changes no total. Only splits whose node is billed in the same rows are moved. A
    node's tags are those of its costliest tag set (of equal cost, the lowest id), its category and GPU model
    those of its costliest (of equal cost, the first by name). GPU-hours move with the cost: a share takes the
    node's GPU-hours of that day in the proportion its amount is of the node's cost that day (to the millionth of
    an hour, and the same taken back from the node), so a team's GPU-hours follow its GPU spend. Needs
    `costs.x_TagSet` (Store.tag_set_ids). `parent`: each row names its node too (`x_SplitOf`, lower case), for
    `teams_of`."""
    of = ", parent AS x_SplitOf" if parent else ""
    of_node = ", p.parent AS x_SplitOf" if parent else ""
    return f"""
        WITH kids AS (SELECT lower(x_SplitParentId) AS parent, BillingCurrency, x_TagSet, any_value(Tags) AS Tags,
                             x_Provider, date_trunc('day', ChargePeriodStart) AS day,
                             sum(COALESCE(x_SplitCost, 0)) + sum(COALESCE(x_SplitUnusedCost, 0)) AS amount
                      FROM costs WHERE {where} AND x_SplitParentId IS NOT NULL
                        AND lower(x_SplitParentId) IS DISTINCT FROM lower(ResourceId)
                      GROUP BY parent, BillingCurrency, x_TagSet, x_Provider, day),
             node_days AS (SELECT lower(ResourceId) AS parent, BillingCurrency,
                                  date_trunc('day', ChargePeriodStart) AS day, sum(BilledCost) AS cost,
                                  {GPU_HOURS} AS gpu_hours
                           FROM costs WHERE {where} AND lower(ResourceId) IN (SELECT parent FROM kids)
                             AND x_SplitParentId IS NULL
                           GROUP BY ALL),
             shares AS (SELECT k.*, CAST(CAST(d.gpu_hours AS DECIMAL(38, 6)) * k.amount / nullif(d.cost, 0)
                                        AS DECIMAL(38, 6)) AS hours
                        FROM kids k LEFT JOIN node_days d USING (parent, BillingCurrency, day)),
             node_lines AS (SELECT lower(ResourceId) AS parent, BillingCurrency, x_TagSet, x_CostCategory,
                                   x_GpuModel, any_value(Tags) AS Tags, sum(BilledCost) AS cost
                            FROM costs WHERE {where} AND lower(ResourceId) IN (SELECT parent FROM kids)
                              AND x_SplitParentId IS NULL
                            GROUP BY parent, BillingCurrency, x_TagSet, x_CostCategory, x_GpuModel),
             sets AS (SELECT parent, BillingCurrency, x_TagSet, any_value(Tags) AS Tags, sum(cost) AS cost
                      FROM node_lines GROUP BY parent, BillingCurrency, x_TagSet),
             cats AS (SELECT parent, BillingCurrency, x_CostCategory, sum(cost) AS cost
                      FROM node_lines GROUP BY parent, BillingCurrency, x_CostCategory),
             ptags AS (SELECT parent, BillingCurrency, first(x_TagSet ORDER BY cost DESC, x_TagSet) AS x_TagSet,
                              first(Tags ORDER BY cost DESC, x_TagSet) AS Tags
                       FROM sets GROUP BY parent, BillingCurrency),
             pcats AS (SELECT parent, BillingCurrency,
                              first(x_CostCategory ORDER BY cost DESC, x_CostCategory NULLS LAST) AS x_CostCategory
                       FROM cats GROUP BY parent, BillingCurrency),
             models AS (SELECT parent, BillingCurrency, x_GpuModel, sum(cost) AS cost
                        FROM node_lines GROUP BY parent, BillingCurrency, x_GpuModel),
             pmodels AS (SELECT parent, BillingCurrency,
                                first(x_GpuModel ORDER BY cost DESC, x_GpuModel NULLS LAST) AS x_GpuModel
                         FROM models GROUP BY parent, BillingCurrency),
             parents AS (SELECT * FROM ptags JOIN pcats USING (parent, BillingCurrency)
                         JOIN pmodels USING (parent, BillingCurrency))
        SELECT k.Tags, k.x_TagSet, p.x_CostCategory, p.x_GpuModel, k.BillingCurrency, k.x_Provider,
               k.amount AS BilledCost, 'Usage' AS ChargeCategory, k.day AS ChargePeriodStart,
               k.hours AS ConsumedQuantity, 'Hrs' AS ConsumedUnit, 1 AS x_GpuCount{of}
        FROM shares k JOIN parents p USING (parent, BillingCurrency)
        UNION ALL
        SELECT any_value(p.Tags), p.x_TagSet, p.x_CostCategory, p.x_GpuModel, p.BillingCurrency, min(k.x_Provider),
               -sum(k.amount), 'Usage', k.day, -sum(k.hours), 'Hrs', 1{of_node}
        FROM parents p JOIN shares k USING (parent, BillingCurrency)
        GROUP BY p.parent, p.x_TagSet, p.x_CostCategory, p.x_GpuModel, p.BillingCurrency, k.day"""


def with_split(store: Store, where: str) -> str:
    """The `costs` rows of `where` and the provider's split moved among them (`moved_sql`): the relation every
    view of team spend reads (breakdowns, team reports, budgets), so that all of them follow the split. Just the
    rows where the billing has no split (looked up once per store: most exports have none)."""
    store.tag_set_ids()  # x_TagSet, on the split's rows too
    if store.has_split is None:
        [(exists,)] = store.con.execute(
            "SELECT EXISTS (SELECT 1 FROM costs WHERE x_SplitParentId IS NOT NULL)").fetchall()
        store.has_split = bool(exists)
    if not store.has_split:
        return f"(SELECT * FROM costs WHERE {where})"
    return f"(SELECT * FROM costs WHERE {where} UNION ALL BY NAME ({moved_sql(where)}))"


def provider_split(store: Store, window: Window, team_key: str) -> dict[str, Any] | None:
    """What the provider's split moves between teams ({team: {currency: amount}}, summing to zero per currency),
    and its figures: split and unused cost per currency, machines and pods. None when the export has no split."""
    w = window.where()
    store.tag_set_ids()
    rows = store.con.execute(f"""
        SELECT COALESCE({team_key}, '(unattributed)'), BillingCurrency, sum(BilledCost)
        FROM ({moved_sql(w)}) GROUP BY ALL""").fetchall()
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


def teams_of(store: Store, window: Window, team_key: str) -> dict[str, str | None]:
    """The team of each machine the provider split (by its id in lower case): the team that bears the largest
    part of its cost in the window once the split is moved in (of equal parts, the first by name; of several
    currencies, its largest amount), the attribution every view of team spend makes of its cost. A finding on
    the machine is that team's (core.follow_split). None for a machine whose largest part no team bears; {}
    where the export has no split. FOCUS 1.3 allocated charges are the machine's own lines, each with its tags."""
    w = window.where()
    with_split(store, w)  # looks up whether the billing has a split (store.has_split)
    if not store.has_split:
        return {}
    rows = store.con.execute(f"""
        WITH parents AS (SELECT DISTINCT lower(x_SplitParentId) AS parent FROM costs
                         WHERE {w} AND x_SplitParentId IS NOT NULL),
             parts AS (SELECT lower(ResourceId) AS parent, {team_key} AS team, BillingCurrency, BilledCost
                       FROM costs WHERE {w} AND lower(ResourceId) IN (SELECT parent FROM parents)
                         AND (x_SplitParentId IS NULL OR lower(x_SplitParentId) = lower(ResourceId))
                       UNION ALL
                       SELECT x_SplitOf, {team_key}, BillingCurrency, BilledCost FROM ({moved_sql(w, parent=True)})),
             teams AS (SELECT parent, team, BillingCurrency, sum(BilledCost) AS cost FROM parts GROUP BY ALL)
        SELECT parent, first(team ORDER BY cost DESC, team NULLS LAST, BillingCurrency) FROM teams
        GROUP BY parent""").fetchall()
    return dict(rows)


def apply(by_team: dict[str, dict[str, Decimal]], moves: dict[str, dict[str, Decimal]]) -> None:
    """Team spend ({team: {currency: amount}}) with the provider's split moved in."""
    for team, per in moves.items():
        target = by_team.setdefault(team, {})
        for cur, amount in per.items():
            target[cur] = target.get(cur, Decimal(0)) + amount

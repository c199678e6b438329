"""The entities the rules read, each built from the tables by one registered builder (Cloud Custodian style:
one entity type -> builder map). Each is built once per store and window, however many rules and views read it.
The registry and its builders are read together, one SQL query per entity; the larger cost models behind some of
them live beside it (shared_gpus.py, jobcost.py, split.py), and so do the GPU machines' builders (gpu_machines.py:
core.run_audit imports it, so that they are registered)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

from auditor.model import (
    CapacityReservation,
    Commitment,
    GpuAsset,
    GpuSlice,
    GpuSpendSeries,
    InteractiveGpu,
    Job,
    NodeGpuAllocation,
    RemoteDataFlow,
    ResourceSpend,
    SteadyGpuSpend,
    StorageGrowth,
    TeamSpend,
    TransferFlow,
    UnattributedSpend,
    gpus,
)
from auditor.providers.catalog import family_sql
from auditor.sql import last_segment, lit
from auditor.tables import daily, interactive, shared_gpus, split, stats
from auditor.tables.sql import (
    GB,
    GB_MONTHS,
    GPU_HOURS,
    GPU_USAGE,
    HOURS,
    LATEST_TAG_SET,
    TIERED,
    latest_tag_sets,
    spend_team_sql,
    team_sql,
)
from auditor.tables.store import Store
from auditor.tables.tagmaps import tag_set_maps
from auditor.window import Window, quarter_of

if TYPE_CHECKING:
    from auditor.policy import Policy
    from auditor.rule import Rule, Untagged

Builder = Callable[[Store, Window, "Policy"], list]
BUILDERS: dict[type, Builder] = {}
# Builders that build only the entities their readers may flag, given the readers' terms (Rule.candidates):
# (store, window, policy, terms) -> a Narrowed list.
Narrower = Callable[[Store, Window, "Policy", tuple], "Narrowed"]
NARROWS: dict[type, Narrower] = {}


class Narrowed(list):
    """Entities built for the rules that read them: only those one of the rules may flag, of `examined` in all
    (what the rules looked at, as the audit's clauses count it: a clause with none is not checked)."""

    def __init__(self, items: list, examined: int):
        super().__init__(items)
        self.examined = examined


def builds(entity: type) -> Callable[[Builder], Builder]:
    """Register a function as the builder of one entity type."""

    def register(fn: Builder) -> Builder:
        BUILDERS[entity] = fn
        return fn

    return register


def narrows(entity: type) -> Callable[[Narrower], Narrower]:
    """Register a function as the builder of one entity type's candidates for the rules that read it."""

    def register(fn: Narrower) -> Narrower:
        NARROWS[entity] = fn
        return fn

    return register


def build(store: Store, window: Window, policy: Policy, entity: type, readers: list[Rule] | None = None) -> list:
    """The entities of one type in the window, built on first use and then kept on the store. Given the rules
    that will read them (`readers`), where each states its candidates (Rule.candidates) and the type has a
    narrowing builder, only the entities one of them may flag (a Narrowed list)."""
    terms = tuple(r.candidates() for r in readers or [])
    if terms and entity in NARROWS and all(t is not None for t in terms):
        key: tuple = (entity, window, terms)
        if key not in store.entities:
            store.entities[key] = NARROWS[entity](store, window, policy, terms)
        return store.entities[key]
    key = (entity, window)
    if key not in store.entities:
        store.entities[key] = BUILDERS[entity](store, window, policy)
    return store.entities[key]


def examined(entities: list) -> int:
    """How many entities the rules looked at: all of a Narrowed list's, not only its candidates."""
    return entities.examined if isinstance(entities, Narrowed) else len(entities)


class ByResource:
    """Amounts per resource id (lower case) and currency. Billing names a resource by its id or by an ARN or
    path that ends with it: `of` finds both, through an index of the ids' last segments."""

    def __init__(self, amounts: dict[str, dict[str, Decimal]]):
        self.amounts = amounts
        self.by_tail: dict[str, list[str]] = {}
        for key in amounts:
            self.by_tail.setdefault(re.split(r"[/:]", key)[-1], []).append(key)

    def of(self, rid: str) -> dict[str, Decimal]:
        rid = rid.lower()
        if rid in self.amounts:
            return self.amounts[rid]
        merged: dict[str, Decimal] = {}
        for key in self.by_tail.get(re.split(r"[/:]", rid)[-1], []):
            if key.endswith("/" + rid) or key.endswith(":" + rid):
                for cur, amount in self.amounts[key].items():
                    merged[cur] = merged.get(cur, Decimal(0)) + amount
        return merged


def _by_resource(store: Store, window: Window, ids: list[str], amount: str, where: str = "true",
                 per: str = "BillingCurrency") -> ByResource:
    """ByResource of `amount` (an aggregate over `costs`, per lower-case id and `per`: currency) for these ids only:
    fetched for the ids whose key, or whose last segment, is one of theirs (all that `of` reads), never for every
    resource billed."""
    keys = sorted({i.lower() for i in ids})
    tails = sorted({re.split(r"[/:]", k)[-1] for k in keys})
    # the ids matched once per distinct id, not per line, and their lines joined by the id as billed
    return ByResource(stats.per_currency(store.con, f"""
        WITH ids AS (SELECT ResourceId FROM (SELECT DISTINCT ResourceId FROM costs
                                             WHERE {window.where()} AND ResourceId IS NOT NULL)
                     WHERE lower(ResourceId) IN (SELECT unnest(?::VARCHAR[]))
                        OR {last_segment("lower(ResourceId)")} IN (SELECT unnest(?::VARCHAR[])))
        SELECT lower(ResourceId) AS k, {per}, {amount} FROM costs SEMI JOIN ids USING (ResourceId)
        WHERE {window.where()} AND {where}
        GROUP BY ALL""", [keys, tails]))

@builds(GpuAsset)
def gpu_assets(store: Store, window: Window, policy: Policy) -> list[GpuAsset]:
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    rows = store.con.execute(f"""
        WITH u AS (
            SELECT asset_id,
                greatest(epoch(least(window_end, TIMESTAMP {we})) - epoch(greatest(window_start,
                         TIMESTAMP {ws})), 0) / 3600.0 AS hours, *
            FROM gpu_usage
            WHERE window_start < TIMESTAMP {we} AND window_end > TIMESTAMP {ws})
        SELECT a.*, sum(u.hours), sum(u.samples), sum(u.mean_util_pct * u.hours) / nullif(sum(u.hours), 0),
               max(u.p95_util_pct), max(u.peak_mem_gb), string_agg(DISTINCT u.source, ',')
        FROM assets a LEFT JOIN u ON u.asset_id = a.id
        GROUP BY ALL ORDER BY a.id""").fetchall()
    ids = [r[0] for r in rows]
    costs = _by_resource(store, window, ids, "sum(BilledCost)")
    hours = _by_resource(store, window, ids, "sum(ConsumedQuantity)",  # under 'h': ids matched the same way
                         f"ChargeCategory = 'Usage' AND {HOURS} AND x_CostCategory IN ('gpu_compute', 'other_compute')",
                         per="'h'")
    out = []
    for r in rows:
        a = GpuAsset(id=r[0], provider=r[1], account=r[2], region=r[3], zone=r[4], name=r[5], kind=r[6],
                     instance_type=r[7], gpu_model=r[8], gpu_count=gpus(r[9]), gpu_memory_gb=r[10],
                     lifecycle=r[11], state=r[12], launch_time=r[13], tags=dict(r[14] or {}),
                     usage_hours=r[15], usage_samples=r[16], mean_util_pct=r[17], p95_util_pct=r[18],
                     peak_mem_gb=r[19], usage_source=r[20])
        _complete_gpu(store, a)
        if not a.gpu_count:
            continue
        a.cost = costs.of(a.id)
        a.billed_hours = hours.of(a.id).get("h")
        out.append(a)
    return out

def _complete_gpu(store: Store, item: GpuAsset | Job) -> None:
    """Fill GPU model, count and memory from the catalog where the inventory left them out."""
    t = store.catalog.instance(item.provider, item.instance_type)
    if item.gpu_model is None:
        item.gpu_model = t.gpu_model if t else store.catalog.gpu_model_for(item.provider, item.instance_type)
    if item.gpu_count is None and t:
        item.gpu_count = gpus(t.gpus)  # a fractional type's share of its GPU
    if isinstance(item, GpuAsset) and item.gpu_memory_gb is None:
        g = store.catalog.gpu(item.gpu_model)
        item.gpu_memory_gb = g.memory_gb if g else None

@builds(Job)
def jobs(store: Store, window: Window, policy: Policy) -> list[Job]:
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    cur = store.con.execute(f"""
        SELECT * FROM jobs
        WHERE (start_time IS NULL OR start_time < TIMESTAMP {we})
          AND (end_time IS NULL OR end_time >= TIMESTAMP {ws})
        ORDER BY id""")
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    costs = _by_resource(store, window, [r[names.index("id")] for r in rows], "sum(BilledCost)")
    out = []
    for r in rows:
        d = dict(zip(names, r, strict=True))
        d["tags"] = dict(d["tags"] or {})
        d["kind"] = d["kind"] or "job"
        job = Job(**d)
        _complete_gpu(store, job)
        job.cost = costs.of(job.id)
        out.append(job)
    return out

@builds(ResourceSpend)
def resource_spend(store: Store, window: Window, policy: Policy) -> list[ResourceSpend]:
    """Usage spend per resource, with its spend per tag set and currency. What is chosen among a resource's
    lines is chosen by a stated key, and from sums, never from one row: an engine sums lines into rows its own
    way (DuckDB per export column, Spark per classified column), so a row's figures are not the export's.
    Its category is that of its costliest usage type on one UTC day (of equal cost, the first by name; a GPU
    machine's instance-hours, not its transfer, unless a day's transfer cost more); region and service the first
    by name, the instance type the last; its tags those of the tag set charged last (the latest end of a line),
    of those the costliest, then the first by id (by its entries)."""
    return _resource_spend(store, window, policy, ())


@narrows(ResourceSpend)
def untagged_resources(store: Store, window: Window, policy: Policy, terms: tuple[Untagged, ...]) -> Narrowed:
    """The resources of resource_spend that a tag rule may flag (Rule.candidates' Untagged terms): those whose
    lines of a tag set lacking a required key cost the rule's minimum, each built whole (every tag set)."""
    examined = store.value(f"SELECT count(DISTINCT {_RESOURCE}) FROM costs WHERE {window.where()} "
                           "AND ChargeCategory = 'Usage'")
    return Narrowed(_resource_spend(store, window, policy, terms), int(examined or 0))


# A resource of resource_spend: its id, or (no id) its provider, account, service and region.
_RESOURCE = ("COALESCE(ResourceId, x_Provider || ':' || COALESCE(SubAccountId, BillingAccountId, '-') || ':' "
             "|| COALESCE(ServiceName, '-') || ':' || COALESCE(RegionId, 'global'))")


def _lacking(keys: tuple[str, ...]) -> str:
    """SQL of the ids of the tag sets that lack one of `keys` with a value, as Context.tag finds one. A set holds a
    key where one of its entries has it (a key of ASCII text, trimmed of ASCII white space, in any case) with a
    value that has a letter or digit: said only where Python surely agrees, so that a set said to hold it does
    (any other set is left to the rule to judge). Each distinct key and value is judged once, not once per set
    that holds it: where tags churn, hundreds of thousands of sets repeat a few keys and owners."""
    if not keys:
        return "SELECT tag_set FROM tag_sets WHERE false"
    held = " AND ".join(f"bool_or(k = {lit(key.strip().lower())} AND ok)" for key in keys)
    return f"""
        WITH e AS (SELECT tag_set, unnest(entries) AS x FROM tag_sets),
             ks AS (SELECT key, CASE WHEN NOT regexp_matches(key, '[^\\x00-\\x7f]')
                                     THEN lower(trim(key, ' \t\n\r\f\v')) END AS k
                    FROM (SELECT DISTINCT x.key AS key FROM e)),
             vs AS (SELECT value, regexp_matches(value, '[A-Za-z0-9]') AS ok
                    FROM (SELECT DISTINCT x.value AS value FROM e)),
             h AS (SELECT tag_set, {held} AS held FROM e JOIN ks ON ks.key = x.key JOIN vs ON vs.value = x.value
                   GROUP BY tag_set)
        SELECT tag_set FROM (SELECT DISTINCT tag_set FROM tag_sets) LEFT JOIN h USING (tag_set)
        WHERE NOT COALESCE(held, false)"""


def _untagged_ids(terms: tuple[Untagged, ...], currency: str) -> str:
    """SQL of the ids (`id`) of the resources, over the rows `c`, that one of the terms may flag: the rows of a
    tag set lacking one of its keys (each set judged once) sum to its minimum in the policy's currency, or to
    anything in another."""
    parts = []
    for t in terms:
        least = t.min_cost.quantize(Decimal(1).scaleb(-9), rounding=ROUND_FLOOR)  # never above the rule's
        parts.append(f"""
            SELECT id FROM c SEMI JOIN ({_lacking(t.keys)}) m USING (tag_set)
            GROUP BY id, BillingCurrency
            HAVING BillingCurrency IS DISTINCT FROM {lit(currency)}
                OR sum(BilledCost) >= CAST({lit(str(least))} AS DECIMAL(38, 9))""")
    return " UNION ".join(parts)


def _resource_spend(store: Store, window: Window, policy: Policy,
                    terms: tuple[Untagged, ...]) -> list[ResourceSpend]:
    store.tag_set_ids()
    only = f"WHERE id IN ({_untagged_ids(terms, policy.currency)})" if terms else ""
    rows = store.con.execute(f"""
        WITH c AS (
            SELECT {_RESOURCE} AS id,
                   ResourceId IS NOT NULL AS has_rid, x_Provider, COALESCE(SubAccountId, BillingAccountId) AS account,
                   RegionId, ServiceName, x_CostCategory, x_InstanceType, BillingCurrency, BilledCost, x_Lines,
                   x_UsageType, ChargePeriodStart, ChargePeriodEnd, x_TagSet AS tag_set
            FROM costs WHERE {window.where()} AND ChargeCategory = 'Usage'),
        c1 AS (SELECT * FROM c {only}),
        r AS (SELECT id, bool_or(has_rid) AS has_rid, min(x_Provider) AS provider, min(account) AS account,
                     min(RegionId) AS region, min(ServiceName) AS service, max(x_InstanceType) AS itype,
                     sum(x_Lines) AS n FROM c1 GROUP BY id),
        k AS (SELECT id, first(x_CostCategory ORDER BY cost DESC, x_CostCategory NULLS LAST) AS category
              FROM (SELECT id, x_CostCategory, x_UsageType, date_trunc('day', ChargePeriodStart),
                           sum(BilledCost) AS cost FROM c1 GROUP BY ALL) GROUP BY id),
        s AS (SELECT id, tag_set, BillingCurrency AS cur, sum(BilledCost) AS cost, max(ChargePeriodEnd) AS last
              FROM c1 GROUP BY ALL),
        t AS (SELECT id, {LATEST_TAG_SET} AS tags,
                     list((tag_set, cur, cost) ORDER BY last, cost, tag_set, cur) AS parts
              FROM s GROUP BY id)
        SELECT r.id, r.has_rid, r.provider, r.account, r.region, r.service, k.category, r.itype, r.n,
               t.tags, t.parts
        FROM r JOIN k USING (id) JOIN t USING (id) ORDER BY r.id""").fetchall()
    sets = store.tags(p[0] for row in rows for p in row[10])  # a resource's tags are one of its sets
    out = []
    for rid, has_rid, provider, account, region, service, category, itype, n, tags, parts in rows:
        # parts: (tag set, currency, cost), one per tag set and currency, in the order each was last charged
        spend = ResourceSpend(rid, provider, account, region, service, category, itype, sets[tags], {}, n, has_rid,
                              [(sets[i], cur, cost) for i, cur, cost in parts])
        for _, cur, cost in parts:
            spend.cost[cur] = spend.cost.get(cur, Decimal(0)) + cost
        out.append(spend)
    return out

@builds(TransferFlow)
def transfer_flows(store: Store, window: Window, policy: Policy) -> list[TransferFlow]:
    # Per resource and tag set first: a flow's top resources are those it cost the most in all (of equal cost,
    # the first by id), its tags the costliest resource's, and a resource's tags its costliest tag set's.
    store.tag_set_ids()
    rows = store.con.execute(f"""
        WITH t AS (
            SELECT x_Provider AS p, x_TransferKind AS k, x_TransferFrom AS src, x_TransferTo AS dst,
                   COALESCE(SubAccountId, BillingAccountId) AS account, BillingCurrency AS cur, ResourceId AS rid,
                   x_TagSet AS tag_set, sum({GB}) AS t_gb, sum(BilledCost) AS t_cost, sum(x_Lines) AS t_n
            FROM costs
            WHERE {window.where()} AND x_TransferKind IS NOT NULL AND x_TransferDirection = 'out' GROUP BY ALL),
        r AS (SELECT p, k, src, dst, account, cur, rid, sum(t_gb) AS gb, sum(t_cost) AS cost, sum(t_n) AS n,
                     first(tag_set ORDER BY t_cost DESC, tag_set) AS tags
              FROM t GROUP BY ALL)
        SELECT p, k, src, dst, account, cur, sum(gb), sum(cost), sum(n),
               (list(rid ORDER BY cost DESC, rid) FILTER (WHERE rid IS NOT NULL))[1:5],
               first(tags ORDER BY cost DESC, rid NULLS LAST) FROM r
        GROUP BY ALL ORDER BY 1, 2, 3, 4""").fetchall()
    sets = store.tags(row[-1] for row in rows)
    out: dict[tuple, TransferFlow] = {}
    for provider, kind, src, dst, account, currency, gb, cost, n, top, tags in rows:
        key = (provider, kind, src, dst, account)
        flow = out.get(key)
        if flow is None:
            fid = f"{provider}:{account or '-'}:{kind}:{src or '?'}->{dst or '?'}"
            flow = out[key] = TransferFlow(fid, provider, kind, src, dst, account,
                                           top_resources=list(dict.fromkeys(top or [])),
                                           tags=sets[tags])
        flow.gb += gb or Decimal(0)
        flow.cost[currency] = flow.cost.get(currency, Decimal(0)) + cost
        flow.lines += n
    return list(out.values())

# ---- entities of the wider rule pack (BUD001, TAG003, COM001, STO001, REG002) ------------------------
@builds(TeamSpend)
def team_spend(store: Store, window: Window, policy: Policy) -> list[TeamSpend]:
    """Each team's spend in the quarter that holds the window's start, up to the window's end, by the report's
    team attribution (tables/sql.py spend_team_sql: tax is no team's): in the policy's currency, other
    currencies converted at the policy's rates and, without a rate, left out (`left_out`); GPU-hours whatever
    the currency."""
    q = quarter_of(window.start.date())
    span = Window(q.start, min(window.end, q.end), q.label)
    # Summed per tag set id first: the team lookup then runs once per tag set, not once per line.
    store.tag_set_ids()
    totals: dict[str, dict[str, tuple[Decimal, Decimal, Decimal]]] = {}
    for team, cur, spent, gpu, gh in store.con.execute(f"""
        WITH g AS (
            SELECT x_TagSet AS tag_set, x_CostCategory, BillingCurrency AS cur, sum(BilledCost) AS spent,
                   sum(BilledCost) FILTER (WHERE x_CostCategory = 'gpu_compute') AS gpu,
                   {GPU_HOURS} AS gh
            FROM {split.with_split(store, span.where())} GROUP BY x_TagSet, x_CostCategory, BillingCurrency)
        SELECT {spend_team_sql(policy)} AS team, cur, sum(spent), COALESCE(sum(gpu), 0), COALESCE(sum(gh), 0)
        FROM g JOIN {tag_set_maps(store)} USING (tag_set) GROUP BY 1, 2""").fetchall():
        totals.setdefault(team, {})[cur] = (spent, gpu, gh)
    data_end = store.value(f"SELECT least(max(ChargePeriodEnd), TIMESTAMP "
                           f"{lit(span.end.isoformat(' '))}) FROM costs WHERE {span.where()}")
    out = []
    for name, team in policy.teams.items():
        spent = gpu = gpu_hours = Decimal(0)
        left_out: dict[str, Decimal] = {}
        for cur, (cur_spent, cur_gpu, cur_hours) in sorted(totals.get(name, {}).items()):
            gpu_hours += cur_hours
            converted = policy.convert(cur_spent, cur)
            if converted is None:
                left_out[cur] = cur_spent
            else:
                spent += converted
                gpu += policy.convert(cur_gpu, cur)
        tags = {policy.team_tags[0]: name, **({policy.owner_tags[0]: team.lead} if team.lead else {})}
        out.append(TeamSpend(name, name, team.lead, policy.currency, team.budget_per_quarter,
                             team.gpu_hours_per_quarter, spent, gpu, gpu_hours, q.label, q.start, q.end,
                             data_end, tags, left_out))
    return out

@builds(UnattributedSpend)
def unattributed_spend(store: Store, window: Window, policy: Policy) -> list[UnattributedSpend]:
    """Per currency, the spend no team owns against the total: of GPU compute (scope gpu) and of
    everything but tax (scope all: tax is no team's to own), with the largest unowned resources."""
    # The team is looked up once per tag set, and lines summed per tag set; only the unowned sets' lines are
    # summed per resource (for the largest of them).
    store.tag_set_ids()
    lines = f"costs WHERE {window.where()} AND x_CostCategory IS DISTINCT FROM 'tax'"
    rows = store.con.execute(f"""
        WITH o AS (SELECT tag_set, {team_sql(policy)} IS NULL AS unowned FROM {tag_set_maps(store)}),
             p AS (SELECT BillingCurrency AS cur, x_CostCategory = 'gpu_compute' AS gpu, x_TagSet AS tag_set,
                          sum(BilledCost) AS cost, sum(x_Lines) AS n
                   FROM {lines} GROUP BY ALL),
             l AS (SELECT cur, gpu, unowned, cost, n FROM p JOIN o USING (tag_set)),
             scoped AS (SELECT 'gpu' AS scope, * FROM l WHERE gpu UNION ALL SELECT 'all' AS scope, * FROM l),
             r AS (SELECT BillingCurrency AS cur, x_CostCategory = 'gpu_compute' AS gpu,
                          COALESCE(ResourceId, x_Provider || ':' || COALESCE(ServiceName, '-') || ':'
                                   || COALESCE(ChargeCategory, '-')) AS rid, sum(BilledCost) AS cost
                   FROM {lines} AND x_TagSet IN (SELECT tag_set FROM o WHERE unowned) GROUP BY ALL),
             top AS (SELECT scope, cur, rid, sum(cost) AS cost
                     FROM (SELECT 'gpu' AS scope, * FROM r WHERE gpu UNION ALL SELECT 'all' AS scope, * FROM r)
                     GROUP BY scope, cur, rid
                     QUALIFY row_number() OVER (PARTITION BY scope, cur ORDER BY sum(cost) DESC, rid) <= 5)
        SELECT s.scope, s.cur, sum(s.cost), COALESCE(sum(s.cost) FILTER (WHERE s.unowned), 0),
               CAST(COALESCE(sum(s.n) FILTER (WHERE s.unowned), 0) AS BIGINT),
               (SELECT list([t.rid, CAST(t.cost AS VARCHAR)] ORDER BY t.cost DESC, t.rid) FROM top t
                WHERE t.scope = s.scope AND t.cur = s.cur)
        FROM scoped s GROUP BY ALL ORDER BY 1, 2""").fetchall()
    return [UnattributedSpend(f"org:{scope}:{cur}", scope, cur, total, unowned, n,
                              [(r, Decimal(c)) for r, c in top or []])
            for scope, cur, total, unowned, n, top in rows]

@builds(Commitment)
def commitments(store: Store, window: Window, policy: Policy) -> list[Commitment]:
    """Reservations and savings plans: the amortised cost of what they covered (CommitmentDiscountStatus
    Used) and of the capacity nobody used (Unused), per commitment and currency; its tags are its costliest
    tag set's (of equal cost, the first by id)."""
    store.tag_set_ids()
    rows = store.con.execute(f"""
        WITH c AS (SELECT COALESCE(CommitmentDiscountId, x_Provider || ':' || COALESCE(SubAccountId,
                                   BillingAccountId, '-') || ':' || COALESCE(x_InstanceType, '-')) AS id,
                          *, x_TagSet AS tag_set
                   FROM costs
                   WHERE {window.where()} AND CommitmentDiscountStatus IN ('Used', 'Unused')),
             tg AS (SELECT id, BillingCurrency, first(tag_set ORDER BY cost DESC, tag_set) AS tags
                    FROM (SELECT id, BillingCurrency, tag_set, sum(EffectiveCost) AS cost FROM c GROUP BY ALL)
                    GROUP BY ALL)
        SELECT id, min(x_Provider), min(COALESCE(SubAccountId, BillingAccountId)), min(RegionId),
               min(CommitmentDiscountType), max(x_InstanceType), max(x_GpuModel), BillingCurrency,
               COALESCE(sum(EffectiveCost) FILTER (WHERE CommitmentDiscountStatus = 'Used'), 0),
               COALESCE(sum(EffectiveCost) FILTER (WHERE CommitmentDiscountStatus = 'Unused'), 0),
               min(ChargePeriodStart), max(ChargePeriodEnd), any_value(tg.tags), max(x_CommitmentEnd),
               sum(CommitmentDiscountQuantity) FILTER (WHERE CommitmentDiscountStatus = 'Used'),
               sum(CommitmentDiscountQuantity) FILTER (WHERE CommitmentDiscountStatus = 'Unused'),
               max(CommitmentDiscountUnit),
               list(DISTINCT ContractApplied ORDER BY ContractApplied) FILTER (WHERE ContractApplied IS NOT NULL)
        FROM c JOIN tg USING (id, BillingCurrency)
        GROUP BY id, BillingCurrency ORDER BY 1, BillingCurrency""").fetchall()
    sets = store.tags(row[12] for row in rows)
    return [Commitment(rid, provider, account, region, None, kind, itype, gpu, cur, used, unused, first, last,
                       sets[tags], ends, used_q, unused_q, unit, _contracts(contracts))
            for (rid, provider, account, region, kind, itype, gpu, cur, used, unused, first, last, tags, ends, used_q,
                 unused_q, unit, contracts) in rows]

def _contracts(applied: list[str] | None) -> list[str]:
    """The contract ids of FOCUS ContractApplied values (JSON: `{"Elements": [{"ContractId": ...}]}`), a value
    that is not that JSON as it is."""
    out: list[str] = []
    for value in applied or []:
        try:
            ids = [str(e["ContractId"]) for e in json.loads(value)["Elements"] if e.get("ContractId")]
        except (ValueError, TypeError, KeyError, AttributeError):
            ids = [value]
        out += [i for i in ids if i not in out]
    return out

@builds(SteadyGpuSpend)
def steady_gpu_spend(store: Store, window: Window, policy: Policy) -> list[SteadyGpuSpend]:
    """On-demand GPU compute per provider, region, instance family and currency, and its floor: the least it cost
    in any hour of the window's billing (hourly_floors), which a commitment of that size would always use. The
    machines findings say to stop or shrink (store.freed, core.run_audit) are left out: no commitment is sized on
    a machine the same audit says to stop."""
    on_demand = ("COALESCE(PricingCategory, '') NOT IN ('Dynamic', 'Committed') AND CommitmentDiscountId IS NULL "
                 "AND CommitmentDiscountStatus IS NULL AND NOT __freed")
    # The resources of `costs` freed (by their id, or its last segment), found once, in a table joined by id: as a
    # list of hundreds of literals in each row's filter, each row was compared with each (1M lines: 3 CPU s).
    source = "(SELECT *, false AS __freed FROM costs)"
    if store.freed:
        store.con.execute("CREATE OR REPLACE TEMP TABLE freed_ids AS SELECT unnest(?::VARCHAR[]) AS id",
                          [sorted(store.freed)])
        store.con.execute(f"""
            CREATE OR REPLACE TEMP TABLE freed_resources AS
            SELECT ResourceId FROM (SELECT DISTINCT ResourceId FROM costs WHERE ResourceId IS NOT NULL)
            WHERE lower(ResourceId) IN (SELECT id FROM freed_ids)
               OR {last_segment("lower(ResourceId)")} IN (SELECT id FROM freed_ids)""")
        source = ("(SELECT c.*, f.ResourceId IS NOT NULL AS __freed FROM costs c "
                  "LEFT JOIN freed_resources f ON c.ResourceId = f.ResourceId)")
    gpu = (f"{window.where()} AND x_CostCategory = 'gpu_compute' AND ChargeCategory = 'Usage' "
           "AND x_InstanceType IS NOT NULL")
    family = family_sql("x_Provider", "x_InstanceType")
    rows = store.con.execute(f"""
        WITH days AS (SELECT count(DISTINCT date_trunc('day', ChargePeriodStart)) AS n FROM costs
                      WHERE {window.where()}),
             g AS (SELECT x_Provider AS provider, RegionId AS region, {family} AS family, BillingCurrency AS cur,
                          date_trunc('day', ChargePeriodStart) AS day,
                          sum(BilledCost) FILTER (WHERE {on_demand}) AS od,
                          sum(BilledCost) FILTER (WHERE NOT ({on_demand}) AND PricingCategory <> 'Dynamic') AS cm,
                          list(DISTINCT x_InstanceType) AS types, max(x_GpuModel) AS model
                   FROM {source} WHERE {gpu} GROUP BY ALL)
        SELECT provider, region, family, cur, (SELECT n FROM days), count(*) FILTER (WHERE od > 0),
               COALESCE(sum(od), 0), COALESCE(sum(cm), 0), list_sort(flatten(list(types))), max(model)
        FROM g GROUP BY ALL HAVING sum(od) > 0 ORDER BY 1, 2, 3, 4""").fetchall()
    floors = hourly_floors(store, window, f"{gpu} AND {on_demand}", family, source)
    for table in ("freed_ids", "freed_resources"):
        store.con.execute(f"DROP TABLE IF EXISTS {table}")
    out = []
    for provider, region, family_name, cur, days, billed, od, cm, types, model in rows:
        hours, ran, floor, at = floors.get((provider, region, family_name, cur), (0, 0, Decimal(0), None))
        out.append(SteadyGpuSpend(f"{provider}:{region or 'global'}:{family_name}:{cur}", provider, region,
                                  family_name, list(dict.fromkeys(types or [])), model, cur, days, billed, floor, od,
                                  cm, hours=hours, hours_billed=ran, floor_at=at))
    return out


def hourly_floors(store: Store, window: Window, where: str, family: str, source: str = "costs") -> dict[tuple, tuple]:
    """(provider, region, family, currency) -> (hours of billing, hours it ran, least hour's cost, that hour), of
    the rows of `source` (`costs`, or a query over it) that match `where`.

    The `costs` table sums lines per UTC day, keeping the first start, the last end, the hours consumed and the
    number of lines; a resource's usage type's day is taken whole here, whatever files or rows it was read in (a
    split export gives the floor of the whole). A day that fills its span ran every hour of it, at its cost /
    span an hour (an hourly export's machine that ran 08-20 UTC adds to those 12 hours only): hourly lines as
    many as its hours, hours consumed equal to its span, or one line over the span (a daily line, its hours at
    least the span). Any other day (one with gaps, a daily export's part day, several GPUs' hours on lines with
    gaps) may have been off in any given hour, so it adds to none: the floor is never more than what ran in its
    least hour. The hours of billing are those of the days with any line, up to the billing's last end; an hour
    nothing of the family ran in makes the floor 0."""
    rows = store.con.execute(f"""
        WITH r AS (SELECT x_Provider AS p, RegionId AS reg, {family} AS fam, BillingCurrency AS cur,
                          min(ChargePeriodStart) AS s, max(ChargePeriodEnd) AS e, sum(BilledCost) AS c,
                          sum(CASE WHEN {HOURS} THEN ConsumedQuantity END) AS q, sum(x_Lines) AS n,
                          (epoch(max(ChargePeriodEnd)) - epoch(min(ChargePeriodStart))) / 3600 AS span
                   FROM {source} WHERE {where} AND ChargePeriodEnd > ChargePeriodStart
                   GROUP BY p, reg, fam, cur, lower(ResourceId), x_UsageType, date_trunc('day', ChargePeriodStart)),
             h AS (SELECT p, reg, fam, cur, unnest(range(date_trunc('hour', s), e, INTERVAL 1 HOUR)) AS hour,
                          CAST(round(span * 3600) AS BIGINT) AS secs, c
                   FROM r WHERE n >= span - 0.01 OR abs(q - span) < 0.01
                                OR (n = 1 AND (q IS NULL OR q >= span - 0.01)))
        SELECT p, reg, fam, cur, hour, secs, sum(c) FROM h GROUP BY ALL""").fetchall()
    ends = store.con.execute(f"""
        SELECT list(DISTINCT date_trunc('day', ChargePeriodStart)), max(ChargePeriodEnd) FROM costs
        WHERE {window.where()}""").fetchone()
    days, data_end = ends if ends and ends[0] else ([], None)
    end = min(data_end, window.end) if data_end else window.end
    covered = [t for d in days for t in (d + timedelta(hours=i) for i in range(24)) if window.start <= t < end]
    per_hour: dict[tuple, dict[datetime, Decimal]] = {}
    for p, reg, fam, cur, hour, secs, cost in rows:
        spent = per_hour.setdefault((p, reg, fam, cur), {})
        spent[hour] = spent.get(hour, Decimal(0)) + cost * 3600 / secs  # Decimal: 28 digits, no float
    out = {}
    for key, spent in per_hour.items():
        at = min(covered, key=lambda t: (spent.get(t, Decimal(0)), t)) if covered else None
        ran = sum(1 for t in covered if spent.get(t, 0) > 0)
        out[key] = (len(covered), ran, spent.get(at, Decimal(0)) if at else Decimal(0), at)
    return out


@builds(GpuSpendSeries)
def gpu_spend_series(store: Store, window: Window, policy: Policy) -> list[GpuSpendSeries]:
    """GPU compute day by day per team, account and instance family (tables/daily.py)."""
    return daily.spend_series(store, window, policy)

@builds(InteractiveGpu)
def interactive_gpus(store: Store, window: Window, policy: Policy) -> list[InteractiveGpu]:
    """Notebooks and dev machines with GPUs and their spans of nil utilisation (tables/interactive.py)."""
    return interactive.interactive_gpus(store, window, build(store, window, policy, GpuAsset),
                                        build(store, window, policy, GpuSlice))

@builds(StorageGrowth)
def storage_growth(store: Store, window: Window, policy: Policy) -> list[StorageGrowth]:
    """Storage resources month by month (average GB stored and cost, in each one's main currency), their
    storage classes, and the jobs that write checkpoints to them; its tags are those charged last
    (LATEST_TAG_SET)."""
    store.tag_set_ids()
    storage = (f"{window.where()} AND ResourceId IS NOT NULL AND x_CostCategory = 'storage' "
               "AND ChargeCategory = 'Usage'")
    rows = store.con.execute(f"""
        WITH m AS (
            SELECT lower(ResourceId) AS rid, date_trunc('month', ChargePeriodStart) AS month,
                   BillingCurrency AS cur,
                   sum({GB_MONTHS}) AS gbmo, sum(BilledCost) AS cost,
                   min(ChargePeriodStart) AS first, max(ChargePeriodEnd) AS last
            FROM costs WHERE {window.where()} AND ResourceId IS NOT NULL AND x_CostCategory = 'storage'
              AND ChargeCategory = 'Usage' AND ({GB_MONTHS}) IS NOT NULL GROUP BY ALL),
        main AS (SELECT rid, first(cur ORDER BY cost DESC, cur) AS cur
                 FROM (SELECT rid, cur, sum(cost) AS cost FROM m GROUP BY ALL) GROUP BY 1),
        lt AS ({latest_tag_sets("lower(ResourceId)", storage)}),
        info AS (SELECT lower(ResourceId) AS rid, min(x_Provider) AS provider,
                        min(COALESCE(SubAccountId, BillingAccountId)) AS account,
                        min(RegionId) AS region,
                        min(ServiceName) AS service, any_value(lt.tag_set) AS tags,
                        list(DISTINCT COALESCE(x_UsageType, ChargeDescription, SkuId)
                             ORDER BY COALESCE(x_UsageType, ChargeDescription, SkuId)) AS classes,
                        bool_or(regexp_matches(COALESCE(x_UsageType, '') || ' ' || COALESCE(ChargeDescription, ''),
                                               {lit(TIERED)})) AS tiered
                 FROM costs JOIN lt ON lt.k = lower(ResourceId) WHERE {storage} GROUP BY 1),
        ckpt AS (SELECT lower(regexp_extract(checkpoint_uri, '^[A-Za-z0-9]+://([^/]+)', 1)) AS bucket,
                        list(DISTINCT COALESCE(name, id) ORDER BY COALESCE(name, id)) AS jobs
                 FROM jobs WHERE checkpoint_uri IS NOT NULL GROUP BY 1)
        SELECT m.rid, i.provider, i.account, i.region, i.service, i.tags, i.classes, i.tiered, m.cur,
               list([strftime(m.month, '%Y-%m'), CAST(round(m.gbmo * (epoch(m.month + INTERVAL 1 MONTH)
                     - epoch(m.month)) / nullif(epoch(least(m.last, m.month + INTERVAL 1 MONTH))
                     - epoch(greatest(m.first, m.month)), 0), 3) AS VARCHAR), CAST(m.cost AS VARCHAR)]
                    ORDER BY m.month),
               sum(m.cost),
               (SELECT first(c.jobs ORDER BY c.bucket) FROM ckpt c WHERE c.bucket <> '' AND (m.rid = c.bucket
                    OR ends_with(m.rid, ':' || c.bucket) OR ends_with(m.rid, '/' || c.bucket)))
        FROM m JOIN main USING (rid, cur) JOIN info i USING (rid)
        GROUP BY ALL ORDER BY 1""").fetchall()
    sets = store.tags(row[5] for row in rows)
    return [StorageGrowth(rid, provider, account, region, service, cur,
                          [(mon, Decimal(gb), Decimal(c)) for mon, gb, c in months if gb is not None],
                          [c for c in classes if c], tiered, list(jobs or []), sets[tags], {cur: cost})
            for rid, provider, account, region, service, tags, classes, tiered, cur, months, cost, jobs in rows]

@builds(RemoteDataFlow)
def remote_data_flows(store: Store, window: Window, policy: Policy) -> list[RemoteDataFlow]:
    """Inter-region transfer out, each flow with the GPU compute billed in its destination (and source) region."""
    gpu: dict[tuple[str, str], tuple[dict[str, Decimal], Decimal, list[str]]] = {}
    for provider, region, cur, cost, hours, top in store.con.execute(f"""
            WITH r AS (SELECT x_Provider AS p, RegionId AS reg, BillingCurrency AS cur, ResourceId AS rid,
                              sum(BilledCost) AS cost,
                              {GPU_HOURS} AS gh
                       FROM costs WHERE {window.where()} AND x_CostCategory = 'gpu_compute' AND RegionId IS NOT NULL
                       GROUP BY ALL)
            SELECT p, reg, cur, sum(cost), COALESCE(sum(gh), 0),
                   (list(rid ORDER BY cost DESC, rid) FILTER (WHERE rid IS NOT NULL))[1:5]
            FROM r GROUP BY ALL""").fetchall():
        costs, gh, names = gpu.get((provider, region), ({}, Decimal(0), []))
        costs[cur] = cost
        gpu[(provider, region)] = (costs, gh + hours, names + list(top or []))
    out = []
    for f in build(store, window, policy, TransferFlow):
        if f.kind != "inter_region":
            continue
        dest = gpu.get((f.provider, f.destination), ({}, Decimal(0), []))
        out.append(RemoteDataFlow(f.id, f.provider, f.source, f.destination, f.account, f.gb, dict(f.cost),
                                  f.top_resources, f.tags, dest[0], dest[1], dest[2][:5],
                                  gpu.get((f.provider, f.source), ({},))[0]))
    return out


# ---- Kubernetes GPUs, whole and shared (KUBE001-KUBE003; the cost model is tables/shared_gpus.py) ----------
def _shared_gpus(store: Store, window: Window, policy: Policy) -> tuple[list, list]:
    if window not in store.shared_gpus:
        store.shared_gpus[window] = shared_gpus.build(store, window, build(store, window, policy, GpuAsset))
    return store.shared_gpus[window]


@builds(NodeGpuAllocation)
def node_gpu_allocations(store: Store, window: Window, policy: Policy) -> list[NodeGpuAllocation]:
    return _shared_gpus(store, window, policy)[0]


@builds(GpuSlice)
def gpu_slices(store: Store, window: Window, policy: Policy) -> list[GpuSlice]:
    return _shared_gpus(store, window, policy)[1]


# ---- what the bill alone says (COM002) -------------------------------------------------------------------
@builds(CapacityReservation)
def capacity_reservations(store: Store, window: Window, policy: Policy) -> list[CapacityReservation]:
    """Capacity reservations, per reservation and currency: the effective cost and instance-hours of the hours
    something ran in them (CapacityReservationStatus Used) and of those nothing did (Unused); its tags are
    the fullest tag set of the reservation's own lines, else of any line billed to it (of as full, the first
    by id)."""
    store.tag_set_ids()
    rows = store.con.execute(f"""
        SELECT CapacityReservationId, min(x_Provider), min(COALESCE(SubAccountId, BillingAccountId)), min(RegionId),
               bool_or(COALESCE(x_UsageType, '') ILIKE '%CapacityBlock%'), max(x_InstanceType), max(x_GpuModel),
               max(x_GpuCount), BillingCurrency,
               COALESCE(sum(EffectiveCost) FILTER (WHERE CapacityReservationStatus = 'Used'), 0),
               COALESCE(sum(EffectiveCost) FILTER (WHERE CapacityReservationStatus = 'Unused'), 0),
               COALESCE(sum(ConsumedQuantity) FILTER (WHERE CapacityReservationStatus = 'Used' AND {HOURS}), 0),
               COALESCE(sum(ConsumedQuantity) FILTER (WHERE CapacityReservationStatus = 'Unused' AND {HOURS}), 0),
               COALESCE(sum(ConsumedQuantity * x_GpuCount)
                        FILTER (WHERE {GPU_USAGE} AND CapacityReservationStatus = 'Used'), 0),
               COALESCE(sum(ConsumedQuantity * x_GpuCount)
                        FILTER (WHERE {GPU_USAGE} AND CapacityReservationStatus = 'Unused'), 0),
               min(ChargePeriodStart), max(ChargePeriodEnd),
               COALESCE(first(x_TagSet ORDER BY cardinality(Tags) DESC, x_TagSet)
                            FILTER (WHERE lower(ResourceId) = lower(CapacityReservationId)),
                        first(x_TagSet ORDER BY cardinality(Tags) DESC, x_TagSet))
        FROM costs WHERE {window.where()} AND CapacityReservationId IS NOT NULL
        GROUP BY CapacityReservationId, BillingCurrency ORDER BY 1, BillingCurrency""").fetchall()
    sets = store.tags(row[-1] for row in rows)
    kinds = {"aws": "On-Demand Capacity Reservation", "gcp": "reservation", "azure": "capacity reservation"}
    ends = dict(store.con.execute(f"SELECT x_Provider, max(ChargePeriodEnd) FROM costs WHERE {window.where()} "
                                  "GROUP BY 1").fetchall())
    out = []
    for (rid, provider, account, region, block, itype, gpu, count, cur, used, unused, used_h, unused_h, used_gh,
         unused_gh, first, last, tags) in rows:
        # Instance-hours as the export states them: where it bills a reservation's GPUs on lines of their own
        # (GCP: the GPU SKU in GPU-hours beside the cores' vCPU-hours and the memory's GiB-hours), its GPU-hours
        # over the machine type's GPUs; else the hours of its lines (an EC2 or Azure VM line is an instance-hour).
        t = store.catalog.instance(provider, itype)
        per = t.gpus if t else None
        if per:
            used_h, unused_h = (h if not gh or gh == h * per else (gh / per).quantize(h)
                                for h, gh in ((used_h, used_gh), (unused_h, unused_gh)))
        out.append(CapacityReservation(
            rid, provider, account, region,
            "Capacity Block for ML" if block else kinds.get(provider, "capacity reservation"), itype, gpu,
            gpus(per or count), cur, used, unused, used_h, unused_h, first, last, ends.get(provider),
            sets[tags]))
    return out

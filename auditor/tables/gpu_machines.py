"""The GPU machines' entities, built from the tables and registered in entities.py: `GpuCapacity`, the
inventory's machines with what the bill and the metrics say of them (GPU005, GPU007), and `BilledGpuMachine`,
every machine the bill shows GPU compute usage for, per day (GPU006), with its narrowing builder for GPU006's
candidates. core.run_audit imports this module, so that they are registered before any build."""

from __future__ import annotations

import re
from dataclasses import fields
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

from auditor.evidence import billing_tags
from auditor.model import BilledGpuMachine, GpuAsset, GpuCapacity, gpus
from auditor.sql import last_segment, lit
from auditor.tables.entities import Narrowed, build, builds, narrows
from auditor.tables.sql import HOURS, latest_tag_sets
from auditor.tables.store import Store
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.policy import Policy
    from auditor.rule import BilledDays


# ---- the inventory's GPU machines (GPU005, GPU007) -------------------------------------------------------
@builds(GpuCapacity)
def gpu_capacity(store: Store, window: Window, policy: Policy) -> list[GpuCapacity]:
    """GPU machines with when their billing and metrics last ran, the storage billed under their name
    (Azure and GCP name a machine's disks after it) and the jobs seen on their instance type."""
    assets = build(store, window, policy, GpuAsset)
    if not assets:
        return []
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    # Billing names a machine by its id, or by an ARN or path that ends with it: two equality joins.
    rows = store.con.execute(f"""
        WITH b AS (SELECT lower(ResourceId) AS rid, {last_segment("lower(ResourceId)")} AS tail,
                          min(ChargePeriodStart) AS first, max(ChargePeriodEnd) AS last
                   FROM costs WHERE {window.where()} AND ResourceId IS NOT NULL AND ChargeCategory = 'Usage'
                     AND x_CostCategory IN ('gpu_compute', 'other_compute') GROUP BY 1),
             billed AS (SELECT id, min(first) AS first, max(last) AS last FROM (
                            SELECT a.id, b.first, b.last FROM assets a JOIN b ON b.rid = lower(a.id)
                            UNION ALL
                            SELECT a.id, b.first, b.last FROM assets a JOIN b ON b.tail = lower(a.id)
                            WHERE b.rid <> lower(a.id)) GROUP BY 1),
             s AS (SELECT *, {last_segment("rid")} AS seg FROM (  -- the id's last segment, once
                       SELECT lower(ResourceId) AS rid, BillingCurrency AS cur, sum(BilledCost) AS cost
                       FROM costs WHERE {window.where()} AND ResourceId IS NOT NULL
                         AND x_CostCategory = 'storage' GROUP BY ALL)),
             disks AS ({named_storage_sql("assets", "s")}),
             u AS (SELECT asset_id, max(least(window_end, TIMESTAMP {we})) AS last_usage FROM gpu_usage
                   WHERE window_start < TIMESTAMP {we} AND window_end > TIMESTAMP {ws} GROUP BY 1),
             j AS (SELECT provider, account, region, lower(regexp_replace(instance_type, '^ml\\.', '')) AS itype,
                          count(*) AS n FROM jobs
                   WHERE (start_time IS NULL OR start_time < TIMESTAMP {we})
                     AND (end_time IS NULL OR end_time >= TIMESTAMP {ws}) GROUP BY ALL)
        SELECT a.id, billed.first, billed.last, u.last_usage, disks.d,
               (SELECT COALESCE(sum(j.n), 0) FROM j WHERE j.provider = a.provider
                    AND j.account IS NOT DISTINCT FROM a.account AND j.region IS NOT DISTINCT FROM a.region
                    AND j.itype = lower(a.instance_type))
        FROM assets a LEFT JOIN billed USING (id) LEFT JOIN u ON u.asset_id = a.id
             LEFT JOIN disks USING (id)""").fetchall()
    data_end = store.value(f"SELECT max(ChargePeriodEnd) FROM costs WHERE {window.where()}")
    by_id = {r[0]: r[1:] for r in rows}
    # What the bill says of each machine (every line's tags, the pods its cost was split to): evidence of an owner
    # or a job that its inventory entry may lack.
    billed: dict[str, BilledGpuMachine] = {}
    m: BilledGpuMachine | None  # each billed machine here, then the one billed as each asset (or none)
    for m in _billed_gpu_machines(store, window, policy, keep=_INVENTORY_MACHINES):
        billed.setdefault(m.id.lower(), m)
        billed.setdefault(re.split(r"[/:]", m.id.lower())[-1], m)
    jobs_read = _jobs_read(store)
    out = []
    for a in assets:
        first, last, last_usage, disks, jobs = by_id.get(a.id, (None, None, None, None, 0))
        storage: dict[str, Decimal] = {}
        for d in disks or []:
            storage[d["cur"]] = storage.get(d["cur"], Decimal(0)) + d["cost"]
        m = billed.get(a.id.lower())
        out.append(GpuCapacity(
            **{f.name: getattr(a, f.name) for f in fields(GpuAsset)}, first_billed_at=first, last_billed_at=last,
            last_usage_at=last_usage, data_end=data_end, storage_cost=storage,
            storage_resources=list(dict.fromkeys(d["rid"] for d in disks or [])), jobs_seen=int(jobs),
            jobs_read=jobs_read, billing_tags=billing_tags(m.tags, m.tags_seen) if m else {},
            split_resources=m.split_resources if m else []))
    return out


def named_storage_sql(assets: str, storage: str) -> str:
    """SQL of each machine's storage named after it (`d`, by `id`): a storage row (`storage`'s rid, cur, cost and
    seg, the last segment of its id) whose segment is the machine's name (of three characters or more, in any
    case), or that name followed by '-' or '_' and more (Azure and GCP name a machine's disks so). Each row is
    joined by the names it can hold, its segment and each of its prefixes that a '-' or '_' follows: a join on
    equality, where comparing every disk with every machine grew with their product."""
    return f"""
        SELECT a.id, list({{'rid': n.rid, 'cur': n.cur, 'cost': n.cost}} ORDER BY n.rid, n.cur) AS d
        FROM {assets} a
        JOIN (SELECT *, unnest([seg] || [substr(seg, 1, i) FOR i IN range(1, length(seg))
                                         IF substr(seg, i + 1, 1) IN ('-', '_')]) AS name
              FROM {storage}) n ON n.name = lower(a.name)
        WHERE a.name IS NOT NULL AND length(a.name) >= 3
        GROUP BY 1"""


# The billed machines an inventory names: by their ids, or by an ARN's or path's last segment.
_INVENTORY_MACHINES = f"""
    SELECT DISTINCT lower(ResourceId) AS rid FROM billed
    WHERE lower(ResourceId) IN (SELECT lower(id) FROM assets)
       OR {last_segment("lower(ResourceId)")} IN (SELECT lower(id) FROM assets)"""


def _jobs_read(store: Store) -> bool:
    return bool(store.value("SELECT count(*) FROM jobs"))


# ---- what the bill alone says (GPU006) -------------------------------------------------------------------
@builds(BilledGpuMachine)
def billed_gpu_machines(store: Store, window: Window, policy: Policy) -> list[BilledGpuMachine]:
    """Every resource id with GPU compute usage in the window (not a pod's or task's split line, not a
    capacity reservation's or commitment's unused hours), per UTC day: its hours (at most 24, and at most the
    span of its lines: a GCP machine bills core-hours and GPU-hours on lines of its own), its cost in its main
    currency, and whether the day was a weekend; with the tags, jobs and pods seen on it and what the inventory,
    if one was read, says of it."""
    return _billed_gpu_machines(store, window, policy)


@narrows(BilledGpuMachine)
def long_billed_gpu_machines(store: Store, window: Window, policy: Policy,
                             terms: tuple[BilledDays, ...]) -> Narrowed:
    """The machines of billed_gpu_machines that a rule may flag (Rule.candidates' BilledDays terms): those billed
    on as many days, and as large a share of their provider's days with billing, as one of the terms asks. Where
    machines churn, tens of thousands are billed a few days each, and none of them is built."""
    data = _data_days(store, window)
    least = [(t.min_days.quantize(Decimal(1).scaleb(-9), rounding=ROUND_FLOOR),  # never above the rule's
              t.min_pct.quantize(Decimal(1).scaleb(-9), rounding=ROUND_FLOOR)) for t in terms]
    asked = " OR ".join(f"(n >= CAST({lit(str(d))} AS DECIMAL(38, 9)) AND dd > 0 "
                        f"AND n * 100 >= CAST({lit(str(pct))} AS DECIMAL(38, 9)) * dd)" for d, pct in least)
    provider_days = ", ".join(f"({'NULL' if p is None else lit(p)}, {n})" for p, (n, _) in data.items())
    # a machine's days and provider as the builder counts them: its usage lines' days, the least provider named
    keep = f"""
        SELECT rid FROM (SELECT lower(ResourceId) AS rid, min(x_Provider) AS p,
                                count(DISTINCT date_trunc('day', ChargePeriodStart)) AS n
                         FROM costs WHERE {window.where()} AND ChargeCategory = 'Usage'
                           AND ResourceId IN (SELECT ResourceId FROM billed) GROUP BY 1) m
        JOIN (VALUES {provider_days or "(NULL, 0)"}) d(p, dd) ON m.p IS NOT DISTINCT FROM d.p
        WHERE {asked}"""
    examined = store.value(f"SELECT count(*) FROM ({_gpu_machine_rids(window)})")
    return Narrowed(_billed_gpu_machines(store, window, policy, keep, data), int(examined or 0))


def _gpu_machine_rids(window: Window) -> str:
    """SQL of the GPU machines the bill shows, by their ids in lower case (`rid`)."""
    return f"""
        SELECT DISTINCT lower(ResourceId) AS rid FROM costs
        WHERE {window.where()} AND ResourceId IS NOT NULL AND ChargeCategory = 'Usage'
          AND x_CostCategory = 'gpu_compute'
          AND (x_SplitParentId IS NULL OR lower(x_SplitParentId) = lower(ResourceId))
          AND lower(ResourceId) IS DISTINCT FROM lower(CapacityReservationId)
          AND lower(ResourceId) IS DISTINCT FROM lower(CommitmentDiscountId)"""


def _data_days(store: Store, window: Window) -> dict[str, tuple[int, int]]:
    """Per provider, the days of the window it billed anything on, and how many of those were weekend days."""
    return {p: (n, we) for p, n, we in store.con.execute(f"""
        SELECT x_Provider, count(DISTINCT date_trunc('day', ChargePeriodStart)),
               count(DISTINCT date_trunc('day', ChargePeriodStart))
                   FILTER (WHERE dayofweek(ChargePeriodStart) IN (0, 6))
        FROM costs WHERE {window.where()} GROUP BY 1""").fetchall()}


def _billed_gpu_machines(store: Store, window: Window, policy: Policy, keep: str | None = None,
                         data: dict[str, tuple[int, int]] | None = None) -> list[BilledGpuMachine]:
    """billed_gpu_machines; `keep`: only the machines of the lower-case ids (`rid`) this SQL selects (it may read
    `billed`, every machine's ids as billed); `data`: _data_days, where the caller has it."""
    w = window.where()
    store.tag_set_ids()
    # the machines' lines by their ids as billed (each id's lower case compared once, not each line's)
    used = f"{w} AND ChargeCategory = 'Usage' AND ResourceId IN (SELECT ResourceId FROM ids)"
    kept = "" if keep is None else f" WHERE lower(ResourceId) IN ({keep})"
    rows = store.con.execute(f"""
        WITH g AS ({_gpu_machine_rids(window)}),
             billed AS (SELECT ResourceId FROM (SELECT DISTINCT ResourceId FROM costs
                                                WHERE {w} AND ResourceId IS NOT NULL AND ChargeCategory = 'Usage')
                        WHERE lower(ResourceId) IN (SELECT rid FROM g)),
             ids AS (SELECT ResourceId FROM billed{kept}),
             l AS (SELECT lower(ResourceId) AS rid, date_trunc('day', ChargePeriodStart) AS day, * FROM costs
                   WHERE {used}),
             lt AS ({latest_tag_sets("lower(ResourceId)", used)}),
             main AS (SELECT rid, first(cur ORDER BY cost DESC, cur) AS cur FROM (
                          SELECT rid, BillingCurrency AS cur, sum(BilledCost) AS cost FROM l GROUP BY ALL)
                      GROUP BY 1),
             ut AS (SELECT rid, day, sum(ConsumedQuantity) FILTER (WHERE {HOURS}) AS h, min(ChargePeriodStart) AS s,
                           max(ChargePeriodEnd) AS e FROM l GROUP BY rid, day, x_UsageType),
             d AS (SELECT rid, day, least(24, COALESCE(max(h), 24), date_diff('second', min(s), max(e)) / 3600) AS hours
                   FROM ut GROUP BY 1, 2),
             dc AS (SELECT rid, day, sum(BilledCost) AS cost FROM l JOIN main USING (rid)
                    WHERE l.BillingCurrency = main.cur GROUP BY 1, 2),
             days AS (SELECT rid, CAST(sum(d.hours) AS DECIMAL(38, 6)) AS hours, count(*) AS n,
                             count(*) FILTER (WHERE dayofweek(day) IN (0, 6)) AS weekend,
                             count(*) FILTER (WHERE d.hours >= 23) AS full_days,
                             min(dc.cost) FILTER (WHERE d.hours >= 23) AS full_min,
                             max(dc.cost) FILTER (WHERE d.hours >= 23) AS full_max
                      FROM d LEFT JOIN dc USING (rid, day) GROUP BY 1),
             info AS (SELECT rid, min(ResourceId) AS id, min(x_Provider) AS provider,
                             min(COALESCE(SubAccountId, BillingAccountId)) AS account, min(RegionId) AS region,
                             max(x_InstanceType) AS itype, max(x_GpuModel) AS gpu,
                             max(x_GpuCount) FILTER (WHERE x_CostCategory = 'gpu_compute') AS gpus,
                             any_value(lt.tag_set) AS tags, min(ChargePeriodStart) AS first,
                             max(ChargePeriodEnd) AS last FROM l JOIN lt ON lt.k = l.rid GROUP BY 1),
             cost AS (SELECT rid, list({{'cur': BillingCurrency, 'cost': cost}} ORDER BY BillingCurrency) AS costs
                      FROM (SELECT rid, BillingCurrency, sum(BilledCost) AS cost FROM l GROUP BY ALL) GROUP BY 1),
             kv AS (SELECT rid, e.key AS k, list(DISTINCT e.value ORDER BY e.value)[1:5] AS vals
                    FROM (SELECT rid, unnest(entries) AS e
                          FROM (SELECT DISTINCT rid, x_TagSet AS tag_set FROM l)
                          JOIN (SELECT tag_set, any_value(entries) AS entries  -- the machines' sets alone
                                FROM tag_sets SEMI JOIN (SELECT DISTINCT x_TagSet AS tag_set FROM l) USING (tag_set)
                                GROUP BY 1) USING (tag_set))
                    GROUP BY ALL),
             tags_seen AS (SELECT rid, map_from_entries(list({{'key': k, 'value': vals}} ORDER BY k)) AS seen
                           FROM kv GROUP BY 1),
             pods AS (SELECT lower(x_SplitParentId) AS parent, list(DISTINCT x_SplitResourceId
                                                                   ORDER BY x_SplitResourceId) AS pods
                      FROM costs WHERE {w} AND x_SplitParentId IS NOT NULL AND x_SplitResourceId IS NOT NULL
                      GROUP BY 1),
             -- a machine's pods: split lines naming it as their parent by its id or its ARN's last segment (two
             -- joins on equality; one on either compared every machine with every parent)
             pods_of AS (SELECT rid, flatten(list(pods ORDER BY parent)) AS pods FROM (
                             SELECT i.rid, p.parent, p.pods FROM info i JOIN pods p ON p.parent = i.rid
                             UNION SELECT i.rid, p.parent, p.pods FROM info i
                                   JOIN pods p ON p.parent = {last_segment("i.rid")})
                         GROUP BY 1),
             j AS (SELECT provider, account, region, lower(regexp_replace(instance_type, '^ml\\.', '')) AS itype,
                          count(*) AS n FROM jobs
                   WHERE (start_time IS NULL OR start_time < TIMESTAMP {lit(window.end.isoformat(' '))})
                     AND (end_time IS NULL OR end_time >= TIMESTAMP {lit(window.start.isoformat(' '))})
                   GROUP BY ALL)
        SELECT i.id, i.provider, i.account, i.region, i.itype, i.gpu, i.gpus, main.cur, cost.costs, days.hours,
               days.n, days.weekend, days.full_days, days.full_min, days.full_max, i.first, i.last, i.tags,
               tags_seen.seen,
               (SELECT COALESCE(sum(j.n), 0) FROM j WHERE j.provider = i.provider
                    AND j.account IS NOT DISTINCT FROM i.account AND j.region IS NOT DISTINCT FROM i.region
                    AND j.itype = lower(regexp_replace(i.itype, '^ml\\.', ''))),
               pods_of.pods
        FROM info i JOIN main USING (rid) JOIN days USING (rid) JOIN cost USING (rid)
             LEFT JOIN tags_seen USING (rid) LEFT JOIN pods_of USING (rid)
        ORDER BY i.id""").fetchall()
    if not rows:
        return []
    sets = store.tags(row[17] for row in rows)
    data = data if data is not None else _data_days(store, window)
    # The inventory, where one was read: machines by id (and by an ARN's or path's last segment), and the
    # provider, account and region pairs it covers.
    assets = build(store, window, policy, GpuAsset)
    loaded = bool(store.value("SELECT count(*) FROM assets"))
    by_id = {a.id.lower(): a for a in assets}
    scopes = {(p, acct, reg) for p, acct, reg in store.con.execute(
        "SELECT DISTINCT provider, account, region FROM assets").fetchall()}
    jobs_read = _jobs_read(store)
    out = []
    for (rid, provider, account, region, itype, gpu, count, cur, costs, hours, n, weekend, full_days, full_min,
         full_max, first, last, tags, seen, jobs_seen, pods) in rows:
        asset = by_id.get(rid.lower()) or by_id.get(re.split(r"[/:]", rid.lower())[-1])
        days, weekend_days = data.get(provider, (0, 0))
        out.append(BilledGpuMachine(
            rid, provider, account, region, itype, gpu, gpus(count), cur, {c["cur"]: c["cost"] for c in costs}, hours,
            n, days, weekend, weekend_days, full_days, full_min, full_max, first, last, sets[tags],
            {k: list(v) for k, v in (seen or {}).items()}, int(jobs_seen), list(dict.fromkeys(pods or [])),
            loaded, asset is not None,
            asset is not None or (provider, account, region) in scopes,
            asset.usage_hours if asset else None, asset.mean_util_pct if asset else None,
            asset.tags if asset else {}, asset.kind if asset else None, jobs_read))
    return out

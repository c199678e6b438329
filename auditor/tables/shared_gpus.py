"""The cost model of Kubernetes GPUs, whole or shared (MIG, time-slicing, MPS).

A node's cost in the window is what billing charged its instance, else its catalog price for the hours it ran
in the window. A pod's GPU units cost their share of it (`unit_shares`: a MIG slice what its profile blocks of
a GPU, auditor/providers/mig.py; a time-sliced or MPS replica 1/replicas of a GPU or of a slice) for the hours
it held them, over the node's GPU-hours (physical GPUs x hours). What no pod held is paid and
unallocated; per namespace it is shared out by each namespace's GPU-hours on that node (Kubecost's "share
idle" by node), so a namespace's cost includes its share of the idle GPUs it runs beside.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from auditor.model import GpuAsset, GpuSlice, NodeGpuAllocation, money
from auditor.providers import mig
from auditor.sql import lit
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.tables.store import Store

UNALLOCATED = "(unallocated)"


def _hours(start: datetime, end: datetime) -> Decimal:
    return max(Decimal(0), Decimal(str((end - start).total_seconds())) / 3600)


def _scale(amounts: dict[str, Decimal], num: Decimal, den: Decimal) -> dict[str, Decimal]:
    return {c: a * num / den for c, a in amounts.items()} if den else {}


def unit_shares(gpu_model: str | None, gpu_count: int, units: list[dict]) -> dict[str, Fraction]:
    """A physical GPU's worth of one unit of each of a node's resources (`units`: its gpu_units rows): a whole
    GPU 1, a time-sliced or MPS replica 1/replicas, a HAMi slot 1 (its pod's own cores and memory share, the
    allocation's `share`, is used where set), a MIG slice what its profile blocks, counted over the node's
    MIG GPUs (those not offered whole) so that GPUs cut as far as they go are held in full, then 1/replicas
    of that where the slices are time-sliced too."""
    whole = sum((Fraction(u["count"], u.get("replicas") or 1) for u in units if u["sharing"] not in ("mig", "hami")),
                Fraction(0))
    slices: dict[str, int] = {}
    for u in units:
        if u["sharing"] == "mig":
            slices[u["profile"]] = slices.get(u["profile"], 0) + u["count"] // (u.get("replicas") or 1)
    mig_gpus = gpu_count - math.ceil(whole)
    share = mig.slice_shares(gpu_model, slices, mig_gpus) if slices else {}
    out = {}
    for u in units:
        if u["sharing"] == "mig":
            out[u["resource"]] = share[u["profile"]] / (u.get("replicas") or 1)
        elif u["sharing"] == "hami":  # a slot whose pod sets no cores or memory has the whole GPU's memory
            out[u["resource"]] = Fraction(1)
        else:
            out[u["resource"]] = Fraction(u["slices"], u["slices_per_gpu"])
    return out


def build(store: Store, window: Window, assets: list[GpuAsset],
          now: datetime | None = None) -> tuple[list[NodeGpuAllocation], list[GpuSlice]]:
    """The GPU nodes that offer Kubernetes GPU units, and the pods' slices of them, in the window."""
    units = store.con.execute("SELECT asset_id, resource, sharing, profile, count, slices, slices_per_gpu, "
                              "memory_gb, coalesce(replicas, 1) FROM gpu_units ORDER BY ALL").fetchall()
    if not units:
        return [], []
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    allocs = store.con.execute(f"""
        SELECT id, asset_id, resource, units, namespace, pod, workload, start_time, end_time, tags, share
        FROM gpu_allocations WHERE (start_time IS NULL OR start_time < TIMESTAMP {we})
          AND (end_time IS NULL OR end_time > TIMESTAMP {ws}) ORDER BY id, resource""").fetchall()
    # a pod's hours, mean and p95 active %, peak memory: the four GpuSlice fields after its hours
    usage = {(r[0], r[1], r[2]): (r[3], r[4], r[5], r[6]) for r in store.con.execute(f"""
        WITH u AS (SELECT *, greatest(epoch(least(window_end, TIMESTAMP {we}))
                                      - epoch(greatest(window_start, TIMESTAMP {ws})), 0) / 3600.0 AS h
                   FROM slice_usage WHERE pod IS NOT NULL AND window_start < TIMESTAMP {we}
                     AND window_end > TIMESTAMP {ws})
        SELECT asset_id, namespace, pod, sum(h), sum(mean_active_pct * h) / nullif(sum(h), 0),
               max(p95_active_pct), max(peak_mem_gb)
        FROM u GROUP BY ALL""").fetchall()}
    end = min(window.end, now or datetime.now(UTC).replace(tzinfo=None))
    by_node: dict[str, list] = {}
    for u in units:
        by_node.setdefault(u[0], []).append(u)
    nodes, slices = [], []
    for asset in assets:
        offered = by_node.get(asset.id)
        if not offered or not asset.gpu_count:
            continue
        start = max(window.start, asset.launch_time or window.start)
        node_hours = _hours(start, end)
        cost, basis = _node_cost(store, asset, node_hours)
        capacity = Decimal(asset.gpu_count) * node_hours
        unit_of = {u[1]: u for u in offered}
        share_of = unit_shares(asset.gpu_model, asset.gpu_count, [
            {"resource": u[1], "sharing": u[2], "profile": u[3], "count": u[4], "slices": u[5],
             "slices_per_gpu": u[6], "replicas": u[8]} for u in offered])
        node = NodeGpuAllocation(
            asset.id, asset.provider, asset.account, asset.region, asset.name, asset.instance_type,
            asset.gpu_model, asset.gpu_count, sorted({u[2] for u in offered}), float(node_hours),
            cost=cost, cost_basis=basis, tags=asset.tags,
            free_now={u[1]: int(u[4]) for u in offered})
        held = Decimal(0)
        mine = [a for a in allocs if a[1] == asset.id]
        resources_of: dict[str, int] = {}
        for a in mine:
            resources_of[a[0]] = resources_of.get(a[0], 0) + 1
        for aid, _, resource, n, namespace, pod, workload, a_start, a_end, tags, own in mine:
            unit = unit_of.get(resource)
            sharing, profile, slices_n, per_gpu, mem = (unit[2], unit[3], unit[5], unit[6], unit[7]) if unit else \
                ("none", None, 1, 1, None)
            hours = _hours(max(start, a_start or start), min(end, a_end or end))
            # a HAMi or Run:ai pod's own share of each GPU, else the unit's
            share = Fraction(str(own)) if own is not None else share_of.get(resource, Fraction(1))
            gpu_hours = Decimal(n * share.numerator) / Decimal(share.denominator) * hours
            held += gpu_hours
            if a_end is None and resource in node.free_now:
                node.free_now[resource] = max(0, node.free_now[resource] - n)
            used = usage.get((asset.id, namespace, pod), (None, None, None, None))
            slices.append(GpuSlice(
                aid if resources_of[aid] == 1 else f"{aid}:{resource}", asset.provider, asset.account,
                asset.region, asset.id, asset.name, namespace, pod, workload, resource, sharing, profile, n,
                slices_n, per_gpu, mem, asset.gpu_model, asset.instance_type, float(hours),
                *used,
                cost=_scale(cost, gpu_hours, capacity), cost_basis=basis, tags=dict(tags or {}), share=share))
        node.pods = len({a[0] for a in mine})
        node.allocated_gpu_hours = float(min(held, capacity))
        node.unallocated_cost = _scale(cost, max(Decimal(0), capacity - held), capacity)
        node.free_now = {k: v for k, v in node.free_now.items() if v}
        nodes.append(node)
    return nodes, slices


def _node_cost(store: Store, asset: GpuAsset, hours: Decimal) -> tuple[dict[str, Decimal], str]:
    if asset.cost:
        return dict(asset.cost), "the node's billed cost in the window"
    t = store.catalog.instance(asset.provider, asset.instance_type)
    if t and t.price_per_hour is not None:
        return {"USD": t.price_per_hour * hours}, f"catalog on-demand price of {t.name} x {hours:.1f} h"
    return {}, "no price known for the node"


def namespace_costs(nodes: list[NodeGpuAllocation], slices: list[GpuSlice],
                    team_of: Callable[[dict[str, str]], str | None]) -> list[dict]:
    """GPU cost per namespace and team: what its pods held, and its share of each node's unallocated GPUs
    (by its GPU-hours there); a node no pod used leaves its cost to `(unallocated)`."""
    rows: dict[tuple, dict] = {}

    def row(namespace: str, team: str | None, currency: str) -> dict:
        return rows.setdefault((namespace, team or "", currency), {
            "namespace": namespace, "team": team, "currency": currency, "gpu_hours": Decimal(0),
            "allocated": Decimal(0), "idle_share": Decimal(0)})

    for node in nodes:
        mine = [s for s in slices if s.node == node.id]
        weights: dict[tuple[str, str | None], Decimal] = {}
        for s in mine:
            key = (s.namespace or "default", team_of(s.tags))
            gh = s.gpu_share * Decimal(str(s.hours or 0))
            weights[key] = weights.get(key, Decimal(0)) + gh
            for cur, amount in s.cost.items():
                r = row(*key, cur)
                r["allocated"] += amount
                r["gpu_hours"] += gh
        total = sum(weights.values(), Decimal(0))
        for cur, idle in node.unallocated_cost.items():
            if not total:
                row(UNALLOCATED, None, cur)["idle_share"] += idle
                continue
            for key, w in weights.items():
                row(*key, cur)["idle_share"] += idle * w / total
    out = []
    for r in rows.values():
        r["total"] = r["allocated"] + r["idle_share"]
        out.append(r)
    return sorted(out, key=lambda r: (r["currency"], -r["total"], r["namespace"]))


def summary(nodes: list[NodeGpuAllocation], slices: list[GpuSlice],
            team_of: Callable[[dict[str, str]], str | None]) -> dict | None:
    """The audit summary's `kubernetes_gpus`: per node its GPU-hours, what pods held and the unallocated cost;
    per namespace and team its GPU cost with its share of idle GPUs. None without Kubernetes GPU nodes."""
    if not nodes:
        return None
    return {
        "nodes": [{"id": n.id, "name": n.name, "gpu_model": n.gpu_model, "gpu_count": n.gpu_count,
                   "sharing": n.sharing, "gpu_hours": round(n.gpu_hours, 2),
                   "allocated_gpu_hours": round(n.allocated_gpu_hours, 2),
                   "cost": {c: money(a) for c, a in n.cost.items()},
                   "unallocated_cost": {c: money(a) for c, a in n.unallocated_cost.items()},
                   "cost_basis": n.cost_basis, "free_now": n.free_now} for n in nodes],
        "namespaces": [{**r, "gpu_hours": round(r["gpu_hours"], 2), "allocated": money(r["allocated"]),
                        "idle_share": money(r["idle_share"]), "total": money(r["total"])}
                       for r in namespace_costs(nodes, slices, team_of)],
    }

"""The cost model of Kubernetes GPUs (auditor/tables/shared_gpus.py), without Prometheus: a node's cost shared by
the GPU-hours its pods held, the rest unallocated and shared out per namespace. Every figure below is worked out
by hand from the module's docs."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal as D
from fractions import Fraction

import pytest

from auditor.model import GpuAsset, GpuSlice, NodeGpuAllocation
from auditor.tables.shared_gpus import UNALLOCATED, build, namespace_costs, summary, unit_shares
from auditor.tables.store import Store
from auditor.window import Window

DAY = Window(datetime(2026, 7, 1), datetime(2026, 7, 2), "2026-07-01")
LATER = datetime(2026, 8, 1)


def _unit(resource, sharing="none", count=1, slices=1, per_gpu=1, profile=None, replicas=1):
    return {"resource": resource, "sharing": sharing, "profile": profile, "count": count, "slices": slices,
            "slices_per_gpu": per_gpu, "replicas": replicas}


# ---- a unit's share of a physical GPU ------------------------------------------------------------------------

@pytest.mark.parametrize("units, expected", [
    ([_unit("nvidia.com/gpu", count=8)], {"nvidia.com/gpu": Fraction(1)}),
    # time-slicing 4 ways: a replica is a quarter of a GPU
    ([_unit("nvidia.com/gpu", "time-slicing", count=8, per_gpu=4, replicas=4)], {"nvidia.com/gpu": Fraction(1, 4)}),
    # a HAMi slot is a whole GPU's memory unless its pod says less
    ([_unit("nvidia.com/gpu", "hami", count=20)], {"nvidia.com/gpu": Fraction(1)}),
    # MIG: what the profile blocks (a 3g.40gb half an A100 80GB), then 1/replicas of that when time-sliced too
    ([_unit("nvidia.com/mig-3g.40gb", "mig", count=4, slices=3, per_gpu=7, profile="3g.40gb")],
     {"nvidia.com/mig-3g.40gb": Fraction(1, 2)}),
    ([_unit("nvidia.com/mig-3g.40gb", "mig", count=8, slices=3, per_gpu=7, profile="3g.40gb", replicas=2)],
     {"nvidia.com/mig-3g.40gb": Fraction(1, 4)}),
])
def test_a_units_share_of_a_physical_gpu(units, expected):
    assert unit_shares("A100-80GB", 2, units) == expected


def test_mig_slices_are_counted_over_the_gpus_not_offered_whole():
    """2 GPUs: one offered whole, the other cut into seven 1g.10gb: each slice a seventh of the one MIG GPU. Were
    the whole GPU counted as a MIG GPU, seven slices over two GPUs would be scaled to fill neither."""
    units = [_unit("nvidia.com/gpu", count=1), _unit("nvidia.com/mig-1g.10gb", "mig", count=7, slices=1, per_gpu=7,
                                                     profile="1g.10gb")]
    assert unit_shares("A100-80GB", 2, units) == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": Fraction(1, 7)}
    # a time-sliced whole GPU (3 replicas of 2 ways: 1.5 GPUs) takes 2 GPUs from MIG: 1 is left for the slices
    units = [_unit("nvidia.com/gpu", "time-slicing", count=3, per_gpu=2, replicas=2),
             _unit("nvidia.com/mig-1g.10gb", "mig", count=7, slices=1, per_gpu=7, profile="1g.10gb")]
    assert unit_shares("A100-80GB", 3, units)["nvidia.com/mig-1g.10gb"] == Fraction(1, 7)
    # MIG slices time-sliced twice: 14 replicas are 7 slices of the one MIG GPU
    units = [_unit("nvidia.com/mig-1g.10gb", "mig", count=14, slices=1, per_gpu=7, profile="1g.10gb", replicas=2)]
    assert unit_shares("A100-80GB", 1, units) == {"nvidia.com/mig-1g.10gb": Fraction(1, 14)}


# ---- a cluster in the store: nodes, pods, usage --------------------------------------------------------------

def _store() -> tuple[Store, list[GpuAsset]]:
    """Node i-mig: 8 A100 80GB, each cut into two 3g.40gb (16 slices of half a GPU), billed $960.00 for the day
    (192 GPU-hours: $5.00 each). Pod ml/p1 (team vision) holds 2 slices for its first 12 h; pod web/p2 holds 4
    all day and still runs; pod old/p0 ended before the day. Node i-ts: one g5.xlarge, launched at noon, not
    billed (its catalog price, 1.006/h x 12 h = $12.072), time-sliced 4 ways, no pod. Node i-whole: 2 whole
    GPUs billed 48 EUR (1 EUR a GPU-hour), pod ml/p3 holds one all day, pod ml/p4 (a HAMi share of 0.3) one GPU's
    0.3 and another resource's unit (two rows of one allocation). i-none offers no units; i-zero has none of
    its GPUs known."""
    store = Store()
    con = store.con
    for row in [("i-mig", "nvidia.com/mig-3g.40gb", "mig", "3g.40gb", 16, 3, 7, 40.0, 1),
                ("i-ts", "nvidia.com/gpu", "time-slicing", None, 4, 1, 4, None, 4),
                ("i-whole", "nvidia.com/gpu", "none", None, 2, 1, 1, None, 1),
                ("i-whole", "example.com/fpga", "none", None, 1, 1, 1, None, 1),
                ("i-zero", "nvidia.com/gpu", "none", None, 1, 1, 1, None, 1)]:
        con.execute("INSERT INTO gpu_units VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    t = datetime
    for row in [("p1", "i-mig", "nvidia.com/mig-3g.40gb", 2, "ml", "p1", "ml/train", t(2026, 6, 30), t(2026, 7, 1, 12),
                 {"team": "vision"}, None),
                ("p2", "i-mig", "nvidia.com/mig-3g.40gb", 4, "web", "p2", None, t(2026, 7, 1), None, {}, None),
                ("p0", "i-mig", "nvidia.com/mig-3g.40gb", 8, "old", "p0", None, t(2026, 6, 1), t(2026, 7, 1), {}, None),
                ("p3", "i-whole", "nvidia.com/gpu", 1, "ml", "p3", None, None, None, {}, None),
                ("p4", "i-whole", "nvidia.com/gpu", 1, "ml", "p4", None, t(2026, 7, 1), t(2026, 7, 3), {}, 0.3),
                ("p4", "i-whole", "example.com/fpga", 1, "ml", "p4", None, t(2026, 7, 1), t(2026, 7, 3), {}, None)]:
        con.execute("INSERT INTO gpu_allocations VALUES (?, ?, ?, ?, ?, ?, ?, 'Running', ?, ?, ?, ?)", row)
    # p2's activity: half of a sample before the window (20% over 12 h in it), then 50% for 12 h; p1's none
    for row in [("i-mig", "web", "p2", t(2026, 6, 30, 12), t(2026, 7, 1, 12), 20.0, 60.0, 10.0),
                ("i-mig", "web", "p2", t(2026, 7, 1, 12), t(2026, 7, 2), 50.0, 80.0, 30.0),
                ("i-mig", "web", "p2", t(2026, 7, 2), t(2026, 7, 3), 99.0, 99.0, 39.0),  # after the window
                ("i-mig", None, None, t(2026, 7, 1), t(2026, 7, 2), 99.0, 99.0, 39.0)]:  # no pod's
        con.execute("INSERT INTO slice_usage (asset_id, namespace, pod, window_start, window_end, mean_active_pct, "
                    "p95_active_pct, peak_mem_gb) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    assets = [GpuAsset("i-mig", "aws", account="111", region="us-east-1", name="mig-node",
                       instance_type="p4de.24xlarge", gpu_model="A100-80GB", gpu_count=8,
                       launch_time=t(2026, 6, 1), cost={"USD": D("960.00")}),
              GpuAsset("i-ts", "aws", instance_type="g5.xlarge", gpu_model="A10G", gpu_count=1,
                       launch_time=t(2026, 7, 1, 12)),
              GpuAsset("i-whole", "gcp", gpu_model="L4", gpu_count=2, cost={"EUR": D("48")}),
              GpuAsset("i-none", "aws", gpu_count=8, cost={"USD": D("100")}),
              GpuAsset("i-zero", "aws", gpu_count=None, cost={"USD": D("100")})]
    return store, assets


def _team(tags):
    return tags.get("team")


def test_a_nodes_cost_is_shared_by_the_gpu_hours_its_pods_held():
    store, assets = _store()
    nodes, slices = build(store, DAY, assets, now=LATER)
    assert [n.id for n in nodes] == ["i-mig", "i-ts", "i-whole"]
    mig_node, ts, whole = nodes
    # i-mig: p1 2 x 1/2 x 12 h = 12 GPU-hours ($60), p2 4 x 1/2 x 24 h = 48 ($240); 132 of 192 held by none
    assert (mig_node.gpu_hours, mig_node.allocated_gpu_hours, mig_node.pods) == (192, 60, 2)
    assert mig_node.cost == {"USD": D("960.00")} and mig_node.cost_basis == "the node's billed cost in the window"
    assert mig_node.unallocated_cost == {"USD": D("660")}
    assert mig_node.sharing == ["mig"] and (mig_node.name, mig_node.account, mig_node.region) == (
        "mig-node", "111", "us-east-1")
    assert mig_node.free_now == {"nvidia.com/mig-3g.40gb": 12}  # p2 still holds 4 of 16; p1 has ended
    by_id = {s.id: s for s in slices}
    assert sorted(by_id) == ["p1", "p2", "p3", "p4:example.com/fpga", "p4:nvidia.com/gpu"]
    p1, p2 = by_id["p1"], by_id["p2"]
    assert (p1.hours, p1.cost, p1.share, p1.units, p1.namespace, p1.workload) == (
        12, {"USD": D("60")}, Fraction(1, 2), 2, "ml", "ml/train")
    assert (p1.sharing, p1.profile, p1.slices, p1.slices_per_gpu, p1.memory_gb) == ("mig", "3g.40gb", 3, 7, 40.0)
    assert (p1.usage_hours, p1.mean_active_pct, p1.p95_active_pct, p1.peak_mem_gb) == (None, None, None, None)
    assert (p1.tags, p1.node, p1.node_name, p1.gpu_model, p1.instance_type) == (
        {"team": "vision"}, "i-mig", "mig-node", "A100-80GB", "p4de.24xlarge")
    assert (p2.hours, p2.cost) == (24, {"USD": D("240")})
    # p2's activity in the window: 12 h at 20% and 12 h at 50%
    assert (p2.usage_hours, p2.mean_active_pct, p2.p95_active_pct, p2.peak_mem_gb) == (24, 35, 80, 30)
    # i-ts: not billed, its catalog price for the 12 h it ran; no pod, so all of it unallocated
    assert (ts.node_hours, ts.gpu_hours, ts.allocated_gpu_hours, ts.pods) == (12, 12, 0, 0)
    assert ts.cost == {"USD": D("12.072")} and ts.unallocated_cost == {"USD": D("12.072")}
    assert ts.cost_basis == "catalog on-demand price of g5.xlarge x 12.0 h"
    assert ts.free_now == {"nvidia.com/gpu": 4}
    # i-whole: p3 a whole GPU all day (24 EUR), p4 0.3 of one (7.20 EUR) and a unit of the other resource (24)
    assert whole.cost_basis == "the node's billed cost in the window"
    assert (by_id["p3"].cost, by_id["p4:nvidia.com/gpu"].cost) == ({"EUR": D("24")}, {"EUR": D("7.2")})
    assert by_id["p4:nvidia.com/gpu"].share == Fraction(3, 10)
    assert by_id["p4:example.com/fpga"].cost == {"EUR": D("24")}
    assert (whole.allocated_gpu_hours, whole.unallocated_cost) == (48, {"EUR": D("0")})  # 55.2 held, capped at 48
    assert whole.free_now == {"nvidia.com/gpu": 1, "example.com/fpga": 1}  # p4 ends after the window, p3 runs on


def test_a_node_without_a_price_costs_nothing():
    store, _ = _store()
    nodes, _ = build(store, DAY, [GpuAsset("i-ts", "aws", instance_type="x9.unknown", gpu_count=1)], now=LATER)
    assert (nodes[0].cost, nodes[0].cost_basis) == ({}, "no price known for the node")


def test_hours_end_now_within_the_window_and_never_run_negative():
    store, assets = _store()
    nodes, slices = build(store, DAY, assets, now=datetime(2026, 7, 1, 6))
    assert [(n.id, n.node_hours) for n in nodes] == [("i-mig", 6), ("i-ts", 0), ("i-whole", 6)]
    assert {s.id: s.hours for s in slices}["p1"] == 6


def test_no_units_no_nodes():
    assert build(Store(), DAY, [GpuAsset("i-1", "aws", gpu_count=8)], now=LATER) == ([], [])


def test_namespaces_share_each_nodes_unallocated_cost_by_their_gpu_hours():
    store, assets = _store()
    nodes, slices = build(store, DAY, assets, now=LATER)
    got = {(r["namespace"], r["team"], r["currency"]): (r["gpu_hours"], r["allocated"], r["idle_share"], r["total"])
           for r in namespace_costs(nodes, slices, _team)}
    # i-mig's $660 unallocated: ml (vision) held 12 of the 60 GPU-hours held, web 48
    assert got[("ml", "vision", "USD")] == (12, 60, 132, 192)
    assert got[("web", None, "USD")] == (48, 240, 528, 768)
    assert got[(UNALLOCATED, None, "USD")] == (0, 0, D("12.072"), D("12.072"))  # i-ts: no pod used it
    # i-whole: ml's pods without a team: 24 + 7.2 + 24 GPU-hours (the FPGA's unit counted as one)
    assert got[("ml", None, "EUR")] == (D("55.2"), D("55.2"), 0, D("55.2"))
    assert len(got) == 4
    rows = namespace_costs(nodes, slices, _team)
    assert [(r["currency"], r["namespace"]) for r in rows] == [
        ("EUR", "ml"), ("USD", "web"), ("USD", "ml"), ("USD", UNALLOCATED)]  # per currency, the largest first
    total = sum(r["total"] for r in rows if r["currency"] == "USD")
    assert total == D("960") + D("12.072")  # every dollar of every node


def test_a_pod_without_a_namespace_is_defaults_and_ties_sort_by_name():
    node = NodeGpuAllocation("n", gpu_count=1, node_hours=10, unallocated_cost={"USD": D("10")})
    slices = [GpuSlice("b/1", node="n", namespace="b", hours=5, cost={"USD": D("5")}),
              GpuSlice("x/1", node="n", namespace=None, hours=5, cost={"USD": D("5")}),
              GpuSlice("z/1", node="other", namespace="z", hours=5, cost={"USD": D("5")})]
    rows = namespace_costs([node], slices, _team)
    assert [(r["namespace"], r["total"]) for r in rows] == [("b", 10), ("default", 10)]


def test_a_node_whose_pods_held_no_hours_leaves_its_idle_cost_unallocated():
    node = NodeGpuAllocation("n", gpu_count=1, node_hours=10, unallocated_cost={"USD": D("10")})
    rows = namespace_costs([node], [GpuSlice("a/1", node="n", namespace="a", hours=0)], _team)
    assert [(r["namespace"], r["idle_share"]) for r in rows] == [(UNALLOCATED, 10)]


def test_the_summary_rounds_hours_and_money_as_shown():
    assert summary([], [], _team) is None
    store, assets = _store()
    nodes, slices = build(store, DAY, assets, now=LATER)
    nodes[0].node_hours = 24.0004  # 192.0032 GPU-hours: 192.0 to the hundredth
    nodes[0].allocated_gpu_hours = 60.004
    doc = summary(nodes, slices, _team)
    first = doc["nodes"][0]
    assert first == {"id": "i-mig", "name": "mig-node", "gpu_model": "A100-80GB", "gpu_count": 8,
                     "sharing": ["mig"], "gpu_hours": 192.0, "allocated_gpu_hours": 60.0,
                     "cost": {"USD": D("960.00")}, "unallocated_cost": {"USD": D("660.00")},
                     "cost_basis": "the node's billed cost in the window",
                     "free_now": {"nvidia.com/mig-3g.40gb": 12}}
    assert doc["nodes"][1]["cost"] == {"USD": D("12.07")}
    ns = {(r["namespace"], r["currency"]): r for r in doc["namespaces"]}
    assert ns[(UNALLOCATED, "USD")]["total"] == D("12.07") and ns[("ml", "EUR")]["gpu_hours"] == D("55.2")
    assert ns[("ml", "USD")] == {"namespace": "ml", "team": "vision", "currency": "USD", "gpu_hours": 12,
                                 "allocated": D("60.00"), "idle_share": D("132.00"), "total": D("192.00")}

"""The cost model of Kubernetes GPUs (auditor/tables/shared_gpus.py), without Prometheus: a node's cost shared by
the GPU-hours its pods held, the rest unallocated and shared out per namespace. Every figure below is worked out
by hand from the module's docs."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from fractions import Fraction

import pytest

from auditor.model import GpuAsset, GpuSlice, NodeGpuAllocation, money
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
    """Slices are counted over the node's MIG GPUs: its GPUs less those offered whole (whole units over their
    replicas, rounded up). Eight 1g.10gb on the one MIG GPU block more than it (8/7): scaled to fill it, 1/8 each;
    counted over more GPUs they would be 1/7 each and leave some unallocated."""
    def one_g(count, replicas=1, resource="nvidia.com/mig-1g.10gb"):
        return _unit(resource, "mig", count=count, per_gpu=7, profile="1g.10gb", replicas=replicas)
    assert unit_shares("A100-80GB", 2, [_unit("nvidia.com/gpu", count=1), one_g(8)]) == {
        "nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": Fraction(1, 8)}
    # 6 replicas of GPUs time-sliced 2 ways are 3 GPUs: the fourth is the MIG GPU
    shares = unit_shares("A100-80GB", 4, [_unit("nvidia.com/gpu", "time-slicing", count=6, per_gpu=2, replicas=2),
                                          one_g(8)])
    assert shares == {"nvidia.com/gpu": Fraction(1, 2), "nvidia.com/mig-1g.10gb": Fraction(1, 8)}
    # 1.5 GPUs time-sliced are 2 GPUs taken from MIG
    shares = unit_shares("A100-80GB", 3, [_unit("nvidia.com/gpu", "time-slicing", count=3, per_gpu=2, replicas=2),
                                          one_g(8)])
    assert shares["nvidia.com/mig-1g.10gb"] == Fraction(1, 8)
    # MIG slices time-sliced twice: 16 replicas are 8 slices of the one MIG GPU; two resources of one profile
    # (plain and shared) add up
    assert unit_shares("A100-80GB", 1, [one_g(16, replicas=2)]) == {"nvidia.com/mig-1g.10gb": Fraction(1, 16)}
    assert unit_shares("A100-80GB", 1, [one_g(4), one_g(8, 2, "nvidia.com/mig-1g.10gb.shared")]) == {
        "nvidia.com/mig-1g.10gb": Fraction(1, 8), "nvidia.com/mig-1g.10gb.shared": Fraction(1, 16)}


def test_units_without_replicas_are_not_shared():
    units = [_unit("nvidia.com/gpu", count=2), one := _unit("nvidia.com/mig-1g.10gb", "mig", count=8, per_gpu=7,
                                                           profile="1g.10gb")]
    for u in (units[0], one):
        del u["replicas"]
    assert unit_shares("A100-80GB", 3, units) == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": Fraction(1, 8)}


def test_a_slice_is_what_it_blocks_on_the_nodes_own_model():
    # 1g.10gb is two memory slices of an A100 40GB (a quarter) but one of an A100 80GB (a seventh)
    units = [_unit("nvidia.com/mig-1g.10gb", "mig", count=3, per_gpu=7, profile="1g.10gb")]
    assert unit_shares("A100", 1, units) == {"nvidia.com/mig-1g.10gb": Fraction(1, 4)}
    assert unit_shares("A100-80GB", 1, units) == {"nvidia.com/mig-1g.10gb": Fraction(1, 7)}


def test_a_hami_slot_is_a_whole_gpu_not_its_split():
    # HAMi splits each GPU 10 ways (slices_per_gpu 10); a slot's own share is its pod's, else the whole GPU
    assert unit_shares("A100-80GB", 2, [_unit("nvidia.com/gpu", "hami", count=20, per_gpu=10)]) == {
        "nvidia.com/gpu": Fraction(1)}


# ---- a cluster in the store: nodes, pods, usage --------------------------------------------------------------
# Held all day unless said: a day is 24 h; the window 2026-07-01.
#   i-none   offers no GPU units (not a Kubernetes GPU node); i-zero has no GPU count known: neither is a node
#   i-mig    8 A100 80GB, each cut into two 3g.40gb (16 slices of half a GPU), billed $960.00 (192 GPU-hours,
#            $5.00 each). ml/p1 (team vision) holds 2 slices for the first 12 h (12 GPU-hours, $60), web/p2 4
#            slices and still runs (48, $240), old/p0 ended before the day. Unallocated: 132 GPU-hours, $660
#   i-ts     one g5.xlarge, launched at noon, not billed: its catalog price 1.006/h x 12 h = $12.072; time-sliced
#            4 ways; lab/t1 holds 2 replicas (half the GPU) from noon: 6 GPU-hours, $6.036; $6.036 unallocated
#   i-whole  2 whole L4 billed 48 EUR (1 EUR a GPU-hour): ml/p3 holds one and runs on (24 EUR), ml/p4 a HAMi
#            share of 0.3 of the other and runs on (7.20 EUR), and for 6 h a unit of a resource the node does
#            not offer (a whole GPU's worth: 6 EUR). 10.80 EUR unallocated
#   i-over   3 A100 80GB billed $72.00 ($1.00 a GPU-hour): 2 offered whole, 1 cut into 1g.10gb time-sliced 2 ways
#            and offered as 16 replicas (8 slices: more than the 7 it holds, so 1/8 each, 1/16 a replica).
#            ml/o1 (vision) 2 replicas (3 GPU-hours), ml/o2 (speech) a whole GPU for 12 h (12), web/o3 a whole
#            GPU from noon and runs on (12), web/o4 a whole GPU for 9 h (9): 36 held, $36 unallocated
#   i-under  1 A100 40GB billed $24.00 with three 1g.10gb (a quarter each) time-sliced 2 ways (6 replicas, an
#            eighth each): lab/u1 holds two (6 GPU-hours, $6)
#   i-spare  1 GPU billed $10.00 and 5.00 EUR, i-spare2 1 GPU billed $1.00: no pod, all unallocated

def _store() -> tuple[Store, list[GpuAsset]]:
    store = Store()
    con = store.con
    for row in [("i-mig", "nvidia.com/mig-3g.40gb", "mig", "3g.40gb", 16, 3, 7, 40.0, 1),
                ("i-ts", "nvidia.com/gpu", "time-slicing", None, 4, 1, 4, None, 4),
                ("i-whole", "nvidia.com/gpu", "none", None, 2, 1, 1, None, 1),
                ("i-over", "nvidia.com/gpu", "none", None, 2, 1, 1, None, 1),
                ("i-over", "nvidia.com/mig-1g.10gb.shared", "mig", "1g.10gb", 16, 1, 7, 10.0, 2),
                ("i-under", "nvidia.com/mig-1g.10gb", "mig", "1g.10gb", 6, 1, 7, 10.0, 2),
                ("i-spare", "nvidia.com/gpu", "none", None, 1, 1, 1, None, 1),
                ("i-spare2", "nvidia.com/gpu", "none", None, 1, 1, 1, None, 1),
                ("i-zero", "nvidia.com/gpu", "none", None, 1, 1, 1, None, 1)]:
        con.execute("INSERT INTO gpu_units VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    t = datetime
    day, noon = t(2026, 7, 1), t(2026, 7, 1, 12)
    for row in [("p1", "i-mig", "nvidia.com/mig-3g.40gb", 2, "ml", "p1", "ml/train", t(2026, 6, 30), noon,
                 {"team": "vision"}, None),
                ("p2", "i-mig", "nvidia.com/mig-3g.40gb", 4, "web", "p2", None, day, None, {}, None),
                ("p0", "i-mig", "nvidia.com/mig-3g.40gb", 8, "old", "p0", None, t(2026, 6, 1), day, {}, None),
                ("t1", "i-ts", "nvidia.com/gpu", 2, "lab", "t1", None, noon, None, {}, None),
                ("p3", "i-whole", "nvidia.com/gpu", 1, "ml", "p3", None, None, None, {}, None),
                ("p4", "i-whole", "nvidia.com/gpu", 1, "ml", "p4", None, day, None, {}, 0.3),
                ("p4", "i-whole", "example.com/other", 1, "ml", "p4", None, day, t(2026, 7, 1, 6), {}, None),
                ("o1", "i-over", "nvidia.com/mig-1g.10gb.shared", 2, "ml", "o1", None, day, None,
                 {"team": "vision"}, None),
                ("o2", "i-over", "nvidia.com/gpu", 1, "ml", "o2", None, day, noon, {"team": "speech"}, None),
                ("o3", "i-over", "nvidia.com/gpu", 1, "web", "o3", None, noon, None, {}, None),
                ("o4", "i-over", "nvidia.com/gpu", 1, "web", "o4", None, day, t(2026, 7, 1, 9), {}, None),
                ("u1", "i-under", "nvidia.com/mig-1g.10gb", 2, "lab", "u1", None, day, None, {}, None)]:
        con.execute("INSERT INTO gpu_allocations VALUES (?, ?, ?, ?, ?, ?, ?, 'Running', ?, ?, ?, ?)", row)
    # p2's activity: half of a sample before the window (20% over 12 h in it), then 50% for 12 h; p1's none
    for row in [("i-mig", "web", "p2", t(2026, 6, 30, 12), noon, 20.0, 60.0, 10.0),
                ("i-mig", "web", "p2", noon, t(2026, 7, 2), 50.0, 80.0, 30.0),
                ("i-mig", "web", "p2", t(2026, 7, 2), t(2026, 7, 3), 99.0, 99.0, 39.0),  # after the window
                ("i-mig", None, None, day, t(2026, 7, 2), 99.0, 99.0, 39.0)]:  # no pod's
        con.execute("INSERT INTO slice_usage (asset_id, namespace, pod, window_start, window_end, mean_active_pct, "
                    "p95_active_pct, peak_mem_gb) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    assets = [GpuAsset("i-none", "aws", gpu_count=8, cost={"USD": D("100")}),
              GpuAsset("i-mig", "aws", account="111", region="us-east-1", name="mig-node",
                       instance_type="p4de.24xlarge", gpu_model="A100-80GB", gpu_count=8,
                       launch_time=t(2026, 6, 1), cost={"USD": D("960.00")}, tags={"env": "prod"}),
              GpuAsset("i-ts", "aws", instance_type="g5.xlarge", gpu_model="A10G", gpu_count=1, launch_time=noon),
              GpuAsset("i-whole", "gcp", gpu_model="L4", gpu_count=2, cost={"EUR": D("48")}),
              GpuAsset("i-over", "aws", gpu_model="A100-80GB", gpu_count=3, cost={"USD": D("72")}),
              GpuAsset("i-under", "aws", gpu_model="A100", gpu_count=1, cost={"USD": D("24")}),
              GpuAsset("i-spare", "aws", gpu_count=1, cost={"USD": D("10"), "EUR": D("5")}),
              GpuAsset("i-spare2", "aws", gpu_count=1, cost={"USD": D("1")}),
              GpuAsset("i-zero", "aws", gpu_count=None, cost={"USD": D("100")})]
    return store, assets


def _team(tags):
    return tags.get("team")


def test_a_nodes_cost_is_shared_by_the_gpu_hours_its_pods_held():
    store, assets = _store()
    nodes, slices = build(store, DAY, assets, now=LATER)
    by = {n.id: n for n in nodes}
    assert list(by) == ["i-mig", "i-ts", "i-whole", "i-over", "i-under", "i-spare", "i-spare2"]
    mig_node = by["i-mig"]
    assert (mig_node.gpu_hours, mig_node.allocated_gpu_hours, mig_node.pods) == (192, 60, 2)
    assert mig_node.cost == {"USD": D("960.00")} and mig_node.cost_basis == "the node's billed cost in the window"
    assert mig_node.unallocated_cost == {"USD": D("660")}
    assert (mig_node.provider, mig_node.account, mig_node.region, mig_node.name, mig_node.instance_type,
            mig_node.gpu_model, mig_node.sharing, mig_node.tags) == (
        "aws", "111", "us-east-1", "mig-node", "p4de.24xlarge", "A100-80GB", ["mig"], {"env": "prod"})
    assert mig_node.free_now == {"nvidia.com/mig-3g.40gb": 12}  # p2 still holds 4 of 16; p1 has ended
    by_id = {s.id: s for s in slices}
    assert sorted(by_id) == ["o1", "o2", "o3", "o4", "p1", "p2", "p3", "p4:example.com/other",
                             "p4:nvidia.com/gpu", "t1", "u1"]
    p1, p2 = by_id["p1"], by_id["p2"]
    assert (p1.hours, p1.cost, p1.share, p1.units, p1.namespace, p1.pod, p1.workload, p1.resource) == (
        12, {"USD": D("60")}, Fraction(1, 2), 2, "ml", "p1", "ml/train", "nvidia.com/mig-3g.40gb")
    assert (p1.sharing, p1.profile, p1.slices, p1.slices_per_gpu, p1.memory_gb) == ("mig", "3g.40gb", 3, 7, 40.0)
    assert (p1.usage_hours, p1.mean_active_pct, p1.p95_active_pct, p1.peak_mem_gb) == (None, None, None, None)
    assert (p1.provider, p1.account, p1.region, p1.cost_basis) == (
        "aws", "111", "us-east-1", "the node's billed cost in the window")
    assert (p1.tags, p1.node, p1.node_name, p1.gpu_model, p1.instance_type) == (
        {"team": "vision"}, "i-mig", "mig-node", "A100-80GB", "p4de.24xlarge")
    assert (p2.hours, p2.cost) == (24, {"USD": D("240")})
    # p2's activity in the window: 12 h at 20% and 12 h at 50%
    assert (p2.usage_hours, p2.mean_active_pct, p2.p95_active_pct, p2.peak_mem_gb) == (24, 35, 80, 30)
    # i-ts: not billed, its catalog price for the 12 h it ran; t1's half of it
    ts = by["i-ts"]
    assert (ts.node_hours, ts.gpu_hours, ts.allocated_gpu_hours, ts.pods) == (12, 12, 6, 1)
    assert ts.cost == {"USD": D("12.072")} and ts.unallocated_cost == {"USD": D("6.036")}
    assert ts.cost_basis == by_id["t1"].cost_basis == "catalog on-demand price of g5.xlarge x 12.0 h"
    assert (by_id["t1"].share, by_id["t1"].cost, by_id["t1"].slices_per_gpu) == (
        Fraction(1, 4), {"USD": D("6.036")}, 4)
    assert ts.free_now == {"nvidia.com/gpu": 2}
    # i-whole: every unit it offers is held by a pod that runs on: nothing free
    whole = by["i-whole"]
    assert (by_id["p3"].cost, by_id["p4:nvidia.com/gpu"].cost) == ({"EUR": D("24")}, {"EUR": D("7.2")})
    assert by_id["p4:nvidia.com/gpu"].share == Fraction(3, 10)
    other = by_id["p4:example.com/other"]  # a resource the node does not offer: a whole GPU's worth
    assert (other.sharing, other.profile, other.slices, other.slices_per_gpu, other.memory_gb, other.share,
            other.cost) == ("none", None, 1, 1, None, Fraction(1), {"EUR": D("6")})
    assert (whole.allocated_gpu_hours, whole.unallocated_cost, whole.free_now) == (37.2, {"EUR": D("10.8")}, {})
    # i-over: 1/16 of a GPU a replica; whole GPUs 1 each
    over = by["i-over"]
    assert (by_id["o1"].share, by_id["o1"].cost, by_id["o2"].cost, by_id["o4"].cost) == (
        Fraction(1, 16), {"USD": D("3")}, {"USD": D("12")}, {"USD": D("9")})
    assert (over.allocated_gpu_hours, over.unallocated_cost) == (36, {"USD": D("36")})
    assert over.free_now == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb.shared": 14}
    # i-under: an A100 40GB's 1g.10gb is a quarter of it, a replica of it an eighth
    assert (by_id["u1"].share, by_id["u1"].cost) == (Fraction(1, 8), {"USD": D("6")})
    assert by["i-spare"].unallocated_cost == {"USD": D("10"), "EUR": D("5")}


def test_a_node_held_over_its_gpus_has_nothing_unallocated():
    """Two pods each holding the one GPU all day: 48 GPU-hours held of 24. What pods held is capped at the node's
    GPU-hours, and nothing of its cost is unallocated."""
    store = Store()
    store.con.execute("INSERT INTO gpu_units VALUES ('n', 'nvidia.com/gpu', 'none', NULL, 1, 1, 1, NULL, 1)")
    for pod in ("a", "b"):
        store.con.execute(f"INSERT INTO gpu_allocations VALUES ('{pod}', 'n', 'nvidia.com/gpu', 1, 'ml', '{pod}', "
                          "NULL, 'Running', NULL, NULL, NULL, NULL)")
    nodes, slices = build(store, DAY, [GpuAsset("n", "aws", gpu_count=1, cost={"USD": D("24")})], now=LATER)
    assert (nodes[0].allocated_gpu_hours, nodes[0].unallocated_cost) == (24, {"USD": D("0")})
    assert [s.cost for s in slices] == [{"USD": D("24")}, {"USD": D("24")}]


def test_a_node_without_a_price_costs_nothing():
    store, _ = _store()
    nodes, _ = build(store, DAY, [GpuAsset("i-ts", "aws", instance_type="x9.unknown", gpu_count=1)], now=LATER)
    assert (nodes[0].cost, nodes[0].cost_basis) == ({}, "no price known for the node")


def test_hours_end_now_within_the_window_and_never_run_negative():
    store, assets = _store()
    nodes, slices = build(store, DAY, assets, now=datetime(2026, 7, 1, 6))
    assert [(n.id, n.node_hours) for n in nodes][:3] == [("i-mig", 6), ("i-ts", 0), ("i-whole", 6)]
    assert {s.id: s.hours for s in slices}["p1"] == 6


def test_now_is_utc_whatever_the_machines_time_zone(monkeypatch):
    """Without `now`, a window that has not ended ends now in UTC (the times are naive UTC), not the local time."""
    store, assets = _store()
    now = datetime.now(UTC).replace(tzinfo=None)
    window = Window(now - timedelta(hours=24), now + timedelta(hours=24), "today")
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14
    time.tzset()
    try:
        nodes, _ = build(store, window, [GpuAsset("i-spare", "aws", gpu_count=1, cost={"USD": D("1")})])
    finally:
        monkeypatch.undo()
        time.tzset()
    assert nodes[0].node_hours == pytest.approx(24, abs=0.1)


def test_no_units_no_nodes():
    assert build(Store(), DAY, [GpuAsset("i-1", "aws", gpu_count=8)], now=LATER) == ([], [])


def test_namespaces_share_each_nodes_unallocated_cost_by_their_gpu_hours():
    store, assets = _store()
    nodes, slices = build(store, DAY, assets, now=LATER)
    rows = namespace_costs(nodes, slices, _team)
    got = {(r["namespace"], r["team"], r["currency"]): tuple(money(r[k]) for k in (
        "gpu_hours", "allocated", "idle_share", "total")) for r in rows}
    assert got == {
        # i-mig's $660: ml 12 of the 60 GPU-hours held, web 48; i-over's $36: ml/vision 3, ml/speech 12, web 21
        ("ml", "vision", "USD"): (D("15.00"), D("63.00"), D("135.00"), D("198.00")),
        ("ml", "speech", "USD"): (D("12.00"), D("12.00"), D("12.00"), D("24.00")),
        ("web", None, "USD"): (D("69.00"), D("261.00"), D("549.00"), D("810.00")),
        # i-ts: t1 6 GPU-hours, all of its $6.036 idle; i-under: u1 6, all of its $18 idle
        ("lab", None, "USD"): (D("12.00"), D("12.04"), D("24.04"), D("36.07")),
        ("ml", None, "EUR"): (D("37.20"), D("37.20"), D("10.80"), D("48.00")),
        # i-spare and i-spare2: no pod used them
        (UNALLOCATED, None, "USD"): (D("0.00"), D("0.00"), D("11.00"), D("11.00")),
        (UNALLOCATED, None, "EUR"): (D("0.00"), D("0.00"), D("5.00"), D("5.00")),
    }
    assert [(r["currency"], r["namespace"], r["team"]) for r in rows] == [  # per currency, the largest first
        ("EUR", "ml", None), ("EUR", UNALLOCATED, None), ("USD", "web", None), ("USD", "ml", "vision"),
        ("USD", "lab", None), ("USD", "ml", "speech"), ("USD", UNALLOCATED, None)]
    for cur, billed in (("USD", D("960") + D("12.072") + D("72") + D("24") + D("10") + D("1")),
                        ("EUR", D("48") + D("5"))):
        assert sum(r["total"] for r in rows if r["currency"] == cur) == billed  # every dollar of every node


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
    nodes[0].node_hours = 24.0504  # 192.4032 GPU-hours: 192.4 to the hundredth
    nodes[0].allocated_gpu_hours = 60.404
    next(s for s in slices if s.id == "u1").hours = 24.02  # lab: 6 + 2/8 x 24.02 = 12.005 GPU-hours: 12.00
    doc = summary(nodes, slices, _team)
    assert doc["nodes"][0] == {"id": "i-mig", "name": "mig-node", "gpu_model": "A100-80GB", "gpu_count": 8,
                               "sharing": ["mig"], "gpu_hours": 192.4, "allocated_gpu_hours": 60.4,
                               "cost": {"USD": D("960.00")}, "unallocated_cost": {"USD": D("660.00")},
                               "cost_basis": "the node's billed cost in the window",
                               "free_now": {"nvidia.com/mig-3g.40gb": 12}}
    assert doc["nodes"][1]["cost"] == {"USD": D("12.07")}
    ns = {(r["namespace"], r["team"], r["currency"]): r for r in doc["namespaces"]}
    assert ns[("lab", None, "USD")]["total"] == D("36.07") and ns[("ml", None, "EUR")]["gpu_hours"] == D("37.2")
    assert ns[("lab", None, "USD")]["gpu_hours"] == D("12.00")
    assert ns[("ml", "vision", "USD")] == {"namespace": "ml", "team": "vision", "currency": "USD", "gpu_hours": 15,
                                           "allocated": D("63.00"), "idle_share": D("135.00"), "total": D("198.00")}


def test_a_node_of_a_fractional_gpu_counts_its_share_in_gpu_hours():
    """A Kubernetes node on a fractional-GPU type (a g6f.xlarge holds a quarter of an L4: gpu_count Decimal 0.25)
    runs 100 hours: 25 GPU-hours, with 10 allocated 15 unallocated (a Decimal times a float raised TypeError)."""
    node = NodeGpuAllocation("node-g6f", gpu_model="L4", gpu_count=D("0.25"), node_hours=100.0,
                             allocated_gpu_hours=10.0)
    assert node.gpu_hours == 25.0 and node.unallocated_gpu_hours == 15.0

"""MIG slices counted by what they block of their GPU (auditor/providers/mig.py): each product's profile table
against NVIDIA's, a slice's share for every profile of every table, GPUs cut as far as they go held in full
(single and mixed strategies, with and without time-slicing), and the same through a pull from a Kubernetes API
on loopback and an audit.

The shares are stated here from the rule NVIDIA's tables give (a slice blocks max(memory slices / 8, compute
slices / 7) of its GPU; 4 and 4 on an A30), not read back from the code."""

from __future__ import annotations

import json
import re
from datetime import datetime
from fractions import Fraction

import pytest
from click.testing import CliRunner
from servers.http_api import ApiServer, Request

from auditor.cli import cli
from auditor.providers import mig
from auditor.providers.live.dcgm import pod_of
from auditor.providers.live.k8s_gpus import node_gpus, pod_gpu_share
from auditor.tables.shared_gpus import unit_shares

# The seven profiles of an 8-memory-slice GPU in NVIDIA's order: 1g, 1g+me, 1g with two memory slices, 2g, 3g,
# 4g, 7g; what each blocks, and how many fit on one GPU.
EIGHT = [("1/7", 7), ("1/7", 1), ("1/4", 4), ("2/7", 3), ("1/2", 2), ("4/7", 1), ("1", 1)]
NAMES = {
    "A100-40GB": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "A100-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H100-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H100-94GB": ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"],
    "H200": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    "B200": ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
    "GB200": ["1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"],
}
EXPECTED = {product: {name: (Fraction(share), n) for name, (share, n) in zip(names, EIGHT, strict=True)}
            for product, names in NAMES.items()}
# A30: 4 compute and 4 memory slices; 1g.6gb takes a quarter, 2g.12gb a half (NVIDIA's table)
EXPECTED["A30"] = {"1g.6gb": (Fraction(1, 4), 4), "1g.6gb+me": (Fraction(1, 4), 1), "2g.12gb": (Fraction(1, 2), 2),
                   "2g.12gb+me": (Fraction(1, 2), 1), "4g.24gb": (Fraction(1), 1)}
# The catalog's GPU model and the `nvidia.com/gpu.product` label GPU feature discovery writes for each
MODELS = {"A100-40GB": ("A100", "NVIDIA-A100-SXM4-40GB"), "A100-80GB": ("A100-80GB", "NVIDIA-A100-SXM4-80GB"),
          "A30": ("A30", "NVIDIA-A30"), "H100-80GB": ("H100", "NVIDIA-H100-80GB-HBM3"),
          "H100-94GB": ("H100-NVL", "NVIDIA-H100-NVL"), "H200": ("H200", "NVIDIA-H200"),
          "B200": ("B200", "NVIDIA-B200"), "GB200": ("GB200", "NVIDIA-GB200")}
EVERY = [(product, profile) for product, table in EXPECTED.items() for profile in table]


def test_the_tables_hold_every_product_and_profile():
    assert {name: list(p.profiles) for name, p in mig.products().items()} == {
        name: list(table) for name, table in EXPECTED.items()}


@pytest.mark.parametrize("product, profile", EVERY)
def test_a_slice_blocks_its_share_of_the_gpu(product, profile):
    share, instances = EXPECTED[product][profile]
    model = MODELS[product][0]
    assert mig.products()[product].blocks(profile) == share
    assert mig.blocks(model, profile) == share
    assert mig.products()[product].profiles[profile].instances == instances


def test_a_three_g_slice_is_half_a_gpu_not_three_sevenths():
    # issue 35's mutant: a 3g.40gb counted as 1/7 (or its compute alone, 3/7) of an A100 80GB
    assert mig.blocks("A100-80GB", "3g.40gb") == Fraction(1, 2)
    assert mig.blocks("H200", "1g.35gb") == Fraction(1, 4)
    # 1g.10gb is two memory slices of an A100 40GB but one of an A100 80GB: without the model no table is chosen
    assert mig.blocks("A100", "1g.10gb") == Fraction(1, 4)
    assert mig.blocks("A100-80GB", "1g.10gb") == Fraction(1, 7)
    assert mig.product_for(None, ["1g.10gb"]) is None
    assert mig.product_for(None, ["1g.10gb", "1g.5gb"]).name == "A100-40GB"
    assert mig.blocks(None, "5g.50gb") == Fraction(5, 7)  # in no table: its compute slices


def _lgip(text: str) -> dict[str, tuple[int, int, int, tuple[int, ...]]]:
    """`nvidia-smi mig -lgip` and `-lgipp` read back: profile -> (compute slices, memory slices, instances,
    placements)."""
    by_id, out = {}, {}
    for m in re.finditer(r"MIG (\S+)\s+(\d+)\s+\d+/(\d+)", text):
        by_id[m.group(2)] = (m.group(1), int(m.group(3)))
    for m in re.finditer(r"Profile ID\s+(\d+) Placements?\s*:\s*\{([\d,]+)\}:(\d+)", text):
        name, instances = by_id[m.group(1)]
        out[name] = (int(name.split("g.")[0]), int(m.group(3)), instances,
                     tuple(int(x) for x in m.group(2).split(",")))
    return out


@pytest.mark.parametrize("product, path", [("H200", "mig-lgip.txt"), ("H100-80GB", "h100/mig-lgip.txt")])
def test_the_tables_match_nvidia_smi_on_a_real_gpu(nvidia_smi, product, path):
    seen = _lgip((nvidia_smi / path).read_text())
    table = mig.products()[product]
    assert seen == {name: (p.compute, p.memory, p.instances, p.placements) for name, p in table.profiles.items()}
    assert len(seen) == 7


def _shares(labels: dict, allocatable: dict) -> tuple[int, dict[str, Fraction], list[dict]]:
    node = node_gpus(labels, allocatable)
    model = MODELS[next(k for k, (_, label) in MODELS.items() if labels["nvidia.com/gpu.product"].startswith(label))][0]
    return node.physical, unit_shares(model, node.physical, node.units), node.units


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("product, profile", EVERY)
def test_a_gpu_cut_as_far_as_a_profile_goes_is_held_in_full(product, profile, replicas):
    _, instances = EXPECTED[product][profile]
    model, label = MODELS[product]
    shared = {"nvidia.com/gpu.replicas": str(replicas)} if replicas > 1 else {}
    suffix = "-SHARED" if replicas > 1 else ""
    # single strategy: every GPU cut alike, nvidia.com/gpu counts the slices (times the replicas)
    physical, shares, units = _shares(
        {"nvidia.com/gpu.product": f"{label}-MIG-{profile}{suffix}", "nvidia.com/gpu.count": str(8 * instances),
         **shared}, {"nvidia.com/gpu": str(8 * instances * replicas)})
    assert physical == 8
    assert sum(u["count"] * shares[u["resource"]] for u in units) == 8
    assert shares["nvidia.com/gpu"] == Fraction(1, instances * replicas)
    # mixed strategy: one resource per profile, nvidia.com/gpu.count the physical GPUs
    resource = f"nvidia.com/mig-{profile}" + (".shared" if replicas > 1 else "")
    physical, shares, units = _shares({"nvidia.com/gpu.product": label + suffix, "nvidia.com/gpu.count": "8",
                                       **shared}, {resource: str(8 * instances * replicas), "nvidia.com/gpu": "0"})
    assert physical == 8
    assert sum(u["count"] * shares[u["resource"]] for u in units) == 8


@pytest.mark.parametrize("product, slices, expected", [
    # NVIDIA's mixed layouts of one A100 40GB: a 4g and a 3g fill it (4/7 + 4/8 would be 15/14: scaled to one)
    ("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1}, {"4g.20gb": Fraction(8, 15), "3g.20gb": Fraction(7, 15)}),
    ("A100-40GB", {"2g.10gb": 3, "1g.5gb": 1}, {"2g.10gb": Fraction(2, 7), "1g.5gb": Fraction(1, 7)}),
    ("H200", {"1g.35gb": 2, "3g.71gb": 1}, {"1g.35gb": Fraction(1, 4), "3g.71gb": Fraction(1, 2)}),
    # three 1g slices of seven: each its seventh, the other four sevenths unallocated
    ("H100-80GB", {"1g.10gb": 3}, {"1g.10gb": Fraction(1, 7)}),
])
def test_mixed_layouts_of_one_gpu(product, slices, expected):
    assert mig.slice_shares(MODELS[product][0], slices, 1) == expected


def test_time_sliced_mig_single_strategy_counts_physical_gpus():
    # issue 27: 8 A100s cut into 1g.5gb and time-sliced twice offer 112 nvidia.com/gpu; they are 8 GPUs, and
    # a day of all 112 held is 192 GPU-hours, not 56 GPUs and 1,344
    physical, shares, units = _shares({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED",
                                       "nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.count": "112"},
                                      {"nvidia.com/gpu": "112"})
    assert physical == 8
    assert units[0]["sharing"] == "mig" and units[0]["replicas"] == 2
    assert 112 * shares["nvidia.com/gpu"] * 24 == 192


@pytest.mark.parametrize("labels, expected", [
    ({"namespace": "ml", "pod": "train-0"}, ("ml", "train-0")),
    # scraped through a ServiceMonitor: the exporter's mapping is exported_*, pod/namespace its own
    ({"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7x2kq", "exported_namespace": "ml",
      "exported_pod": "train-0"}, ("ml", "train-0")),
    ({"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7x2kq"}, (None, None)),
    ({"namespace": "monitoring", "pod": "exporter-abc", "container": "dcgm-exporter"}, (None, None)),
    ({"gpu": "0"}, (None, None)),
])
def test_the_exporters_own_pod_is_never_a_gpus_user(labels, expected):
    assert pod_of(labels) == expected


# ---- through a pull from a Kubernetes API on loopback, and an audit -------------------------------------------

TOKEN = "planted-mig-token-5c1a7e"
SINCE, UNTIL = datetime(2025, 5, 1), datetime(2025, 5, 2)
POLICY = "policy: test\nversion: \"1\"\nowner: finops@example.com\ncurrency: USD\n"


def _cluster() -> tuple[dict, dict]:
    """One node per profile of every table in each strategy, 8 GPUs cut as far as the profile goes, and pods
    holding every slice since before the window."""
    nodes, pods = [], []
    for i, (product, profile) in enumerate(EVERY):
        _, instances = EXPECTED[product][profile]
        label = MODELS[product][1]
        for strategy in ("single", "mixed"):
            name = f"n{i}-{strategy}"
            if strategy == "single":
                labels = {"nvidia.com/gpu.product": f"{label}-MIG-{profile}",
                          "nvidia.com/gpu.count": str(8 * instances)}
                resource = "nvidia.com/gpu"
            else:
                labels = {"nvidia.com/gpu.product": label, "nvidia.com/gpu.count": "8"}
                resource = f"nvidia.com/mig-{profile}"
            nodes.append({
                "metadata": {"name": name, "creationTimestamp": "2025-04-01T00:00:00Z",
                             "labels": {"kubernetes.io/hostname": name, "nvidia.com/mig.strategy": strategy,
                                        **labels}},
                "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
                "status": {"allocatable": {resource: str(8 * instances)},
                           "capacity": {resource: str(8 * instances)},
                           "conditions": [{"type": "Ready", "status": "True"}]}})
            for k in range(instances):  # each pod one slice on every GPU
                pods.append({
                    "metadata": {"name": f"{name}-p{k}", "namespace": "ml",
                                 "creationTimestamp": "2025-04-02T00:00:00Z"},
                    "spec": {"nodeName": name, "containers": [
                        {"name": "main", "resources": {"limits": {resource: "8"}}}]},
                    "status": {"phase": "Running", "startTime": "2025-04-02T00:00:00Z"}})
    return ({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": nodes},
            {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})


def _pull_and_audit(tmp_path, node_list: dict, pod_list: dict) -> dict:
    """`pull --provider k8s` from a Kubernetes API (and a Prometheus with no DCGM series) on loopback serving
    these nodes and pods, then an audit of the snapshot: its audit.json."""
    lists = {"/api/v1/nodes": node_list, "/api/v1/pods": pod_list,
             "/apis/batch/v1/jobs": {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": []}}

    def api(req: Request):
        if req.path == "/api/v1/query_range":  # Prometheus: no DCGM series (the shares need none)
            return 200, {"status": "success", "data": {"resultType": "matrix", "result": []}}
        if req.header("Authorization") != f"Bearer {TOKEN}":
            return 401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401}
        return (200, lists[req.path]) if req.path in lists else (404, {"kind": "Status", "code": 404})

    with ApiServer(api) as server:
        (tmp_path / "kubeconfig").write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": server.url}}],
            "users": [{"name": "u", "user": {"token": TOKEN}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        result = CliRunner().invoke(cli, [
            "pull", "--provider", "k8s", "--kubeconfig", str(tmp_path / "kubeconfig"), "--since",
            SINCE.date().isoformat(), "--until", UNTIL.date().isoformat(), "--prometheus", server.url,
            "--out", str(tmp_path / "snap")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (tmp_path / "policy.yml").write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(tmp_path / "policy.yml"), "--out",
                                      str(tmp_path / "r"), str(tmp_path / "snap")], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return json.loads((tmp_path / "r" / "audit.json").read_text())


@pytest.mark.heavy
def test_nodes_whose_every_slice_is_held_are_fully_allocated(tmp_path):
    doc = _pull_and_audit(tmp_path, *_cluster())
    nodes = {n["name"]: n for n in doc["summary"]["kubernetes_gpus"]["nodes"]}
    assert len(nodes) == 2 * len(EVERY)
    for n in nodes.values():  # 8 GPUs x 24 h, every hour of it held
        assert (n["gpu_count"], n["gpu_hours"], n["allocated_gpu_hours"]) == (8, 192, 192), n
    assert not [f for f in doc["findings"] if f["rule"] == "KUBE003"]


# ---- beside MIG and time-slicing: HAMi and Run:ai fractions -------------------------------------------------

@pytest.mark.parametrize("limits, annotations, expected", [
    # HAMi: the larger of cores (percent) and memory (MiB of the GPU's 81,920, or percent); memory left unset
    # is the whole GPU's
    ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "20480"}, {}, Fraction(3, 10)),
    ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "10", "nvidia.com/gpumem": "40960"}, {}, Fraction(1, 2)),
    ({"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "25"}, {}, Fraction(1, 4)),
    ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "20"}, {}, Fraction(1)),
    # Run:ai: the fraction it is annotated with, or its memory of the GPU's
    ({}, {"gpu-fraction": "0.5"}, Fraction(1, 2)),
    ({}, {"gpu-memory": "20480"}, Fraction(1, 4)),
    ({"nvidia.com/gpu": "1"}, {}, None),  # a whole GPU
])
def test_a_hami_or_runai_pods_share_of_a_gpu(limits, annotations, expected):
    spec = {"containers": [{"name": "main", "resources": {"limits": limits}}]}
    assert pod_gpu_share(spec, annotations, 81920) == expected


@pytest.mark.heavy
def test_hami_and_runai_pods_cost_their_fraction(tmp_path):
    """A HAMi node (2 GPUs registered, split 10 ways: 20 nvidia.com/gpu) with a pod at 30% of one GPU's cores
    and a pod at half the memory of two; a node of 8 whole A100 80GB with Run:ai pods at a half, a quarter of
    two GPUs and 20 GiB of one, beside a pod holding 4 whole GPUs. Held all 24 h of the window: 1.3 of 2 GPUs
    (31.2 GPU-hours of 48) and 5.25 of 8 (126 of 192)."""
    register = ("GPU-aaaa,10,81920,100,NVIDIA-NVIDIA A100-SXM4-80GB,0,true:"
                "GPU-bbbb,10,81920,100,NVIDIA-NVIDIA A100-SXM4-80GB,0,true:")
    nodes = [
        {"metadata": {"name": "hami-1", "creationTimestamp": "2025-04-01T00:00:00Z",
                      "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                      "annotations": {"hami.io/node-nvidia-register": register}},
         "spec": {"providerID": "aws:///us-east-1a/i-hami1"},
         "status": {"allocatable": {"nvidia.com/gpu": "20"}, "capacity": {"nvidia.com/gpu": "20"}}},
        {"metadata": {"name": "runai-1", "creationTimestamp": "2025-04-01T00:00:00Z",
                      "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8",
                                 "nvidia.com/gpu.memory": "81920"}},
         "spec": {"providerID": "aws:///us-east-1a/i-runai1"},
         "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"}}},
    ]

    def pod(name, node, limits=None, annotations=None):
        return {"metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2025-04-02T00:00:00Z",
                             "annotations": annotations or {}},
                "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"limits": limits or {}}}]},
                "status": {"phase": "Running", "startTime": "2025-04-02T00:00:00Z"}}

    pods = [pod("h1", "hami-1", {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30", "nvidia.com/gpumem": "20480"}),
            pod("h2", "hami-1", {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50"}),
            pod("r1", "runai-1", annotations={"gpu-fraction": "0.5"}),
            pod("r2", "runai-1", annotations={"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}),
            pod("r3", "runai-1", annotations={"gpu-memory": "20480"}),
            pod("w", "runai-1", {"nvidia.com/gpu": "4"})]
    doc = _pull_and_audit(tmp_path, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": nodes},
                          {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods})
    got = {n["name"]: (n["gpu_count"], n["gpu_hours"], n["allocated_gpu_hours"])
           for n in doc["summary"]["kubernetes_gpus"]["nodes"]}
    assert got == {"hami-1": (2, 48, 31.2), "runai-1": (8, 192, 126)}


@pytest.mark.parametrize("model, balanced", [
    ("B200", {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
    ("GB200", {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1})])
def test_nvidias_balanced_blackwell_layout_fills_one_gpu_in_full(model, balanced):
    """NVIDIA GPU Operator's default `all-balanced` MIG layout for a B200 (device 0x290110DE) and a GB200
    (0x294110DE): 2 + 2 + 3 = 7 compute slices and 1 + 1 + 2 + 4 = 8 memory slices, one GPU exactly. Held in
    full, it comes out one GPU allocated; one layout more needs a second GPU."""
    assert mig.gpus_cut(model, balanced) == 1
    assert mig.gpus_cut(model, {p: 2 * n for p, n in balanced.items()}) == 2
    shares = mig.slice_shares(model, balanced, gpus=1)
    assert sum(n * shares[p] for p, n in balanced.items()) == 1

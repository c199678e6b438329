"""Shared GPUs on Kubernetes, end to end over real connections: the official kubernetes client against a loopback
API server serving recorded NodeList, PodList and JobList (a MIG node in the mixed strategy, one in the single
strategy, a time-sliced T4 node), and DCGM exporter series in a real Prometheus server (Debian's `prometheus`),
loaded with `promtool tsdb create-blocks-from openmetrics` from recorded exporter scrapes and read through its
HTTP API. Then an audit of the snapshot: idle and oversized slices, unallocated GPUs, costs per namespace."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from servers.http_api import RECORDED, ApiServer, Request, recorded
from servers.prometheus import serve

from auditor.cli import cli
from auditor.providers.live.snapshot import load_snapshot

TOKEN = "planted-k8s-shared-token-3b9e1d"
SINCE, UNTIL = datetime(2025, 5, 1), datetime(2025, 5, 4)  # 72 h, in the past: Prometheus holds them
STEP = timedelta(minutes=30)  # the recorded scrapes replayed, one then the other, every 30 minutes
FIRST = SINCE + timedelta(minutes=15)  # off the hour, so each hourly avg_over_time holds one of each
PATHS = {"/api/v1/nodes": "nodes", "/apis/batch/v1/jobs": "jobs", "/api/v1/pods": "pods"}
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
teams:
  search: {lead: lead-search@example.com}
  research: {lead: lead-research@example.com}
"""
P4DE, G4DN12, P4D = Decimal("27.447"), Decimal("3.912"), Decimal("21.96")  # catalog USD/h


def kube_api(req: Request):
    if req.header("Authorization") != f"Bearer {TOKEN}":
        return 401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401}
    name = PATHS.get(req.path)
    if name is None:
        return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
    return 200, recorded(f"k8s-shared/{name}.json")


def openmetrics(scrapes: list[str], start: datetime, end: datetime, step: timedelta) -> str:
    """Exporter scrapes (Prometheus text format) as one OpenMetrics backfill: the scrapes taken in turn every
    `step` in [start, end), each family's samples together and in time order, then `# EOF`."""
    families: dict[str, dict] = {}
    parsed = []
    for text in scrapes:
        samples = []
        for line in text.splitlines():
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                _, kind, name, rest = line.split(" ", 3)
                families.setdefault(name, {"HELP": "", "TYPE": "gauge", "samples": {}})[kind] = rest
            elif line.strip():
                series, value = line.rsplit(" ", 1)
                samples.append((series.split("{", 1)[0], series, value))
        parsed.append(samples)
    t, i = start, 0
    while t < end:
        for name, series, value in parsed[i % len(parsed)]:
            stamp = t.replace(tzinfo=UTC).timestamp()
            families[name]["samples"].setdefault(series, []).append(f"{series} {value} {stamp:.0f}")
        t, i = t + step, i + 1
    out = []
    for name, f in families.items():
        out += [f"# HELP {name} {f['HELP']}", f"# TYPE {name} {f['TYPE']}"]
        for lines in f["samples"].values():
            out += lines
    return "\n".join(out) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, prometheus_bin):
    scrapes = [(RECORDED / "dcgm" / f"scrape-{x}.prom").read_text() for x in ("a", "b")]
    with serve(*prometheus_bin, tmp_path_factory.mktemp("prometheus"), openmetrics(scrapes, FIRST, UNTIL, STEP)) as url:
        yield url


def pull_k8s(root: Path, prometheus: str, *extra: str) -> Path:
    """`gpu-auditor pull --provider k8s` of the window from the recorded API server (a kubeconfig in `root`) and
    `prometheus`, into root/snap."""
    with ApiServer(kube_api) as api:
        kubeconfig = root / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "eks-gpu",
            "clusters": [{"name": "eks-gpu", "cluster": {"server": api.url}}],
            "users": [{"name": "auditor", "user": {"token": TOKEN}}],
            "contexts": [{"name": "eks-gpu", "context": {"cluster": "eks-gpu", "user": "auditor"}}]}))
        result = CliRunner().invoke(cli, [
            "pull", "--provider", "k8s", "--kubeconfig", str(kubeconfig), "--since", SINCE.date().isoformat(),
            "--until", UNTIL.date().isoformat(), "--prometheus", prometheus, *extra, "--out", str(root / "snap")],
            catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root / "snap"


@pytest.fixture(scope="module")
def snapshot(prometheus, tmp_path_factory):
    return pull_k8s(tmp_path_factory.mktemp("shared"), prometheus)


@pytest.fixture(scope="module")
def audit(snapshot, tmp_path_factory):
    root = tmp_path_factory.mktemp("audit")
    (root / "policy.yml").write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(root / "policy.yml"), "--out", str(root / "r"),
                                      str(snapshot)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    doc = json.loads((root / "r" / "audit.json").read_text())
    doc["_markdown"] = (root / "r" / "report.md").read_text()
    return doc


@pytest.mark.heavy
def test_prometheus_serves_the_backfilled_dcgm_series(prometheus):
    q = "DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_PROFILE=\"7g.80gb\"}"
    start = FIRST.replace(tzinfo=UTC).timestamp()
    url = (f"{prometheus}/api/v1/query_range?query={urllib.request.quote(q)}&start={start:.0f}"
           f"&end={start + 3600:.0f}&step=1800")
    with urllib.request.urlopen(url) as r:
        doc = json.loads(r.read())
    [series] = doc["data"]["result"]
    assert series["metric"]["pod"] == "embedder-0" and series["metric"]["Hostname"] == "gpu-mig-mixed-1"
    assert [v for _, v in series["values"]] == ["0.06", "0.09", "0.06"]


@pytest.mark.heavy
def test_nodes_count_physical_gpus_and_their_units(snapshot):
    manifest = json.loads((snapshot / "manifest.json").read_text())
    assert manifest["failed"] == []
    inv = load_snapshot(snapshot / "inventory.json")
    assets = {a["name"]: a for a in inv["assets"]}
    assert set(assets) == {"gpu-mig-mixed-1", "gpu-ts-1", "gpu-mig-single-1"}
    # physical GPUs, not the 4 + 17 MIG devices, 16 replicas or 16 MIG devices the allocatable counts
    assert {n: (a["gpu_count"], a["gpu_model"]) for n, a in assets.items()} == {
        "gpu-mig-mixed-1": (8, "A100-80GB"), "gpu-ts-1": (4, "T4"), "gpu-mig-single-1": (8, "A100")}
    assert assets["gpu-mig-single-1"]["gpu_memory_gb"] is None  # the label holds a slice's memory there
    units = {(u["asset_id"], u["resource"]): (u["sharing"], u["profile"], u["count"], u["slices"],
                                              u["slices_per_gpu"]) for u in inv["gpu_units"]}
    assert units == {
        ("i-0migmixed000001", "nvidia.com/gpu"): ("none", None, 4, 1, 1),
        ("i-0migmixed000001", "nvidia.com/mig-1g.10gb"): ("mig", "1g.10gb", 14, 1, 7),
        ("i-0migmixed000001", "nvidia.com/mig-3g.40gb"): ("mig", "3g.40gb", 2, 3, 7),
        ("i-0migmixed000001", "nvidia.com/mig-7g.80gb"): ("mig", "7g.80gb", 1, 7, 7),
        ("i-0timeslice00001", "nvidia.com/gpu"): ("time-slicing", None, 16, 1, 4),
        ("i-0migsingle00001", "nvidia.com/gpu"): ("mig", "3g.20gb", 16, 3, 7)}
    allocs = {(a["id"], a["resource"]): a["units"] for a in inv["gpu_allocations"]}
    assert allocs == {("serving/embedder-0", "nvidia.com/mig-7g.80gb"): 1,
                      ("research/notebook-7", "nvidia.com/mig-3g.40gb"): 1,
                      ("serving/api-0", "nvidia.com/mig-1g.10gb"): 1, ("train/ft-llm-0", "nvidia.com/gpu"): 4,
                      ("dev/jupyter-a", "nvidia.com/gpu"): 1, ("dev/jupyter-b", "nvidia.com/gpu"): 1,
                      ("ml/batch-1", "nvidia.com/gpu"): 4, ("inference/triton-0", "nvidia.com/gpu"): 8,
                      ("inference/triton-1", "nvidia.com/gpu"): 8}  # the pending sweep-3 holds nothing
    assert {a["workload"] for a in inv["gpu_allocations"] if a["workload"]} == {"train/ft-llm"}


@pytest.mark.heavy
def test_utilisation_per_node_and_slice_comes_from_engine_activity(snapshot):
    inv = load_snapshot(snapshot / "inventory.json")
    usage = {u["asset_id"]: u for u in inv["gpu_usage"]}
    # GPU_UTIL reads 0 on the four MIG GPUs; engine activity weighted by compute slices does not:
    # (4 x 86% + 60% x 1/7 + 0.4% x 3/7 + 7.5%) / 8 = 45.03%
    mixed = (4 * 86 + 60 / 7 + 0.4 * 3 / 7 + 7.5) / 8
    assert usage["i-0migmixed000001"]["mean_util_pct"] == pytest.approx(mixed, abs=0.01)
    assert usage["i-0migmixed000001"]["samples"] == 72
    assert usage["i-0migsingle00001"]["mean_util_pct"] == pytest.approx(46.5 * 6 / 7, abs=0.01)
    slices = {(s["namespace"], s["pod"]): s for s in inv["slice_usage"] if s["pod"]}
    assert slices[("research", "notebook-7")]["mean_active_pct"] == pytest.approx(0.4, abs=0.05)
    assert slices[("research", "notebook-7")]["profile"] == "3g.40gb"
    embedder = slices[("serving", "embedder-0")]
    assert embedder["mean_active_pct"] == pytest.approx(7.5, abs=0.1)
    assert embedder["p95_active_pct"] == pytest.approx(7.5, abs=0.01)  # of hourly means: 6% and 9% each hour
    assert embedder["peak_mem_gb"] == pytest.approx(6.5, abs=0.001)  # 6656 MiB
    assert slices[("dev", "jupyter-a")]["instance"] is None and slices[("dev", "jupyter-a")]["gpu"] == "0"
    idle_instances = [s for s in inv["slice_usage"] if s["pod"] is None]
    assert len(idle_instances) == 14  # the mixed node's slices no pod holds: 13 of 1g.10gb and one 3g.40gb


def test_audit_finds_idle_and_oversized_slices_and_unallocated_gpus(audit):
    found = {(f["rule"], f["resource"]): f for f in audit["findings"]}
    kube = {k for k in found if k[0].startswith("KUBE")}
    assert kube == {("KUBE001", "research/notebook-7"), ("KUBE001", "dev/jupyter-a"),
                    ("KUBE002", "serving/embedder-0"),
                    ("KUBE003", "i-0migmixed000001"), ("KUBE003", "i-0timeslice00001")}
    assert ("GPU001", "i-0migmixed000001") not in found  # its GPU_UTIL reads 0, its engines do not
    gpu_hour = P4DE / 8
    # a 3g.40gb slice for the 72 h of the window: it blocks 4 of the A100's 8 memory slices (two fill the GPU),
    # so 1/2 of one GPU-hour price x 72 h
    assert Decimal(found[("KUBE001", "research/notebook-7")]["cost"]) == (gpu_hour / 2 * 72).quantize(
        Decimal("0.01"))
    oversized = found[("KUBE002", "serving/embedder-0")]
    assert oversized["evidence"]["recommended_profile"] == "1g.10gb"
    assert Decimal(oversized["cost"]) == (gpu_hour * 72).quantize(Decimal("0.01"))
    held = 1 + Decimal(1) / 2 + Decimal(1) / 7 + 4  # GPUs' worth held all 72 h on the mixed node: 7g, 3g, 1g
    mixed = found[("KUBE003", "i-0migmixed000001")]
    assert Decimal(mixed["cost"]) == (P4DE * 72 * (8 - held) / 8).quantize(Decimal("0.01"))
    assert mixed["evidence"]["free_now"] == {"nvidia.com/mig-1g.10gb": 13, "nvidia.com/mig-3g.40gb": 1}
    # time-sliced: 1/4 x 72 h + 1/4 x 48 h (jupyter-b from May 2) + 4/4 x 72 h of 4 x 72 GPU-hours
    ts = found[("KUBE003", "i-0timeslice00001")]
    assert ts["evidence"]["allocated_gpu_hours"] == pytest.approx(18 + 12 + 72)
    assert "time-sliced" in found[("KUBE001", "dev/jupyter-a")]["message"]


def test_namespace_costs_include_their_share_of_idle_gpus(audit):
    k = audit["summary"]["kubernetes_gpus"]
    nodes = {n["id"]: n for n in k["nodes"]}
    rows = {(r["namespace"], r["team"]): r for r in k["namespaces"]}
    total = sum(Decimal(r["total"]) for r in k["namespaces"])
    node_cost = sum(Decimal(n["cost"]["USD"]) for n in nodes.values())
    assert node_cost == (P4DE * 72).quantize(Decimal("0.01")) + (G4DN12 * 72).quantize(Decimal("0.01")) + \
        (P4D * 72).quantize(Decimal("0.01"))
    assert abs(total - node_cost) <= Decimal("0.05")  # all of it lands on a namespace, to rounding
    # the single-strategy node: 16 3g.20gb slices on 8 A100s, each blocking 4 of 8 memory slices: every GPU is
    # cut as far as it goes and held in full, nothing idle
    inference = rows[("inference", "search")]
    assert Decimal(inference["allocated"]) == (P4D * 72).quantize(Decimal("0.01"))
    assert Decimal(inference["total"]) == (P4D * 72).quantize(Decimal("0.01"))
    assert Decimal(rows[("research", "research")]["idle_share"]) > 0
    assert "### Kubernetes GPUs by namespace" in audit["_markdown"]
    # 16 x 1/2 GPUs x 72 h = 576 GPU-hours; all of 21.96 x 72 held
    assert "| inference | search | 576 | $1,581.12 | $0.00 | $1,581.12 |" in audit["_markdown"]


def test_slices_and_nodes_save_only_while_their_node_still_runs(audit, snapshot, tmp_path):
    """One definition of still running (running.py): these nodes have no billing lines (the catalog prices
    them), so the inventory decides: a node `ready` at its end still runs, and so do the slices on it."""
    kube = {(f["rule"], f["resource"]): f for f in audit["findings"] if f["rule"].startswith("KUBE")}
    for f in kube.values():
        assert f["still_running"] is True and Decimal(f["monthly_savings"]) > 0, f
    # the waste in the window: the whole cost of an idle slice or of the capacity no pod held; the compute
    # slices given back of an oversized one (7g.80gb -> 1g.10gb: 6 of 7)
    for key in [k for k in kube if k[0] in ("KUBE001", "KUBE003")]:
        assert kube[key]["wasted"] == kube[key]["cost"], key
    embedder = kube[("KUBE002", "serving/embedder-0")]
    assert Decimal(embedder["wasted"]) == (Decimal(embedder["cost"]) * 6 / 7).quantize(Decimal("0.01"))
    # the same snapshot with every node gone not-ready before its end: nothing left to save, the waste stays
    gone = tmp_path / "snap"
    gone.mkdir()
    for item in snapshot.iterdir():
        if item.is_file():
            (gone / item.name).write_bytes(item.read_bytes())
    inventory = json.loads((gone / "inventory.json").read_text())
    for a in inventory["assets"]:
        a["state"] = "not_ready"
    (gone / "inventory.json").write_text(json.dumps(inventory))
    (tmp_path / "policy.yml").write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(tmp_path / "policy.yml"), "--out", str(tmp_path / "r"),
                                      str(gone)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    stopped = {(f["rule"], f["resource"]): f for f in doc["findings"] if f["rule"].startswith("KUBE")}
    assert set(stopped) == set(kube)
    for key, f in stopped.items():
        assert f["still_running"] is False and f["monthly_savings"] is None, f
        assert f["wasted"] == kube[key]["wasted"]
        assert f["evidence"]["saving_if_still_running"] == kube[key]["monthly_savings"]
    assert not any(a["saving"] for a in doc["summary"]["actions"] if a["rule"].startswith("KUBE"))


@pytest.mark.parametrize("extra, message", [
    ({"gpu_units": [{"asset_id": "i-nope", "resource": "nvidia.com/gpu", "count": 1}]},
     "gpu_units[0].asset_id: no asset 'i-nope' in assets"),
    ({"gpu_units": [{"asset_id": "i-1", "resource": "nvidia.com/gpu", "count": 1, "sharing": "timeslicing"}]},
     "'timeslicing' is not one of none, mig, time-slicing, mps"),
    ({"slice_usage": [{"asset_id": "i-1", "window_start": "2025-05-02T00:00:00Z",
                       "window_end": "2025-05-01T00:00:00Z"}]}, "slice_usage[0]: window_end must be after"),
])
def test_bad_shared_gpu_rows_are_one_clear_error(tmp_path, extra, message):
    from auditor.errors import InputError

    path = tmp_path / "inventory.json"
    path.write_text(json.dumps({"version": 1, "assets": [{"id": "i-1", "provider": "aws", "kind": "node"}], **extra}))
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")) as e:
        load_snapshot(path)
    assert str(path) in str(e.value)

"""`gpu-auditor pull --provider k8s`: the official kubernetes client, through a kubeconfig, against a loopback
server that answers as the API server does (recorded NodeList, JobList, PodList, paged with `continue`), and
DCGM exporter metrics from a loopback Prometheus HTTP API. Then an audit of the snapshot finds what was planted."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from servers.http_api import ApiServer, Request, recorded

from auditor.cli import cli
from auditor.providers.live.snapshot import load_snapshot

TOKEN = "planted-k8s-bearer-token-do-not-write-7f3a9c"
TODAY = datetime.now(UTC).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
# The window ends two days ahead, not one: TODAY is read when the module is imported, and the servers stamp what a
# test creates with the time it is created, which a suite that crosses midnight UTC puts past tomorrow's start.
SINCE, UNTIL = TODAY - timedelta(days=3), TODAY + timedelta(days=2)
PATHS = {"/api/v1/nodes": "nodes", "/apis/batch/v1/jobs": "jobs", "/api/v1/pods": "pods"}
# node -> (utilisation per hour, cycling; framebuffer used MiB; GPUs reported)
DCGM = {"ip-10-0-1-11.ec2.internal": ([1.0, 2.0, 3.0], 1800, 8),
        "ip-10-0-1-12.ec2.internal": ([26.0, 30.0, 28.0], 10240, 8),
        "ip-10-0-1-13.ec2.internal": ([88.0, 93.0], 20100, 1)}
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
clauses:
  idle: {text: idle GPUs are stopped, max_mean_util_pct: 10, min_hours: 24}
"""


class KubeApi:
    """Answers list calls from the recorded lists, `limit` items a page, with an opaque `continue` token; a
    request without the planted bearer token gets the API server's 401 Status (which echoes nothing secret)."""

    def __init__(self, page_size_seen: list[int]):
        self.lists = {name: recorded(f"k8s/{name}.json") for name in PATHS.values()}
        self.limits = page_size_seen

    def __call__(self, req: Request):
        if req.header("Authorization") != f"Bearer {TOKEN}":
            return 401, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized",
                         "reason": "Unauthorized", "code": 401}
        name = PATHS.get(req.path)
        if name is None:
            return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
        doc = copy.deepcopy(self.lists[name])
        limit = int(req.arg("limit", "500"))
        self.limits.append(limit)
        start = int(req.arg("continue", "0"))
        doc["items"] = doc["items"][start:start + limit]
        if start + limit < len(self.lists[name]["items"]):
            doc["metadata"]["continue"] = str(start + limit)
        return 200, doc


class Prometheus:
    """`/api/v1/query_range` over DCGM metrics: a matrix with one series per GPU, a point per step; the first
    request is throttled (429) to prove the retry."""

    def __init__(self):
        self.calls = 0

    def __call__(self, req: Request):
        self.calls += 1
        if self.calls == 1:
            return 429, {"status": "error", "errorType": "too_many_requests", "error": "slow down"}
        query, step = req.arg("query"), float(req.arg("step"))
        if "DCGM_FI_PROF_" in query:  # an exporter without profiling metrics (tests/test_pull_k8s_mig.py has them)
            return 200, {"status": "success", "data": {"resultType": "matrix", "result": []}}
        start, end = float(req.arg("start")), float(req.arg("end"))
        now = datetime.now(UTC).timestamp()
        result = []
        for node, (util, fb, gpus) in DCGM.items():
            for gpu in range(gpus):
                values, t, i = [], start, 0
                while t <= min(end, now):
                    v = util[i % len(util)] if "GPU_UTIL" in query else (fb if i % 5 == 2 else fb / 3)
                    values.append([t, f"{v:g}"])
                    t, i = t + step, i + 1
                metric = {"__name__": "DCGM_FI_DEV_GPU_UTIL" if "GPU_UTIL" in query else "DCGM_FI_DEV_FB_USED",
                          "gpu": str(gpu), "UUID": f"GPU-{node[:12]}-{gpu}", "device": f"nvidia{gpu}",
                          "modelName": "NVIDIA A100-SXM4-40GB", "Hostname": node, "job": "dcgm-exporter"}
                result.append({"metric": metric, "values": values})
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.fixture
def cluster(tmp_path):
    limits: list[int] = []
    with ApiServer(KubeApi(limits)) as api, ApiServer(Prometheus()) as prom:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "eks-ml",
            "clusters": [{"name": "eks-ml", "cluster": {"server": api.url}}],
            "users": [{"name": "auditor", "user": {"token": TOKEN}}],
            "contexts": [{"name": "eks-ml", "context": {"cluster": "eks-ml", "user": "auditor"}}]}))
        yield {"kubeconfig": kubeconfig, "api": api, "prom": prom, "limits": limits}


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def pull(cluster, out: Path, *extra):
    return run("pull", "--provider", "k8s", "--kubeconfig", cluster["kubeconfig"], "--since", SINCE.date(), "--until",
               UNTIL.date(), "--out", out, *extra)


@pytest.mark.heavy
def test_pull_then_audit_finds_idle_oversized_and_uncheckpointed_spot(cluster, tmp_path, monkeypatch):
    from auditor.providers.live import k8s as k8s_live
    from auditor.providers.live.pull import Retry

    monkeypatch.setattr(k8s_live, "PAGE", 2)  # five nodes: three pages
    monkeypatch.setattr("auditor.providers.live.pull.Retry", lambda: Retry(delays=(0.01, 0.02)))
    snap = tmp_path / "snap"
    result = pull(cluster, snap, "--prometheus", cluster["prom"].url)
    assert result.exit_code == 0, result.output
    manifest = json.loads((snap / "manifest.json").read_text())
    assert manifest["failed"] == [] and manifest["retries"] == 1
    counts = {s["name"]: s["counts"] for s in manifest["sources"]}
    assert counts["k8s:nodes"] == {"nodes": 5, "gpu_nodes": 4}
    assert counts["k8s:workloads"]["gpu_workloads"] == 4  # three GPU jobs and a bare notebook pod
    assert counts["k8s:dcgm"]["gpu_usage"] == 3
    assert set(cluster["limits"]) == {2}
    node_requests = [r for r in cluster["api"].requests if r.path == "/api/v1/nodes"]
    assert [r.arg("continue") for r in node_requests] == [None, "2", "4"]

    inv = load_snapshot(snap / "inventory.json")
    assets = {a["id"]: a for a in inv["assets"]}
    assert set(assets) == {"i-0k8sidle00000001", "i-0k8sbig000000002", "i-0k8sspot00000003", "i-0k8sspot00000005"}
    idle = assets["i-0k8sidle00000001"]
    assert (idle["provider"], idle["kind"], idle["instance_type"], idle["gpu_model"], idle["gpu_count"]) == \
        ("aws", "node", "p4d.24xlarge", "A100", 8)
    assert idle["tags"] == {"team": "nlp"} and idle["lifecycle"] == "on_demand"
    assert assets["i-0k8sspot00000003"]["lifecycle"] == "spot"
    assert assets["i-0k8sspot00000003"]["gpu_model"] == "A10G"
    usage = {u["asset_id"]: u for u in inv["gpu_usage"]}
    assert usage["i-0k8sidle00000001"]["mean_util_pct"] == pytest.approx(2.0, abs=0.05)
    assert usage["i-0k8sbig000000002"]["peak_mem_gb"] == pytest.approx(10.0)
    assert usage["i-0k8sbig000000002"]["source"] == "dcgm-exporter"
    jobs = {j["id"]: j for j in inv["jobs"]}
    assert set(jobs) == {"nlp/llm-ft-nockpt", "nlp/llm-ft-ckpt", "nlp/llm-ft-s3", "nlp/pod/notebook-ana"}
    nockpt = jobs["nlp/llm-ft-nockpt"]
    assert nockpt["spot"] is True and nockpt["checkpoint_uri"] is None  # an emptyDir dies with the pod
    assert nockpt["interruptions"] == 1 and nockpt["instance_type"] == "g5.xlarge"
    assert jobs["nlp/llm-ft-ckpt"]["checkpoint_uri"] == "pvc://nlp/llm-ckpt/mnt/checkpoints"
    assert jobs["nlp/llm-ft-s3"]["checkpoint_uri"] == "s3://ckpt-bucket/llm-ft-s3/"
    assert jobs["nlp/llm-ft-s3"]["spot"] is False
    assert jobs["nlp/pod/notebook-ana"]["spot"] is True  # it runs on a spot node

    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    audited = run("audit", "--policy", policy, "--out", tmp_path / "r", snap)
    assert audited.exit_code == 0, audited.output
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    flagged = {(f["rule"], f["resource"]) for f in doc["findings"]}
    assert ("GPU001", "i-0k8sidle00000001") in flagged
    assert ("GPU002", "i-0k8sbig000000002") in flagged
    assert ("SPOT001", "nlp/llm-ft-nockpt") in flagged
    assert ("SPOT001", "nlp/llm-ft-ckpt") not in flagged


@pytest.mark.heavy
def test_token_is_never_written_and_a_refused_token_is_a_recorded_failure(cluster, tmp_path):
    snap = tmp_path / "snap"
    assert pull(cluster, snap, "--prometheus", cluster["prom"].url).exit_code == 0
    for path in (p for p in snap.rglob("*") if p.is_file()):
        assert TOKEN not in path.read_text(), path

    cluster["kubeconfig"].write_text(cluster["kubeconfig"].read_text().replace(TOKEN, TOKEN + "-revoked"))
    bad = tmp_path / "bad"
    result = pull(cluster, bad)
    assert result.exit_code == 3
    manifest = json.loads((bad / "manifest.json").read_text())
    reasons = {f["name"]: f["reason"] for f in manifest["failed"]}
    assert set(reasons) == {"k8s:nodes", "k8s:workloads", "k8s:dcgm"}
    assert "401" in reasons["k8s:nodes"] and "Unauthorized" in reasons["k8s:nodes"]
    assert "--prometheus" in reasons["k8s:dcgm"]
    for path in (p for p in bad.rglob("*") if p.is_file()):
        assert TOKEN not in path.read_text()


def test_no_kubeconfig_is_recorded_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run("pull", "--provider", "k8s", "--out", tmp_path / "snap")
    assert result.exit_code == 3, result.output
    manifest = json.loads((tmp_path / "snap" / "manifest.json").read_text())
    assert all("no Kubernetes configuration" in f["reason"] for f in manifest["failed"])
    assert len(manifest["failed"]) == 3


def test_prometheus_down_fails_only_the_metrics(cluster, tmp_path):
    cluster["prom"].stop()
    snap = tmp_path / "snap"
    result = pull(cluster, snap, "--prometheus", cluster["prom"].url)
    assert result.exit_code == 3
    manifest = json.loads((snap / "manifest.json").read_text())
    assert [f["name"] for f in manifest["failed"]] == ["k8s:dcgm"]
    assert len(load_snapshot(snap / "inventory.json")["assets"]) == 4


@pytest.mark.heavy
def test_what_the_sources_could_not_read_is_counted_in_their_lines(cluster, tmp_path):
    """A node whose GPU capacity is not a count, a Job asking for "1.5" GPUs, DCGM series of a node the pull did
    not find and a NaN sample: none is written as if read, and each source's line says so."""
    api = cluster["api"].handler
    nodes, jobs = api.lists["nodes"]["items"], api.lists["jobs"]["items"]
    broken = copy.deepcopy(nodes[0])
    broken["metadata"]["name"] = "gpu-node-odd"
    broken["status"]["capacity"]["nvidia.com/gpu"] = "eight"
    broken["metadata"]["labels"].pop("nvidia.com/gpu.count", None)
    nodes.append(broken)
    odd_job = copy.deepcopy(next(j for j in jobs if "nvidia.com/gpu" in json.dumps(j)))
    odd_job["metadata"]["name"] = "half-gpu-job"
    for c in odd_job["spec"]["template"]["spec"]["containers"]:
        c["resources"] = {"limits": {"nvidia.com/gpu": "1.5"}}
    jobs.append(odd_job)
    prom = cluster["prom"].handler
    answer = prom.__call__

    def with_strays(req):
        status, body = answer(req)
        if status == 200 and body["data"]["result"]:  # the profiling query finds no series here
            stray = copy.deepcopy(body["data"]["result"][0])
            stray["metric"]["Hostname"] = "not-a-node-of-this-cluster"
            body["data"]["result"].append(stray)
            body["data"]["result"][0]["values"][0][1] = "NaN"
        return status, body

    cluster["prom"].handler = with_strays
    result = pull(cluster, tmp_path / "snap", "--prometheus", cluster["prom"].url)
    assert result.exit_code == 0, result.output
    assert "k8s:nodes: nodes 6, gpu_nodes 4; not read: 1 nodes whose nvidia.com/gpu capacity is not a whole number" \
        in result.output
    assert "not read: 1 workloads whose nvidia.com/gpu request is not a whole number" in result.output
    assert "not read: 2 DCGM samples that are not finite numbers (NaN, Inf), 2 DCGM series of no GPU node the pull " \
           "found" in result.output
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    assert "gpu-node-odd" not in {a["name"] for a in inv["assets"]}
    assert "half-gpu-job" not in {j["name"] for j in inv["jobs"]}

"""`gpu-auditor pull --provider azure`: azure-mgmt-compute, azure-mgmt-costmanagement and azure.core's ARM pipeline
pointed at a loopback server that answers with recorded responses shaped as the ARM APIs document them
(`value`/`nextLink` lists, the Query API's positional `columns`/`rows` with `nextLink`, Azure ML jobs and computes,
the Azure Monitor Metrics API), and the Retail Prices API (`Items`/`NextPageLink`). The credential is a stand-in for
DefaultAzureCredential (its token is planted and must not be written). Then an audit of the snapshot finds the
planted idle GPU (a scale set), oversized GPU (a VM) and spot Azure ML job without checkpoints."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from azure.core.credentials import AccessToken
from click.testing import CliRunner
from servers.http_api import ApiServer, Request, recorded

from auditor.cli import cli
from auditor.providers.live import azure as azure_live
from auditor.providers.live import azure_ml, azure_prices
from auditor.providers.live.pull import PullOptions, pull_snapshot, source_line
from auditor.providers.live.snapshot import load_snapshot
from auditor.window import Window

SUB = "00000000-0000-0000-0000-0000000000a1"
TOKEN = "planted-azure-arm-token-do-not-write-91c2"
SINCE, UNTIL = datetime(2026, 10, 1), datetime(2026, 10, 4)
WINDOW = Window(SINCE, UNTIL, "2026-10-01 to 2026-10-03")
RG = f"/subscriptions/{SUB}/resourcegroups/ml-train/providers"
VM = f"{RG}/microsoft.compute/virtualmachines/"
VMSS = f"{RG}/microsoft.compute/virtualmachinescalesets/"
WS = f"/subscriptions/{SUB}/resourceGroups/ml-train/providers/Microsoft.MachineLearningServices/workspaces/vision-ml"
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
clauses:
  tagging: {text: everything is tagged, required_tags: [team], min_cost: 10}
  idle: {text: idle GPUs are stopped, max_mean_util_pct: 10, min_hours: 24}
"""
# Hourly GPU utilisation (percent, cycled) and memory used (MiB) that Telegraf's nvidia_smi input wrote through its
# azure_monitor output, per resource. scratch-h100 has no agent: its metrics come back empty.
GPU_METRICS = {
    VM + "vis-a100-train": ([24.0, 30.0, 26.0], 10 * 1024),  # busy enough, but a 10 GB model on an 80 GB A100
    VM + "vis-t4-spot": ([91.0], 14 * 1024),
    VMSS + "train-a100-vmss": ([1.0, 2.0], 3 * 1024),  # the idle one: two A100 VMs doing nothing
    VMSS + "vis-t4-spot-vmss": ([85.0, 88.0], 12 * 1024),
}


class Credential:
    def __init__(self):
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.extend(scopes)
        return AccessToken(TOKEN, int(time.time()) + 3600)


def metrics_response(rid: str, args: dict[str, str]) -> dict:
    """The Metrics API's answer (Metrics - List, api-version 2023-10-01): one metric per name asked, each with its
    timeseries of hourly points carrying the aggregations asked; no `$filter`, so one series each."""
    start, end = (datetime.fromisoformat(t.replace("Z", "")) for t in args["timespan"].split("/"))
    util, mem = GPU_METRICS.get(rid, ([], 0))
    hours = int((end - start).total_seconds() // 3600) if util else 0
    points = {"utilization_gpu": [util[h % len(util)] if util else 0 for h in range(hours)],
              "memory_used": [float(mem)] * hours}
    units = {"utilization_gpu": "Percent", "memory_used": "Unspecified"}
    value = []
    for name in args["metricnames"].split(","):
        data = [{"timeStamp": (start + timedelta(hours=h)).isoformat() + "Z", "average": v, "maximum": v}
                for h, v in enumerate(points[name])]
        value.append({"id": f"{rid}/providers/Microsoft.Insights/metrics/{name}", "type": "Microsoft.Insights/metrics",
                      "name": {"value": name, "localizedValue": name}, "displayDescription": "", "unit": units[name],
                      "timeseries": [{"metadatavalues": [], "data": data}] if data else [], "errorCode": "Success"})
    return {"cost": 2 * hours, "timespan": args["timespan"], "interval": "PT1H", "value": value,
            "namespace": args["metricnamespace"], "resourceregion": "eastus"}


class Arm:
    """ARM (bearer token checked) and the Retail Prices API (no credential), each request kept for the test."""

    def __init__(self, deny: tuple[str, ...] = ()):
        self.bodies: list[dict] = []
        self.metric_args: dict[str, dict[str, str]] = {}
        self.price_filters: list[str] = []
        self.throttle = {"query", "query-next", "metrics", "prices"}  # each throttles once: 429, as ARM does
        self.deny = deny  # sources that answer 403

    def _throttled(self, what: str) -> bool:
        if what in self.throttle:
            self.throttle.discard(what)
            return True
        return False

    def __call__(self, req: Request):
        base = f"http://{req.header('Host')}"

        def doc(name: str):
            return json.loads(json.dumps(recorded(f"azure/{name}.json")).replace("{base}", base))

        args = {k: v[0] for k, v in req.query.items()}
        path = req.path.lower()
        if path == "/api/retail/prices":
            if self._throttled("prices"):
                return 429, {"Error": {"Code": "429", "Message": "Too many requests. Please retry."}}
            self.price_filters.append(args["$filter"])
            sku = args["$filter"].split("armSkuName eq '")[1].split("'")[0]
            return 200, doc(f"retail-prices-{sku}-{2 if '$skip' in args else 1}")
        if req.header("Authorization") != f"Bearer {TOKEN}":
            return 401, {"error": {"code": "AuthenticationFailed", "message": "Authentication failed."}}
        for source in self.deny:
            if source in path:
                return 403, {"error": {"code": "AuthorizationFailed", "message": f"The client does not have "
                                       f"authorization to perform action over scope '{req.path}'."}}
        if path == f"/subscriptions/{SUB}/providers/microsoft.compute/virtualmachines":
            return 200, doc(f"virtualMachines-{2 if req.arg('$skiptoken') == 'page2' else 1}")
        if path == f"/subscriptions/{SUB}/providers/microsoft.compute/virtualmachinescalesets":
            return 200, doc(f"virtualMachineScaleSets-{2 if req.arg('$skiptoken') == 'page2' else 1}")
        if path == f"/subscriptions/{SUB}/providers/microsoft.costmanagement/query" and req.method == "POST":
            # Cost Management throttles often: 429 with x-ms-ratelimit headers, on the first page and a nextLink page
            if self._throttled("query-next" if req.arg("$skiptoken") else "query"):
                return 429, {"error": {"code": "429", "message": "Too many requests. Please retry."}}
            self.bodies.append(req.json())
            return 200, doc(f"query-{2 if req.arg('$skiptoken') else 1}")
        if path.endswith("/providers/microsoft.insights/metrics"):
            if self._throttled("metrics"):
                return 429, {"error": {"code": "TooManyRequests", "message": "Request is throttled."}}
            rid = path.removesuffix("/providers/microsoft.insights/metrics")
            self.metric_args[rid] = args
            return 200, metrics_response(rid, args)
        if path == f"/subscriptions/{SUB}/providers/microsoft.machinelearningservices/workspaces":
            return 200, doc("ml-workspaces")
        if path == f"{WS}/jobs".lower():
            return 200, doc(f"ml-jobs-{2 if req.arg('$skipToken') == 'page2' else 1}")
        if path.startswith(f"{WS}/computes/".lower()):
            return 200, doc(f"ml-compute-{path.rsplit('/', 1)[1]}")
        return 404, {"error": {"code": "NotFound", "message": f"not recorded: {req.method} {req.path}"}}


@pytest.fixture
def arm(monkeypatch):
    with ApiServer(Arm()) as server:
        monkeypatch.setenv(azure_live.ENDPOINT_ENV, server.url)
        monkeypatch.setenv(azure_live.PRICES_ENDPOINT_ENV, server.url)
        yield server


def pull(tmp_path, credential=None, **options):
    from auditor.providers.live.pull import Retry

    opts = PullOptions("azure", WINDOW, **{"accounts": [SUB], **options})
    return pull_snapshot(opts, tmp_path / "snap", retry=Retry(delays=(0.0, 0.0)),
                         adapter=lambda p: azure_live.pull(p, credential=credential or Credential()))


def audit(tmp_path, snap):
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "r"), str(snap)],
                                catch_exceptions=False)
    return result, json.loads((tmp_path / "r" / "audit.json").read_text())


@pytest.mark.heavy
def test_pull_then_audit_finds_idle_oversized_and_spot_without_checkpoint(arm, tmp_path):
    manifest = pull(tmp_path, prices=True)
    assert manifest["failed"] == [] and manifest["retries"] == 4  # the query's two pages, the metrics and the prices
    counts = {s["name"]: s["counts"] for s in manifest["sources"]}
    assert counts == {
        f"azure:{SUB}:compute": {"vms": 4, "gpu_vms": 3},
        f"azure:{SUB}:scalesets": {"scale_sets": 4, "gpu_scale_sets": 2},  # not the CPU one, not the Flexible one
        f"azure:{SUB}:metrics": {"resources": 5, "gpu_usage": 4, "without_gpu_metrics": 1},
        f"azure:{SUB}:ml": {"workspaces": 1, "command_jobs": 3, "sweep_jobs": 0},  # not the August run
        f"azure:{SUB}:cost": {"pages": 2, "rows": 18},
        "azure:prices": {"sizes": 3, "prices": 3}}
    lines = {s["name"]: source_line(s) for s in manifest["sources"]}
    assert lines[f"azure:{SUB}:ml"].endswith("not read: 1 Pipeline jobs (only Command and Sweep jobs are read)")
    assert "columns read by name: cost Cost, date UsageDate, currency Currency, resource ResourceId, meter Meter, " \
           "quantity UsageQuantity" in lines[f"azure:{SUB}:cost"]
    body = arm.handler.bodies[0]
    assert body["type"] == "ActualCost" and body["timeframe"] == "Custom"
    assert body["timePeriod"]["from"].startswith("2026-10-01T00:00:00")
    assert [g["name"] for g in body["dataset"]["grouping"]] == ["ResourceId", "Meter"]
    asked = arm.handler.metric_args[VMSS + "train-a100-vmss"]
    assert asked == {"api-version": "2023-10-01", "metricnamespace": "Telegraf/nvidia_smi",
                     "metricnames": "utilization_gpu,memory_used", "aggregation": "average,maximum",
                     "interval": "PT1H", "timespan": "2026-10-01T00:00:00Z/2026-10-04T00:00:00Z"}
    assert "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and armSkuName eq " \
           "'Standard_NC24ads_A100_v4' and priceType eq 'Consumption'" in arm.handler.price_filters

    snap = tmp_path / "snap"
    inv = load_snapshot(snap / "inventory.json")
    assets = {a["name"]: a for a in inv["assets"]}
    assert set(assets) == {"vis-a100-train", "vis-t4-spot", "scratch-h100", "train-a100-vmss", "vis-t4-spot-vmss"}
    assert assets["vis-t4-spot"]["lifecycle"] == "spot" and assets["vis-t4-spot-vmss"]["lifecycle"] == "spot"
    assert assets["vis-a100-train"]["instance_type"] == "Standard_NC24ads_A100_v4"
    assert assets["vis-a100-train"]["zone"] == "1" and assets["vis-a100-train"]["tags"]["team"] == "vision"
    pool = assets["train-a100-vmss"]
    assert (pool["id"], pool["gpu_count"], pool["lifecycle"], pool["zone"]) == (VMSS + "train-a100-vmss", 2,
                                                                                "on_demand", None)  # zones 1, 2
    assert assets["vis-t4-spot-vmss"]["gpu_count"] == 3  # 1 T4 a VM x capacity 3
    written = json.loads((snap / "inventory.json").read_text())["assets"]
    assert {a["name"]: a["eviction_policy"] for a in written} == {  # Deallocate, Delete; null where not spot
        "vis-t4-spot": "deallocate", "vis-t4-spot-vmss": "delete", "vis-a100-train": None, "scratch-h100": None,
        "train-a100-vmss": None}
    usage = {u["asset_id"]: u for u in inv["gpu_usage"]}
    assert set(usage) == set(GPU_METRICS)
    assert usage[VMSS + "train-a100-vmss"]["mean_util_pct"] == pytest.approx(1.5)
    assert usage[VM + "vis-a100-train"]["p95_util_pct"] == pytest.approx(30.0)
    assert usage[VM + "vis-a100-train"]["peak_mem_gb"] == pytest.approx(10.0)
    assert usage[VM + "vis-a100-train"]["samples"] == 72 and usage[VM + "vis-a100-train"]["source"] == "azure-monitor"
    jobs = {j["name"]: j for j in inv["jobs"]}
    assert set(jobs) == {"llm-ft-nockpt", "llm-ft-ckpt", "llm-standard"}
    nockpt, ckpt, standard = jobs["llm-ft-nockpt"], jobs["llm-ft-ckpt"], jobs["llm-standard"]
    assert nockpt["spot"] and nockpt["checkpoint_uri"] is None  # a low-priority cluster; only the default output
    assert (nockpt["instance_type"], nockpt["instance_count"], nockpt["max_runtime_s"]) == (
        "STANDARD_NC24ADS_A100_V4", 2, 36 * 3600)
    assert nockpt["tags"] == {"team": "vision", "owner": "kim"} and nockpt["region"] == "eastus"
    assert nockpt["start_time"] == datetime(2026, 10, 1, 6, 15, 2, 114000)
    assert ckpt["spot"] and ckpt["checkpoint_uri"] == "azureml://datastores/workspaceblobstore/paths/checkpoints/" \
                                                      "llm-ft-ckpt/"  # job tier Spot; --checkpoint-dir an output
    assert ckpt["instance_type"] == "Standard_NC24ads_A100_v4" and ckpt["max_runtime_s"] == 36 * 3600
    assert standard["spot"] is False and standard["max_runtime_s"] == 86400 and standard["state"] == "completed"
    prices = {p["instance_type"]: p for p in inv["prices"]}
    assert {k: v["price_per_hour"] for k, v in prices.items()} == {
        "Standard_NC24ads_A100_v4": "3.673", "Standard_NC4as_T4_v3": "0.526", "Standard_NC40ads_H100_v5": "6.98"}
    assert prices["Standard_NC24ads_A100_v4"]["source"] == "Azure Retail Prices API"

    result, doc = audit(tmp_path, snap)
    assert result.exit_code == 0, result.output
    assert doc["partial"] is False
    # 3 days x (88.152 + 4.608 + 1.5048 + 167.52 + 176.304 + 4.5144)
    assert doc["summary"]["billed_cost"] == {"USD": "1327.81"}
    flagged = {(f["rule"], f["resource"]) for f in doc["findings"]}
    assert ("GPU001", VMSS + "train-a100-vmss") in flagged
    assert ("GPU002", VM + "vis-a100-train") in flagged
    assert ("SPOT001", f"{WS}/jobs/llm-ft-nockpt") in flagged
    assert ("SPOT001", f"{WS}/jobs/llm-ft-ckpt") not in flagged
    assert not {r for r, res in flagged if r.startswith("GPU") and res in (VM + "vis-t4-spot", VM + "scratch-h100",
                                                                            VMSS + "vis-t4-spot-vmss")}
    idle = next(f for f in doc["findings"] if f["rule"] == "GPU001")
    assert idle["cost"] == "528.91"  # the scale set's three days, joined by its resource id
    untagged = {f["resource"] for f in doc["findings"] if f["rule"] == "TAG001"}
    assert VM + "scratch-h100" in untagged  # its VM has no tags; the tagged machines' tags came from the inventory
    assert not [r for r in untagged if r.endswith(("vis-a100-train", "train-a100-vmss"))]
    for path in (p for p in snap.rglob("*") if p.is_file()):
        assert TOKEN not in path.read_text(), path


@pytest.mark.heavy
def test_a_failing_source_leaves_the_others_and_the_audit_is_partial(tmp_path, monkeypatch):
    with ApiServer(Arm(deny=("microsoft.machinelearningservices",))) as server:
        monkeypatch.setenv(azure_live.ENDPOINT_ENV, server.url)
        manifest = pull(tmp_path)
    assert [f["name"] for f in manifest["failed"]] == [f"azure:{SUB}:ml"]
    assert "AuthorizationFailed" in manifest["failed"][0]["reason"]
    ok = {s["name"] for s in manifest["sources"] if s["status"] == "ok"}
    assert ok == {f"azure:{SUB}:{s}" for s in ("compute", "scalesets", "metrics", "cost")}
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    assert inv["jobs"] == [] and len(inv["gpu_usage"]) == 4

    result, doc = audit(tmp_path, tmp_path / "snap")
    assert result.exit_code == 3, result.output
    assert f"azure:{SUB}:ml" in result.stderr and "partial" in result.stderr
    assert doc["partial"] is True
    assert ("GPU001", VMSS + "train-a100-vmss") in {(f["rule"], f["resource"]) for f in doc["findings"]}


def test_monitor_denied_fails_only_the_metrics(tmp_path, monkeypatch):
    with ApiServer(Arm(deny=("microsoft.insights/metrics",))) as server:
        monkeypatch.setenv(azure_live.ENDPOINT_ENV, server.url)
        manifest = pull(tmp_path)
    assert [f["name"] for f in manifest["failed"]] == [f"azure:{SUB}:metrics"]
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    assert inv["gpu_usage"] == [] and len(inv["assets"]) == 5 and len(inv["jobs"]) == 3


def test_refused_token_fails_every_management_source(arm, tmp_path):
    class Wrong(Credential):
        def get_token(self, *scopes, **kwargs):
            return AccessToken("not-the-token", int(time.time()) + 3600)

    manifest = pull(tmp_path, Wrong())
    reasons = {f["name"]: f["reason"] for f in manifest["failed"]}
    assert set(reasons) == {f"azure:{SUB}:{s}" for s in ("compute", "scalesets", "metrics", "ml", "cost")}
    assert reasons[f"azure:{SUB}:metrics"] == "skipped: the VM and scale set inventories failed"
    assert all("Authentication" in r for name, r in reasons.items() if not name.endswith(":metrics"))


def test_no_subscription(tmp_path, monkeypatch):
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    manifest = pull(tmp_path, accounts=[])
    assert {f["name"] for f in manifest["failed"]} == {f"azure:{s}" for s in ("compute", "scalesets", "metrics", "ml",
                                                                                "cost")}


def test_iso_durations_and_retail_price_choice():
    assert [azure_ml.duration_s(t) for t in ("PT5M", "PT3600S", "P1DT12H", "PT1.5S", None, "soon", "P")] == [
        300, 3600, 129600, 1, None, None, None]
    items = recorded("azure/retail-prices-Standard_NC24ads_A100_v4-1.json")["Items"]
    assert azure_prices.retail_price(items) is None  # Windows, spot and low priority only
    page2 = recorded("azure/retail-prices-Standard_NC24ads_A100_v4-2.json")["Items"]
    assert azure_prices.retail_price(items + page2)["retailPrice"] == 3.673  # the latest of the two Linux prices



def test_eviction_policy_of_spot_machines_only():
    assert [azure_live.eviction(policy, spot) for policy, spot in (
        ("Deallocate", True), ("Delete", True), ("delete", True), ("Deallocate", False), (None, True),
        ("Hibernate", True))] == ["deallocate", "delete", "delete", None, None, None]


@pytest.mark.parametrize(("value", "words"), [
    ("Deallocate", "'Deallocate' is not one of deallocate, delete; did you mean 'deallocate'?"),
    ("hibernate", "'hibernate' is not one of deallocate, delete"),
    (1, "expected text, got a number 1"),
])
def test_an_eviction_policy_the_schema_does_not_know_is_one_error_line(tmp_path, value, words):
    repo = Path(__file__).resolve().parents[1]
    doc = json.loads((repo / "fixtures" / "demo" / "inventory.json").read_text(encoding="utf-8"))
    doc["assets"][1]["eviction_policy"] = "delete"  # a known value is kept
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps(doc), encoding="utf-8")
    assert load_snapshot(inventory)["assets"][1]["eviction_policy"] == "delete"
    assert load_snapshot(inventory)["assets"][0]["eviction_policy"] is None  # left out: null

    doc["assets"][0]["eviction_policy"] = value
    inventory.write_text(json.dumps(doc), encoding="utf-8")
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "-q", "--policy", str(policy), "--inventory", str(inventory),
                                      "--out", str(tmp_path / "r"), str(repo / "fixtures" / "billing" /
                                                                         "cur-gpu-spot.csv")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.stderr.strip().splitlines() == [
        f"gpu-auditor: error: {inventory}: assets[0].eviction_policy: {words}"]
    assert not (tmp_path / "r").exists()

"""`gpu-auditor pull --provider azure`: azure-mgmt-compute and azure-mgmt-costmanagement pointed at a loopback
server that answers with recorded responses shaped as the ARM APIs document them (`value`/`nextLink` lists, the
Query API's positional `columns`/`rows` with `nextLink`). The credential is a stand-in for DefaultAzureCredential
(its token is planted and must not be written)."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest
from azure.core.credentials import AccessToken
from click.testing import CliRunner
from servers.http_api import ApiServer, Request, recorded

from auditor.cli import cli
from auditor.providers import azure_live
from auditor.providers.snapshot import load_snapshot
from auditor.pull import PullOptions, pull_snapshot
from auditor.store import Window

SUB = "00000000-0000-0000-0000-0000000000a1"
TOKEN = "planted-azure-arm-token-do-not-write-91c2"
WINDOW = Window(datetime(2026, 10, 1), datetime(2026, 10, 4), "2026-10-01 to 2026-10-03")
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
clauses:
  tagging: {text: everything is tagged, required_tags: [team], min_cost: 10}
"""


class Credential:
    def __init__(self):
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.extend(scopes)
        return AccessToken(TOKEN, int(time.time()) + 3600)


class Arm:
    def __init__(self):
        self.bodies: list[dict] = []
        self.throttle_next = True

    def __call__(self, req: Request):
        base = f"http://{req.header('Host')}"
        if req.header("Authorization") != f"Bearer {TOKEN}":
            return 401, {"error": {"code": "AuthenticationFailed", "message": "Authentication failed."}}
        if req.path == f"/subscriptions/{SUB}/providers/Microsoft.Compute/virtualMachines":
            page = 2 if req.arg("$skiptoken") == "page2" else 1
            doc = json.loads(json.dumps(recorded(f"azure/virtualMachines-{page}.json")).replace("{base}", base))
            return 200, doc
        if req.path == f"/subscriptions/{SUB}/providers/Microsoft.CostManagement/query" and req.method == "POST":
            if self.throttle_next:  # Cost Management throttles often: 429 with x-ms-ratelimit headers
                self.throttle_next = False
                return 429, {"error": {"code": "429", "message": "Too many requests. Please retry."}}
            self.bodies.append(req.json())
            page = 2 if req.arg("$skiptoken") else 1
            return 200, json.loads(json.dumps(recorded(f"azure/query-{page}.json")).replace("{base}", base))
        return 404, {"error": {"code": "NotFound", "message": f"not recorded: {req.method} {req.path}"}}


@pytest.fixture
def arm(monkeypatch):
    with ApiServer(Arm()) as server:
        monkeypatch.setenv(azure_live.ENDPOINT_ENV, server.url)
        yield server


def pull(tmp_path, credential=None, **options):
    from auditor.pull import Retry

    opts = PullOptions("azure", WINDOW, **{"accounts": [SUB], **options})
    return pull_snapshot(opts, tmp_path / "snap", retry=Retry(delays=(0.0, 0.0)),
                         adapter=lambda p: azure_live.pull(p, credential=credential or Credential()))


def test_pull_then_audit_reads_vms_and_cost(arm, tmp_path):
    manifest = pull(tmp_path)
    assert manifest["failed"] == [] and manifest["retries"] == 1
    counts = {s["name"]: s["counts"] for s in manifest["sources"]}
    assert counts[f"azure:{SUB}:compute"] == {"vms": 4, "gpu_vms": 3}
    assert counts[f"azure:{SUB}:cost"] == {"pages": 2, "rows": 12}
    body = arm.handler.bodies[0]
    assert body["type"] == "ActualCost" and body["timeframe"] == "Custom"
    assert body["timePeriod"]["from"].startswith("2026-10-01T00:00:00")
    assert [g["name"] for g in body["dataset"]["grouping"]] == ["ResourceId", "Meter"]

    snap = tmp_path / "snap"
    inv = load_snapshot(snap / "inventory.json")
    assets = {a["name"]: a for a in inv["assets"]}
    assert set(assets) == {"vis-a100-train", "vis-t4-spot", "scratch-h100"}
    assert assets["vis-t4-spot"]["lifecycle"] == "spot"
    assert assets["vis-a100-train"]["instance_type"] == "Standard_NC24ads_A100_v4"
    assert assets["vis-a100-train"]["zone"] == "1" and assets["vis-a100-train"]["tags"]["team"] == "vision"

    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "r"), str(snap)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    assert doc["summary"]["billed_cost"] == {"USD": "785.35"}  # 3 days x (88.152 + 4.608 + 1.5048 + 167.52)
    untagged = {f["resource"] for f in doc["findings"] if f["rule"] == "TAG001"}
    h100 = f"/subscriptions/{SUB}/resourcegroups/ml-train/providers/microsoft.compute/virtualmachines/scratch-h100"
    assert h100 in untagged  # its VM has no tags; the tagged A100 VM's tags came from the inventory
    assert not [r for r in untagged if r.endswith("vis-a100-train")]
    for path in (p for p in snap.rglob("*") if p.is_file()):
        assert TOKEN not in path.read_text(), path


def test_refused_token_fails_both_sources(arm, tmp_path):
    class Wrong(Credential):
        def get_token(self, *scopes, **kwargs):
            return AccessToken("not-the-token", int(time.time()) + 3600)

    manifest = pull(tmp_path, Wrong())
    reasons = {f["name"]: f["reason"] for f in manifest["failed"]}
    assert set(reasons) == {f"azure:{SUB}:compute", f"azure:{SUB}:cost"}
    assert all("Authentication" in r for r in reasons.values())


def test_no_subscription(tmp_path, monkeypatch):
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    manifest = pull(tmp_path, accounts=[])
    assert {f["name"] for f in manifest["failed"]} == {"azure:compute", "azure:cost"}

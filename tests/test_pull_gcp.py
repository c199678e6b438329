"""`gpu-auditor pull --provider gcp`: Application Default Credentials (a service-account key whose token URI is
the loopback server), google-cloud-compute over its REST transport, BigQuery's REST API and Vertex AI's REST API,
all answered by a loopback server with recorded responses shaped as the APIs document them. Cloud Monitoring is
gRPC only: the adapter reads it through its `MetricsReader` seam, which this test fills with a fake."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from servers.http_api import ApiServer, Request, recorded

from auditor.cli import cli
from auditor.providers import gcp_live
from auditor.providers.snapshot import load_snapshot
from auditor.pull import PullOptions, pull_snapshot
from auditor.store import Window

TOKEN = "ya29.planted-gcp-access-token-do-not-write"
SINCE, UNTIL = datetime(2026, 10, 1), datetime(2026, 10, 4)
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
clauses:
  idle: {text: idle GPUs are stopped, max_mean_util_pct: 10, min_hours: 24}
"""


class Google:
    """OAuth token endpoint, Compute aggregated list (two pages), Vertex customJobs, BigQuery jobs.query and
    getQueryResults (rows in pages of 5)."""

    def __init__(self):
        self.rows = [json.dumps(r) for r in recorded("gcp/billing-export-rows.json")]
        self.queries: list[dict] = []

    def __call__(self, req: Request):
        if req.path == "/token":
            return 200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}
        if not self._authorised(req.header("Authorization") or ""):
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                   "status": "UNAUTHENTICATED"}}
        if req.path == "/compute/v1/projects/ml-prod/aggregated/instances":
            page = 2 if req.arg("pageToken") == "page-2" else 1
            return 200, recorded(f"gcp/instances-aggregated-{page}.json")
        if req.path == "/v1/projects/ml-prod/locations/us-central1/customJobs":
            return 200, recorded("gcp/customJobs.json")
        if req.path == "/bigquery/v2/projects/ml-prod/queries" and req.method == "POST":
            self.queries.append(req.json())
            return 200, self._rows(0)
        if req.path == "/bigquery/v2/projects/ml-prod/queries/job-1":
            return 200, self._rows(int(req.arg("pageToken") or 0))
        if req.path == "/bigquery/v2/projects/ml-prod/jobs/job-1":
            return 200, {"kind": "bigquery#job", "id": "ml-prod:US.job-1", "status": {"state": "DONE"},
                         "jobReference": {"projectId": "ml-prod", "jobId": "job-1", "location": "US"},
                         "configuration": {"query": {"query": "SELECT 1"}, "jobType": "QUERY"},
                         "statistics": {"creationTime": "1790000000000", "query": {"totalBytesProcessed": "1000"}}}
        return 404, {"error": {"code": 404, "message": f"not recorded: {req.method} {req.path}", "status": "NOT_FOUND"}}

    @staticmethod
    def _authorised(header: str) -> bool:
        """The access token from /token, or the self-signed JWT that Google's clients make from a service-account
        key (its signature is not checked here: the issuer must be the planted service account)."""
        token = header.removeprefix("Bearer ")
        if token == TOKEN:
            return True
        parts = token.split(".")
        if len(parts) != 3:
            return False
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return claims.get("iss") == "auditor@ml-prod.iam.gserviceaccount.com"

    def _rows(self, start: int) -> dict:
        page = self.rows[start:start + 5]
        doc = {"kind": "bigquery#getQueryResultsResponse", "jobComplete": True, "totalRows": str(len(self.rows)),
               "jobReference": {"projectId": "ml-prod", "jobId": "job-1", "location": "US"},
               "schema": {"fields": [{"name": "line", "type": "STRING", "mode": "NULLABLE"}]},
               "rows": [{"f": [{"v": line}]} for line in page]}
        if start + 5 < len(self.rows):
            doc["pageToken"] = str(start + 5)
        return doc


class FakeMonitoring:
    """Stands in for Cloud Monitoring (gRPC) at the adapter's MetricsReader seam: hourly aligned points."""

    def __init__(self):
        self.asked = []

    def gpu_series(self, project, start, end, period_s):
        self.asked.append((project, start, end, period_s))
        hours = int((end - start).total_seconds() // period_s)

        def series(values, gpus):
            return [[(start + timedelta(hours=h), values[h % len(values)]) for h in range(hours)] for _ in range(gpus)]

        gib = 2**30
        return {"1001": (series([1.5, 2.5], 8), series([3 * gib], 8)),
                "1002": (series([24.0, 30.0, 26.0], 1), series([10 * gib, 6 * gib], 1)),
                "1003": (series([91.0], 1), series([20 * gib], 1)),
                "9999": (series([50.0], 1), series([1 * gib], 1))}  # not a GPU instance of this pull


@pytest.fixture
def google(tmp_path, monkeypatch):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    with ApiServer(Google()) as server:
        adc = tmp_path / "adc.json"
        adc.write_text(json.dumps({
            "type": "service_account", "project_id": "ml-prod", "private_key_id": "k1", "private_key": pem,
            "client_email": "auditor@ml-prod.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": f"{server.url}/token"}))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
        monkeypatch.setenv(gcp_live.ENDPOINT_ENV, server.url)
        yield {"server": server, "pem": pem}


def pull(tmp_path, metrics=None, **options):
    opts = PullOptions("gcp", Window(SINCE, UNTIL, "2026-10-01 to 2026-10-03"), **options)
    return pull_snapshot(opts, tmp_path / "snap", adapter=lambda p: gcp_live.pull(p, metrics=metrics))


def test_pull_then_audit_finds_idle_oversized_and_spot_without_checkpoint(google, tmp_path):
    metrics = FakeMonitoring()
    manifest = pull(tmp_path, metrics, billing="ml-prod.billing.gcp_billing_export_resource_v1_01A2B3")
    assert manifest["failed"] == []
    counts = {s["name"]: s.get("counts") for s in manifest["sources"]}
    assert counts["gcp:ml-prod:compute"] == {"instances": 4, "gpu_instances": 3}
    assert counts["gcp:ml-prod:monitoring"] == {"gpu_usage": 3}
    assert counts["gcp:ml-prod:vertex:us-central1"] == {"custom_jobs": 3}
    assert counts["gcp:billing"] == {"rows": 12, "files": 1}
    assert metrics.asked == [("ml-prod", SINCE, UNTIL, 3600)]
    query = google["server"].handler.queries[0]
    assert "usage_start_time >= @start" in query["query"] and "resource" in query["query"]
    assert {p["name"]: p["parameterValue"]["value"] for p in query["queryParameters"]} == {
        "start": "2026-10-01T00:00:00Z", "end": "2026-10-04T00:00:00Z"}

    snap = tmp_path / "snap"
    inv = load_snapshot(snap / "inventory.json")
    assets = {a["id"]: a for a in inv["assets"]}
    assert set(assets) == {"1001", "1002", "1003"}
    assert (assets["1001"]["gpu_model"], assets["1001"]["gpu_count"], assets["1001"]["region"]) == ("A100", 8,
                                                                                                     "us-central1")
    assert assets["1003"]["lifecycle"] == "spot" and assets["1003"]["gpu_model"] == "L4"
    assert assets["1001"]["tags"] == {"team": "research", "owner": "li"}
    usage = {u["asset_id"]: u for u in inv["gpu_usage"]}
    assert usage["1002"]["peak_mem_gb"] == pytest.approx(10.0)
    jobs = {j["name"]: j for j in inv["jobs"]}
    assert jobs["llm-spot-nockpt"]["spot"] and jobs["llm-spot-nockpt"]["checkpoint_uri"] is None
    assert jobs["llm-spot-ckpt"]["checkpoint_uri"] == "gs://ml-prod-runs/llm-spot-ckpt/checkpoints/"
    assert jobs["llm-standard"]["spot"] is False and jobs["llm-standard"]["max_runtime_s"] == 86400
    billing = [f for f in manifest["files"] if f["path"].startswith("billing/gcp/")]
    assert len(billing) == 1 and billing[0]["path"].endswith(".jsonl")

    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "r"), str(snap)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    flagged = {(f["rule"], f["resource"]) for f in doc["findings"]}
    assert ("GPU001", "1001") in flagged
    assert ("GPU002", "1002") in flagged
    assert ("SPOT001", "projects/123456789/locations/us-central1/customJobs/501") in flagged
    assert ("SPOT001", "projects/123456789/locations/us-central1/customJobs/502") not in flagged
    idle = next(f for f in doc["findings"] if f["rule"] == "GPU001")
    assert idle["cost"] == "2015.13"  # three days of the idle A2's GPU and core lines, from the pulled export
    for path in (p for p in snap.rglob("*") if p.is_file()):
        text = path.read_text()
        assert TOKEN not in text and "PRIVATE KEY" not in text, path


def test_without_a_billing_table_or_with_monitoring_down_the_pull_is_partial(google, tmp_path):
    class Down:
        def gpu_series(self, *args):
            raise ConnectionError("monitoring.googleapis.com:443: connection refused")

    manifest = pull(tmp_path, Down())
    failed = {f["name"]: f["reason"] for f in manifest["failed"]}
    assert set(failed) == {"gcp:billing", "gcp:ml-prod:monitoring"}
    assert "--billing-uri" in failed["gcp:billing"]
    assert len(load_snapshot(tmp_path / "snap" / "inventory.json")["assets"]) == 3


def test_no_application_default_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    manifest = pull(tmp_path)
    assert {f["name"] for f in manifest["failed"]} == {"gcp:billing", "gcp:compute"}
    assert all("Application Default Credentials" in f["reason"] for f in manifest["failed"])

"""`gpu-auditor pull --provider gcp`: Application Default Credentials (a service-account key whose token URI is
the loopback server), google-cloud-compute and google-cloud-billing over their REST transports, BigQuery's REST
API and Vertex AI's REST API, all answered by a loopback HTTP server with recorded responses shaped as the APIs
document them; and google-cloud-monitoring's gRPC client against a loopback gRPC server that answers
ListTimeSeries with recorded Ops Agent series (NVML and DCGM), but only for the queries the audit needs."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.cloud import monitoring_v3
from servers.grpc_monitoring import MonitoringServer, Refuse, recorded_time_series
from servers.http_api import ApiServer, Request, recorded

from auditor.cli import cli
from auditor.providers.live import gcp as gcp_live
from auditor.providers.live import gcp_monitoring
from auditor.providers.live.pull import PullOptions, Retry, pull_snapshot, source_line
from auditor.providers.live.snapshot import load_snapshot
from auditor.window import Window

TOKEN = "ya29.planted-gcp-access-token-do-not-write"
SINCE, UNTIL = datetime(2026, 10, 1), datetime(2026, 10, 4)
BILLING = "ml-prod.billing.gcp_billing_export_resource_v1_01A2B3"
POLICY = """policy: test
version: "1"
owner: finops@example.com
currency: USD
clauses:
  idle: {text: idle GPUs are stopped, max_mean_util_pct: 10, min_hours: 24}
"""


def authorised(header: str) -> bool:
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


class Google:
    """OAuth token endpoint, Compute aggregated list (two pages), Vertex customJobs, BigQuery jobs.query and
    getQueryResults (rows in pages of 5), Cloud Billing Catalog services.skus.list (two pages). `instances_page_2`
    names the recorded second page of instances (the one with a DCGM-only VM too, for the DCGM test)."""

    def __init__(self):
        self.instances_page_2 = "gcp/instances-aggregated-2.json"
        self.rows = [json.dumps(r) for r in recorded("gcp/billing-export-rows.json")]
        self.queries: list[dict] = []
        self.sku_pages: list[dict] = []
        self.refuse_skus = False

    def __call__(self, req: Request):
        if req.path == "/token":
            return 200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}
        if not authorised(req.header("Authorization") or ""):
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                   "status": "UNAUTHENTICATED"}}
        if req.path == "/compute/v1/projects/ml-prod/aggregated/instances":
            if req.arg("pageToken") == "page-2":
                return 200, recorded(self.instances_page_2)
            return 200, recorded("gcp/instances-aggregated-1.json")
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
        if req.path == "/v1/services/6F81-5844-456A/skus" and req.method == "GET":
            if self.refuse_skus:
                return 403, {"error": {"code": 403, "status": "PERMISSION_DENIED", "message":
                                       "Cloud Billing API has not been used in project ml-prod or it is disabled."}}
            self.sku_pages.append({k: v[0] for k, v in req.query.items()})
            if req.arg("currencyCode") != "USD":
                return 400, {"error": {"code": 400, "message": "currencyCode", "status": "INVALID_ARGUMENT"}}
            return 200, recorded(f"gcp/skus-{2 if req.arg('pageToken') == 'skus-page-2' else 1}.json")
        return 404, {"error": {"code": 404, "message": f"not recorded: {req.method} {req.path}", "status": "NOT_FOUND"}}

    def _rows(self, start: int) -> dict:
        page = self.rows[start:start + 5]
        doc = {"kind": "bigquery#getQueryResultsResponse", "jobComplete": True, "totalRows": str(len(self.rows)),
               "jobReference": {"projectId": "ml-prod", "jobId": "job-1", "location": "US"},
               "schema": {"fields": [{"name": "line", "type": "STRING", "mode": "NULLABLE"}]},
               "rows": [{"f": [{"v": line}]} for line in page]}
        if start + 5 < len(self.rows):
            doc["pageToken"] = str(start + 5)
        return doc


class Monitoring:
    """Cloud Monitoring's ListTimeSeries: the recorded Ops Agent GPU series (NVML: two pages per metric; DCGM
    version 2: one page per metric, asked only for instances without NVML series), answered only
    to the query the audit needs (project, filter, interval, hourly alignment); any other is INVALID_ARGUMENT,
    so a wrong query fails the pull. `refuse` answers every call with that status; `throttle` answers the first
    call RESOURCE_EXHAUSTED."""

    QUERIES = {  # filter -> (recorded file stem, per-series aligner)
        'metric.type = "agent.googleapis.com/gpu/utilization" AND resource.type = "gce_instance"':
            ("utilization", "ALIGN_MEAN"),
        'metric.type = "agent.googleapis.com/gpu/memory/bytes_used" AND resource.type = "gce_instance" '
        'AND metric.labels.memory_state = "used"': ("memory", "ALIGN_MAX"),
        'metric.type = "workload.googleapis.com/gpu.dcgm.utilization" AND resource.type = "gce_instance"':
            ("dcgm-utilization", "ALIGN_MEAN"),
        'metric.type = "workload.googleapis.com/gpu.dcgm.memory.bytes_used" AND resource.type = "gce_instance" '
        'AND metric.labels.state = "used"': ("dcgm-memory", "ALIGN_MAX"),
    }

    def __init__(self):
        self.refuse: tuple[grpc.StatusCode, str] | None = None
        self.throttle = False
        self.calls = 0

    def __call__(self, req: monitoring_v3.ListTimeSeriesRequest, metadata: dict[str, str]):
        self.calls += 1
        if not authorised(metadata.get("authorization", "")):
            raise Refuse(grpc.StatusCode.UNAUTHENTICATED, "Request had invalid authentication credentials.")
        if self.refuse:
            raise Refuse(*self.refuse)
        if self.throttle and self.calls == 1:
            raise Refuse(grpc.StatusCode.RESOURCE_EXHAUSTED, "Quota exceeded for quota metric 'Time series "
                         "queries' and limit 'Time series queries per minute' of service 'monitoring.googleapis.com'")
        stem, aligner = self.QUERIES.get(req.filter, (None, None))
        wrong = [what for what, ok in (
            (f"filter {req.filter!r}", stem is not None),
            (f"name {req.name!r}", req.name == "projects/ml-prod"),
            (f"interval {req.interval}", (req.interval.start_time, req.interval.end_time) ==
             (SINCE.replace(tzinfo=UTC), UNTIL.replace(tzinfo=UTC))),
            (f"aggregation {req.aggregation}", req.aggregation.alignment_period == timedelta(hours=1)
             and req.aggregation.per_series_aligner.name == aligner),
            (f"view {req.view}", req.view == monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL),
            (f"page_token {req.page_token!r}", req.page_token in ("", f"{stem}-page-2")),
        ) if not ok]
        if wrong:
            raise Refuse(grpc.StatusCode.INVALID_ARGUMENT, f"not recorded: {'; '.join(wrong)}")
        return recorded_time_series(f"gcp/timeSeries-gpu-{stem}-{2 if req.page_token else 1}.json")


@pytest.fixture
def google(tmp_path, monkeypatch):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    with ApiServer(Google()) as server, MonitoringServer(Monitoring()) as monitoring:
        adc = tmp_path / "adc.json"
        adc.write_text(json.dumps({
            "type": "service_account", "project_id": "ml-prod", "private_key_id": "k1", "private_key": pem,
            "client_email": "auditor@ml-prod.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": f"{server.url}/token"}))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
        monkeypatch.setenv(gcp_live.ENDPOINT_ENV, server.url)
        monkeypatch.setenv(gcp_monitoring.MONITORING_ENDPOINT_ENV, monitoring.address)
        yield {"server": server, "api": server.handler, "monitoring": monitoring.handler,
               "monitoring_requests": monitoring.requests}


def pull(tmp_path, retry=None, **options):
    opts = PullOptions("gcp", Window(SINCE, UNTIL, "2026-10-01 to 2026-10-03"), **options)
    return pull_snapshot(opts, tmp_path / "snap", retry=retry)  # the adapter as `gpu-auditor pull` loads it


def audit(tmp_path):
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "r"),
                                      str(tmp_path / "snap")], catch_exceptions=False)
    doc = json.loads((tmp_path / "r" / "audit.json").read_text())
    return result, doc, {(f["rule"], f["resource"]) for f in doc["findings"]}


@pytest.mark.heavy
def test_pull_then_audit_finds_idle_oversized_and_spot_without_checkpoint(google, tmp_path):
    google["monitoring"].throttle = True
    sleeps: list[float] = []
    manifest = pull(tmp_path, Retry(sleep=sleeps.append), billing=BILLING, prices=True)
    assert manifest["failed"] == []
    counts = {s["name"]: s.get("counts") for s in manifest["sources"]}
    assert counts["gcp:ml-prod:compute"] == {"instances": 4, "gpu_instances": 3}
    assert counts["gcp:ml-prod:monitoring"] == {"gpu_usage": 3}
    assert counts["gcp:ml-prod:vertex:us-central1"] == {"custom_jobs": 3}
    assert counts["gcp:ml-prod:prices"] == {"prices": 4}
    assert counts["gcp:billing"] == {"rows": 12, "files": 1}
    assert manifest["retries"] == 1 and sleeps == [1.0]  # RESOURCE_EXHAUSTED over gRPC is backed off and retried
    # gRPC: one throttled call, then both metrics, each followed to its second page.
    asked = [(r.filter.split('"')[1], r.page_token) for r in google["monitoring_requests"]]
    assert asked == [("agent.googleapis.com/gpu/utilization", "")] * 2 + [
        ("agent.googleapis.com/gpu/utilization", "utilization-page-2"),
        ("agent.googleapis.com/gpu/memory/bytes_used", ""),
        ("agent.googleapis.com/gpu/memory/bytes_used", "memory-page-2")]
    assert [(q.get("pageToken"), q["pageSize"]) for q in google["api"].sku_pages] == [(None, "5000"),
                                                                                      ("skus-page-2", "5000")]
    query = google["api"].queries[0]
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
    written = json.loads((snap / "inventory.json").read_text())["assets"]
    # the Spot VM's instanceTerminationAction STOP; the standard VMs have none
    assert {a["id"]: a["eviction_policy"] for a in written} == {"1001": None, "1002": None, "1003": "deallocate"}
    assert assets["1001"]["tags"] == {"team": "research", "owner": "li"}
    # Hourly points over the whole window (each aligned point counted from its period's start), averaged over the
    # machine's GPUs; memory is the fullest GPU's peak of the "used" series; 9999 is not an instance of the pull.
    usage = {u["asset_id"]: u for u in inv["gpu_usage"]}
    assert set(usage) == {"1001", "1002", "1003"}
    assert all((u["window_start"], u["window_end"], u["samples"], u["source"]) == (
        SINCE, UNTIL, 72, "cloud-monitoring:agent.googleapis.com/gpu") for u in usage.values())
    assert (usage["1001"]["mean_util_pct"], usage["1001"]["p95_util_pct"], usage["1001"]["peak_mem_gb"]) == (
        1.5, 2.0, 3.5)
    assert (usage["1002"]["mean_util_pct"], usage["1002"]["p95_util_pct"], usage["1002"]["peak_mem_gb"]) == (
        pytest.approx(26.667), 30.0, 10.0)
    assert (usage["1003"]["mean_util_pct"], usage["1003"]["peak_mem_gb"]) == (91.0, 20.0)
    # Per-GPU prices of the GPU models seen (A100, L4) in the region seen, on demand and Spot, from the second
    # page too; commitments, other regions, other models and the Virtual Workstation SKU are left out.
    prices = {(x["instance_type"], x["region"]): x for x in inv["prices"]}
    assert {k: x["price_per_hour"] for k, x in prices.items()} == {
        ("gpu:A100", "us-central1"): "2.933908", ("gpu:A100:spot", "us-central1"): "1.1472",
        ("gpu:L4", "us-central1"): "0.56004", ("gpu:L4:spot", "us-central1"): "0.2231"}
    assert {x["provider"] for x in inv["prices"]} == {"gcp"} and {x["currency"] for x in inv["prices"]} == {"USD"}
    assert prices[("gpu:A100:spot", "us-central1")]["source"] == (
        'Cloud Billing Catalog API, SKU 0A10-0000-0002 "Spot Preemptible Nvidia Tesla A100 GPU running in Americas", '
        "per GPU")
    jobs = {j["name"]: j for j in inv["jobs"]}
    assert jobs["llm-spot-nockpt"]["spot"] and jobs["llm-spot-nockpt"]["checkpoint_uri"] is None
    assert jobs["llm-spot-ckpt"]["checkpoint_uri"] == "gs://ml-prod-runs/llm-spot-ckpt/checkpoints/"
    assert jobs["llm-standard"]["spot"] is False and jobs["llm-standard"]["max_runtime_s"] == 86400
    billing = [f for f in manifest["files"] if f["path"].startswith("billing/gcp/")]
    assert len(billing) == 1 and billing[0]["path"].endswith(".jsonl")

    result, doc, flagged = audit(tmp_path)
    assert result.exit_code == 0, result.output
    assert ("GPU001", "1001") in flagged
    assert ("GPU002", "1002") in flagged
    assert ("SPOT001", "projects/123456789/locations/us-central1/customJobs/501") in flagged
    assert ("SPOT001", "projects/123456789/locations/us-central1/customJobs/502") not in flagged
    assert not {r for r, res in flagged if res == "1003"} & {"GPU001", "GPU002"}  # the busy L4 is fine
    idle = next(f for f in doc["findings"] if f["rule"] == "GPU001")
    assert idle["cost"] == "2015.13"  # three days of the idle A2's GPU and core lines, from the pulled export
    for path in (p for p in snap.rglob("*") if p.is_file()):
        text = path.read_text()
        assert TOKEN not in text and "PRIVATE KEY" not in text, path


@pytest.mark.heavy
def test_a_dcgm_only_instance_is_read_from_the_dcgm_metrics_and_audited_like_the_others(google, tmp_path):
    google["api"].instances_page_2 = "gcp/instances-aggregated-2-dcgm.json"  # adds 1005, a 2x L4 G2 VM
    manifest = pull(tmp_path, billing=BILLING)
    assert manifest["failed"] == []
    counts = {s["name"]: s.get("counts") for s in manifest["sources"]}
    assert counts["gcp:ml-prod:compute"] == {"instances": 5, "gpu_instances": 4}
    assert counts["gcp:ml-prod:monitoring"] == {"gpu_usage": 4}
    # NVML first, both pages of both metrics; then DCGM, only because 1005 had no NVML series
    asked = [(r.filter.split('"')[1], r.page_token) for r in google["monitoring_requests"]]
    assert asked == [("agent.googleapis.com/gpu/utilization", ""),
                     ("agent.googleapis.com/gpu/utilization", "utilization-page-2"),
                     ("agent.googleapis.com/gpu/memory/bytes_used", ""),
                     ("agent.googleapis.com/gpu/memory/bytes_used", "memory-page-2"),
                     ("workload.googleapis.com/gpu.dcgm.utilization", ""),
                     ("workload.googleapis.com/gpu.dcgm.memory.bytes_used", "")]
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    asset = next(a for a in inv["assets"] if a["id"] == "1005")
    assert (asset["instance_type"], asset["gpu_model"], asset["gpu_count"]) == ("g2-standard-24", "L4", 2)
    usage = {u["asset_id"]: u for u in inv["gpu_usage"]}
    # DCGM utilisation is a fraction: GPU 0 at 0.03 all along, GPU 1 at 0.01 and 0.05 by turns, so the machine
    # averaged 2% and 4% by turns; memory is bytes, GPU 1's 2 GiB hour the peak.
    assert usage["1005"] == {"asset_id": "1005", "window_start": SINCE, "window_end": UNTIL, "samples": 72,
                             "mean_util_pct": 3.0, "p95_util_pct": 4.0, "peak_mem_gb": 2.0,
                             "source": "cloud-monitoring:workload.googleapis.com/gpu.dcgm"}
    # 1001 has both families: its NVML series win, its busy DCGM series (90%, 40 GiB) are not mixed in
    assert (usage["1001"]["mean_util_pct"], usage["1001"]["peak_mem_gb"], usage["1001"]["source"]) == (
        1.5, 3.5, "cloud-monitoring:agent.googleapis.com/gpu")

    result, doc, flagged = audit(tmp_path)
    assert result.exit_code == 0, result.output
    assert {("GPU001", "1001"), ("GPU001", "1005"), ("GPU002", "1002")} <= flagged
    idle = next(f for f in doc["findings"] if f["rule"] == "GPU001" and f["resource"] == "1005")
    assert idle["evidence"]["mean_util_pct"] == 3.0 and idle["evidence"]["usage_hours"] == 72.0


@pytest.mark.heavy
def test_monitoring_permission_denied_is_a_failed_source_and_the_audit_is_partial(google, tmp_path):
    google["monitoring"].refuse = (grpc.StatusCode.PERMISSION_DENIED,
                                   "Permission monitoring.timeSeries.list denied (or the resource may not exist).")
    snap = tmp_path / "snap"
    result = CliRunner().invoke(cli, ["pull", "--provider", "gcp", "--since", "2026-10-01", "--until", "2026-10-04",
                                      "--billing-uri", BILLING, "--prices", "--out", str(snap)],
                                catch_exceptions=False)
    assert result.exit_code == 3, result.output
    manifest = json.loads((snap / "manifest.json").read_text())
    assert [f["name"] for f in manifest["failed"]] == ["gcp:ml-prod:monitoring"]
    reason = manifest["failed"][0]["reason"]
    assert reason.startswith("PermissionDenied: 403") and "monitoring.timeSeries.list denied" in reason
    assert google["monitoring"].calls == 1  # a refusal is not retried
    inv = load_snapshot(snap / "inventory.json")
    assert inv["gpu_usage"] == [] and len(inv["assets"]) == 3 and len(inv["prices"]) == 4  # the rest completed

    audited, doc, flagged = audit(tmp_path)
    assert audited.exit_code == 3, audited.output
    assert "gcp:ml-prod:monitoring" in audited.stderr and "partial" in audited.stderr
    assert doc["partial"] is True
    assert ("SPOT001", "projects/123456789/locations/us-central1/customJobs/501") in flagged
    assert not any(rule == "GPU001" for rule, _ in flagged)  # no utilisation, no idle verdict


@pytest.mark.heavy
def test_the_price_catalog_fails_on_its_own(google, tmp_path):
    google["api"].refuse_skus = True
    manifest = pull(tmp_path, billing=BILLING, prices=True)
    assert [f["name"] for f in manifest["failed"]] == ["gcp:ml-prod:prices"]
    assert "403" in manifest["failed"][0]["reason"] and "Cloud Billing API" in manifest["failed"][0]["reason"]
    inv = load_snapshot(tmp_path / "snap" / "inventory.json")
    assert inv["prices"] == [] and len(inv["gpu_usage"]) == 3 and len(inv["jobs"]) == 3


@pytest.mark.heavy
def test_without_prices_or_a_billing_table_neither_is_asked(google, tmp_path):
    manifest = pull(tmp_path)
    failed = {f["name"]: f["reason"] for f in manifest["failed"]}
    assert set(failed) == {"gcp:billing"} and "--billing-uri" in failed["gcp:billing"]
    assert "gcp:ml-prod:prices" not in {s["name"] for s in manifest["sources"]}
    assert google["api"].sku_pages == [] and google["api"].queries == []
    assert len(load_snapshot(tmp_path / "snap" / "inventory.json")["gpu_usage"]) == 3


def test_no_application_default_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    manifest = pull(tmp_path)
    assert {f["name"] for f in manifest["failed"]} == {"gcp:billing", "gcp:compute"}
    assert all("Application Default Credentials" in f["reason"] for f in manifest["failed"])


def test_a_billing_row_without_a_cost_fails_the_billing_source_and_writes_no_cost(google, tmp_path):
    rows = [json.loads(r) for r in google["api"].rows]
    rows[3]["cost"] = None  # a blank cost, as an export row may carry one
    google["api"].rows = [json.dumps(r) for r in rows]
    manifest = pull(tmp_path, billing=BILLING)
    reason = {f["name"]: f["reason"] for f in manifest["failed"]}["gcp:billing"]
    assert reason.startswith("UnreadableAnswer: 1 of the 12 billing rows of ") and "no cost was written" in reason
    assert not list((tmp_path / "snap").rglob("*.jsonl"))
    ok = next(s for s in json.loads((tmp_path / "snap" / "manifest.json").read_text())["sources"]
              if s["name"] == "gcp:ml-prod:compute")
    assert ok["status"] == "ok"  # the others go on


@pytest.mark.heavy
def test_the_billing_line_says_what_it_checked(google, tmp_path):
    manifest = pull(tmp_path, billing=BILLING)
    billing = next(s for s in manifest["sources"] if s["name"] == "gcp:billing")
    assert source_line(billing) == "rows 12, files 1; checked: every row has a numeric cost, a currency and a " \
                                   "usage start time"

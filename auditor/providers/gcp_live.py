"""Live Google Cloud for `gpu-auditor pull` (Application Default Credentials).

Sources, each recorded in the snapshot manifest on its own, per project (`--account`, default: ADC's project):
- `gcp:billing`: the Cloud Billing export from BigQuery (`--billing-uri project.dataset.table`), only the
  columns the audit reads and only the window's rows, written as newline-delimited JSON.
- `gcp:<project>:compute`: instances with guest accelerators or a GPU machine family (A2, A3, G2, ...), SPOT
  or preemptible (google-cloud-compute, REST transport).
- `gcp:<project>:monitoring`: GPU utilisation and memory from Cloud Monitoring (Ops Agent metrics). The Cloud
  Monitoring client is gRPC only, so it sits behind the small `MetricsReader` seam: `CloudMonitoring` is the
  real one (google-cloud-monitoring), and the tests give a fake in its place.
- `gcp:<project>:vertex:<region>`: Vertex AI custom jobs (spot scheduling strategy, base output directory),
  read from the Vertex REST API through the authorised session, so the large aiplatform SDK is not needed.

`GPU_AUDITOR_GCP_ENDPOINT` (a base URL) sends every call to one endpoint instead of Google's: a private
endpoint, or the tests' loopback server. Not done yet: GPU SKU prices from the Cloud Billing Catalog.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from typing import Any, Protocol

import google.auth
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth.exceptions import GoogleAuthError
from google.auth.transport.requests import AuthorizedSession

from auditor.pull import Pull, gpu_model, iso, pages, usage_summary, utc

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
PAGE = 500
PERIOD = 3600
GPU_FAMILIES = re.compile(r"^(a2|a3|a4|g2|g4)-")
ENDPOINT_ENV = "GPU_AUDITOR_GCP_ENDPOINT"
BILLING_COLUMNS = ("billing_account_id", "service", "sku", "usage_start_time", "usage_end_time", "project",
                   "labels", "system_labels", "location", "cost", "currency", "usage", "credits", "cost_type")


def throttled(e: BaseException) -> bool:
    if isinstance(e, gexc.TooManyRequests | gexc.ServiceUnavailable):
        return True
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None) in (429, 503)


class MetricsReader(Protocol):
    """GPU series of a project's instances: {instance id: (per-GPU utilisation series in percent, per-GPU memory
    used series in bytes)}, each series a list of (time, value), one point per aligned period."""

    def gpu_series(self, project: str, start: datetime, end: datetime,
                   period_s: int) -> dict[str, tuple[list[list], list[list]]]: ...


class CloudMonitoring:
    """The real reader: `list_time_series` over the Ops Agent's GPU metrics, aligned to `period_s`."""

    METRICS = {"util": ("agent.googleapis.com/gpu/utilization", "ALIGN_MEAN"),
               "mem": ("agent.googleapis.com/gpu/memory/bytes_used", "ALIGN_MAX")}

    def __init__(self, credentials):
        self.credentials = credentials

    def gpu_series(self, project, start, end, period_s):
        from google.cloud import monitoring_v3  # gRPC only; imported here, installed by the gcp extra

        client = monitoring_v3.MetricServiceClient(credentials=self.credentials)
        interval = monitoring_v3.TimeInterval(start_time=start, end_time=end)
        out: dict[str, tuple[list, list]] = {}
        for i, (metric, aligner) in enumerate(self.METRICS.values()):
            aggregation = monitoring_v3.Aggregation(alignment_period={"seconds": period_s},
                                                    per_series_aligner=getattr(monitoring_v3.Aggregation.Aligner,
                                                                               aligner))
            for ts in client.list_time_series(request={
                    "name": f"projects/{project}", "interval": interval, "aggregation": aggregation,
                    "filter": f'metric.type = "{metric}" AND resource.type = "gce_instance"',
                    "view": monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL}):
                iid = ts.resource.labels.get("instance_id")
                points = [(pt.interval.end_time, pt.value.double_value or float(pt.value.int64_value))
                          for pt in ts.points]
                out.setdefault(iid, ([], []))[i].append(points)
        return out


def pull(p: Pull, metrics: MetricsReader | None = None) -> None:
    o = p.options
    try:
        credentials, default_project = google.auth.default(scopes=SCOPES)
    except GoogleAuthError as e:
        reason = f"no Google Application Default Credentials: {p.redact(str(e))}"
        for name, kind in (("gcp:billing", "billing"), ("gcp:compute", "inventory")):
            p.fail(name, kind, reason)
        return
    endpoint = os.environ.get(ENDPOINT_ENV)
    session = AuthorizedSession(credentials)
    projects = o.accounts or ([default_project] if default_project else [])
    if not projects:
        p.fail("gcp:compute", "inventory", "no project: name one with --account PROJECT_ID")
    metrics = metrics or CloudMonitoring(credentials)
    try:
        for project in projects:
            if p.run(f"gcp:{project}:compute", "inventory", lambda pr=project: _compute(p, credentials, endpoint, pr)):
                p.run(f"gcp:{project}:monitoring", "metrics", lambda pr=project: _monitoring(p, metrics, pr))
            for region in o.regions or ["us-central1"]:
                p.run(f"gcp:{project}:vertex:{region}", "jobs",
                      lambda pr=project, r=region: _vertex(p, session, endpoint, pr, r))
        if o.billing:
            p.run("gcp:billing", "billing", lambda: _billing(p, credentials, endpoint, projects))
        else:
            p.fail("gcp:billing", "billing", "no billing export named: use --billing-uri project.dataset.table")
    finally:
        p.secret(getattr(credentials, "token", None))


# ---- Compute Engine ------------------------------------------------------------------------------------------

def _compute(p: Pull, credentials, endpoint: str | None, project: str) -> dict[str, int]:
    from google.cloud import compute_v1

    options = ClientOptions(api_endpoint=endpoint) if endpoint else None
    client = compute_v1.InstancesClient(credentials=credentials, transport="rest", client_options=options)

    def one_page(**request):
        return next(iter(client.aggregated_list(request=request).pages))

    seen = found = 0
    for page in pages(one_page, p.retry, throttled, token_in="page_token", token_out="next_page_token",
                      project=project, max_results=PAGE):
        for scope, scoped in page.items.items():
            for i in scoped.instances:
                seen += 1
                machine = i.machine_type.rsplit("/", 1)[-1]
                accelerators = list(i.guest_accelerators)
                if not accelerators and not GPU_FAMILIES.match(machine):
                    continue
                found += 1
                zone = i.zone.rsplit("/", 1)[-1] or scope.removeprefix("zones/")
                kind = accelerators[0].accelerator_type.rsplit("/", 1)[-1] if accelerators else None
                sched = i.scheduling
                spot = sched.provisioning_model == "SPOT" or bool(sched.preemptible)
                p.assets.append({
                    "id": str(i.id), "provider": "gcp", "account": project, "region": zone.rsplit("-", 1)[0],
                    "zone": zone, "name": i.name, "kind": "vm", "instance_type": machine,
                    "gpu_model": gpu_model(kind) if kind else None,
                    "gpu_count": sum(a.accelerator_count for a in accelerators) or None,
                    "lifecycle": "spot" if spot else "on_demand", "state": i.status.lower() or None,
                    "launch_time": iso(utc(i.creation_timestamp)) if i.creation_timestamp else None,
                    "tags": dict(i.labels),
                })
    return {"instances": seen, "gpu_instances": found}


def _monitoring(p: Pull, metrics: MetricsReader, project: str) -> dict[str, int]:
    ids = {a["id"] for a in p.assets if a["provider"] == "gcp" and a["account"] == project}
    if not ids:
        return {"gpu_usage": 0}
    w = p.options.window
    series = p.retry.call(metrics.gpu_series, project, w.start, w.end, PERIOD, throttled=throttled)
    added = 0
    for iid, (util, mem) in sorted(series.items()):
        if iid not in ids:
            continue
        usage = usage_summary(iid, util, mem, PERIOD, "cloud-monitoring", memory_scale=1 / 2**30)
        if usage:
            p.gpu_usage.append(usage)
            added += 1
    return {"gpu_usage": added}


# ---- Vertex AI custom jobs (REST) --------------------------------------------------------------------------

def _vertex(p: Pull, session: AuthorizedSession, endpoint: str | None, project: str, region: str) -> dict[str, int]:
    base = (endpoint or f"https://{region}-aiplatform.googleapis.com").rstrip("/")
    url = f"{base}/v1/projects/{project}/locations/{region}/customJobs"
    w = p.options.window

    def get(**params) -> dict:
        r = session.get(url, params=params, timeout=60)
        r.raise_for_status()
        return r.json()

    count = 0
    for page in pages(get, p.retry, throttled, token_in="pageToken", token_out="nextPageToken", pageSize=100,
                      filter=f'create_time<"{iso(w.end)}"'):
        for job in page.get("customJobs", []):
            end = utc(job.get("endTime"))
            if end and end < w.start:
                continue
            p.jobs.append(vertex_job(job, project, region))
            count += 1
    return {"custom_jobs": count}


def vertex_job(job: dict[str, Any], project: str, region: str) -> dict[str, Any]:
    spec = job.get("jobSpec", {})
    pools = [w for w in spec.get("workerPoolSpecs", []) if w]
    machine = pools[0].get("machineSpec", {}) if pools else {}
    sched = spec.get("scheduling", {})
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    checkpoint = f"{base.rstrip('/')}/checkpoints/" if base else None  # Vertex sets AIP_CHECKPOINT_DIR there
    for pool in pools:
        for env in (pool.get("containerSpec") or {}).get("env", []):
            if re.search(r"(?i)checkpoint|ckpt", env.get("name", "")) and "://" in env.get("value", ""):
                checkpoint = checkpoint or env["value"]
    timeout = sched.get("timeout")
    return {
        "id": job["name"], "platform": "vertex-ai", "provider": "gcp", "account": project, "region": region,
        "name": job.get("displayName"), "state": job.get("state", "").removeprefix("JOB_STATE_").lower() or None,
        "instance_type": machine.get("machineType"),
        "instance_count": sum(int(w.get("replicaCount", 1)) for w in pools) or 1,
        "gpu_model": gpu_model(machine.get("acceleratorType")), "gpu_count": machine.get("acceleratorCount"),
        "spot": sched.get("strategy") == "SPOT", "checkpoint_uri": checkpoint,
        "max_runtime_s": int(float(timeout.rstrip("s"))) if timeout else None,
        "max_wait_s": int(float(sched["maxWaitDuration"].rstrip("s"))) if sched.get("maxWaitDuration") else None,
        "start_time": iso(utc(job.get("startTime") or job.get("createTime"))), "end_time": iso(utc(job.get("endTime"))),
        "tags": job.get("labels", {}),
    }


# ---- the BigQuery billing export ------------------------------------------------------------------------------

def _billing(p: Pull, credentials, endpoint: str | None, projects: list[str]) -> dict[str, int]:
    from google.cloud import bigquery

    table = p.options.billing
    if not re.fullmatch(r"[\w.-]+\.\w+\.\w+", table or ""):
        raise ValueError(f"--billing-uri {table!r}: name the export table as project.dataset.table")
    columns = BILLING_COLUMNS + (("resource",) if "resource_v1" in table else ())
    client = bigquery.Client(project=table.split(".")[0] if not projects else projects[0], credentials=credentials,
                             client_options=ClientOptions(api_endpoint=endpoint) if endpoint else None)
    w = p.options.window
    sql = (f"SELECT TO_JSON_STRING(STRUCT({', '.join(columns)})) AS line FROM `{table}` "
           "WHERE usage_start_time >= @start AND usage_start_time < @end")
    config = bigquery.QueryJobConfig(query_parameters=[
        bigquery.ScalarQueryParameter("start", "TIMESTAMP", w.start.isoformat() + "Z"),
        bigquery.ScalarQueryParameter("end", "TIMESTAMP", w.end.isoformat() + "Z")])
    rows = p.retry.call(client.query_and_wait, sql, job_config=config, page_size=PAGE, throttled=throttled)
    target = p.billing_path(f"gcp/{table}/{w.start:%Y%m%d}-{w.end:%Y%m%d}.jsonl")
    written = 0
    with open(target, "w", encoding="utf-8") as f:
        for page in rows.pages:  # each row is already one JSON line, made by BigQuery: written as it comes
            lines = [row[0] for row in page]
            f.write("".join(line + "\n" for line in lines))
            written += len(lines)
    if not written:
        target.unlink()
        raise LookupError(f"no billing rows in {table} for {w.label}")
    return {"rows": written, "files": 1}


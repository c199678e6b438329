"""Live Google Cloud for `gpu-auditor pull` (Application Default Credentials).

Sources, each recorded in the snapshot manifest on its own, per project (`--account`, default: ADC's project):
- `gcp:billing`: the Cloud Billing export from BigQuery (`--billing-uri project.dataset.table`), only the
  columns the audit reads and only the window's rows, written as newline-delimited JSON.
- `gcp:<project>:compute`: instances with guest accelerators or a GPU machine family (A2, A3, G2, ...), SPOT
  or preemptible (google-cloud-compute, REST transport); for those, `scheduling.instanceTerminationAction` as
  the eviction policy (STOP: deallocate, DELETE: delete; not known when the response leaves it out).
- `gcp:<project>:monitoring`: GPU utilisation and memory used from Cloud Monitoring (google-cloud-monitoring,
  gRPC: the only transport it has), one series per GPU, utilisation as the hourly mean and memory as the hourly
  max. First the Ops Agent's NVML metrics, `agent.googleapis.com/gpu/utilization` (percent) and
  `agent.googleapis.com/gpu/memory/bytes_used` with `memory_state = "used"`; then, for the GPU instances that
  have none, the Ops Agent DCGM receiver's (version 2) `workload.googleapis.com/gpu.dcgm.utilization` (a
  fraction, turned into percent) and `workload.googleapis.com/gpu.dcgm.memory.bytes_used` with `state = "used"`.
  Each `gpu_usage` row's `source` names the family it came from: `cloud-monitoring:agent.googleapis.com/gpu` or
  `cloud-monitoring:workload.googleapis.com/gpu.dcgm`.
- `gcp:<project>:vertex:<region>`: Vertex AI custom jobs (spot scheduling strategy, base output directory),
  read from the Vertex REST API through the authorised session, so the large aiplatform SDK is not needed.
- `gcp:<project>:prices` (with `--prices`): per-GPU hourly prices of the GPU models the project runs, in its
  regions, from the Cloud Billing Catalog (google-cloud-billing, REST): Compute Engine's GPU SKUs, on demand
  and Spot. Kept in the inventory's `prices` as evidence, one entry per SKU and region: `instance_type` is
  `gpu:<model>` (on demand) or `gpu:<model>:spot`, the SKU id and description in `source`.

Endpoints: `GPU_AUDITOR_GCP_ENDPOINT` (a base URL) sends every REST call (Compute, BigQuery, Vertex AI, Billing
Catalog) to one endpoint instead of Google's: a private endpoint, or the tests' loopback server.
`GPU_AUDITOR_GCP_MONITORING_ENDPOINT` (`host:port`) does the same for Cloud Monitoring's gRPC: TLS to a remote
host; a loopback host (an emulator, a tunnel, the tests' server) is reached in plain gRPC with gRPC's local
credentials, which still carry the OAuth token and which gRPC refuses to use with any peer off this machine.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import math
import os
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import google.auth
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth.exceptions import GoogleAuthError
from google.auth.transport.requests import AuthorizedSession

from auditor.providers.live.pull import Pull, UnreadableAnswer, gpu_model, iso, pages, usage_summary, utc

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
PAGE = 500
PERIOD = 3600
GPU_FAMILIES = re.compile(r"^(a2|a3|a4|g2|g4)-")
ENDPOINT_ENV = "GPU_AUDITOR_GCP_ENDPOINT"
TERMINATION = {"STOP": "deallocate", "DELETE": "delete"}  # instanceTerminationAction as a snapshot eviction policy
MONITORING_ENDPOINT_ENV = "GPU_AUDITOR_GCP_MONITORING_ENDPOINT"
TIMEOUT = 60
BILLING_COLUMNS = ("billing_account_id", "service", "sku", "usage_start_time", "usage_end_time", "project",
                   "labels", "system_labels", "location", "cost", "currency", "usage", "credits", "cost_type")


def throttled(e: BaseException) -> bool:
    if isinstance(e, gexc.TooManyRequests | gexc.ServiceUnavailable):
        return True
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None) in (429, 503)


def pull(p: Pull) -> None:
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
    # The Compute Engine SKUs are the same for every project: read once, when a project first wants them.
    gpu_skus = functools.cache(lambda: _gpu_skus(p, credentials, endpoint))
    try:
        for project in projects:
            if p.run(f"gcp:{project}:compute", "inventory", lambda pr=project: _compute(p, credentials, endpoint, pr)):
                p.run(f"gcp:{project}:monitoring", "metrics", lambda pr=project: _monitoring(p, credentials, pr))
            else:
                p.fail(f"gcp:{project}:monitoring", "metrics", "skipped: the Compute Engine inventory failed")
            for region in o.regions or ["us-central1"]:
                p.run(f"gcp:{project}:vertex:{region}", "jobs",
                      lambda pr=project, r=region: _vertex(p, session, endpoint, pr, r))
            if o.prices:
                p.run(f"gcp:{project}:prices", "prices", lambda pr=project: _prices(p, gpu_skus, pr))
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
                    # only a spot VM's: a standard VM's termination action is for its max run duration
                    "eviction_policy": TERMINATION.get(sched.instance_termination_action) if spot else None,
                    "launch_time": iso(utc(i.creation_timestamp)) if i.creation_timestamp else None,
                    "tags": dict(i.labels),
                })
    return {"instances": seen, "gpu_instances": found}


# ---- Cloud Monitoring (gRPC) ---------------------------------------------------------------------------------

class GpuMetrics(NamedTuple):
    """One family of per-GPU metric types: utilisation (aligned by hourly mean) and memory used (hourly max)."""
    family: str  # the metric types' common prefix, named in each gpu_usage row's source
    utilization: str
    util_to_pct: float  # utilisation values times this are percent
    memory: str
    memory_used: str  # the filter on the memory type's state label: its free (and reserved) series are not used


# Read in this order; an instance takes its usage from the first family that has utilisation series for it.
# The Ops Agent's own NVML metrics are there on any GPU VM running it; the DCGM receiver's version 2 metrics
# replace them where the agent is set up for DCGM. DCGM version 1 (`workload.googleapis.com/dcgm.gpu.profiling.*`)
# only adds profiling metrics beside the NVML ones, so it has no memory metric and is not read.
GPU_METRICS = (
    GpuMetrics("agent.googleapis.com/gpu", "agent.googleapis.com/gpu/utilization", 1.0,  # percent
               "agent.googleapis.com/gpu/memory/bytes_used", 'metric.labels.memory_state = "used"'),
    GpuMetrics("workload.googleapis.com/gpu.dcgm", "workload.googleapis.com/gpu.dcgm.utilization", 100.0,  # fraction
               "workload.googleapis.com/gpu.dcgm.memory.bytes_used", 'metric.labels.state = "used"'),
)


def _monitoring_client(credentials):
    """A MetricServiceClient for Google's endpoint, or the one `GPU_AUDITOR_GCP_MONITORING_ENDPOINT` names."""
    from google.cloud import monitoring_v3  # gRPC only; imported here, installed by the gcp extra

    endpoint = os.environ.get(MONITORING_ENDPOINT_ENV)
    if not endpoint:
        return monitoring_v3.MetricServiceClient(credentials=credentials)
    host = urlsplit(f"//{endpoint}").hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return monitoring_v3.MetricServiceClient(credentials=credentials,
                                                 client_options=ClientOptions(api_endpoint=endpoint))
    import grpc
    from google.cloud.monitoring_v3.services.metric_service.transports import MetricServiceGrpcTransport

    transport = MetricServiceGrpcTransport(
        host=endpoint, credentials=credentials, scopes=SCOPES,
        ssl_channel_credentials=grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP))
    return monitoring_v3.MetricServiceClient(transport=transport)


def _monitoring(p: Pull, credentials, project: str) -> dict[str, int]:
    ids = {a["id"] for a in p.assets if a["provider"] == "gcp" and a["account"] == project}
    if not ids:
        return {"gpu_usage": 0}
    from google.cloud import monitoring_v3

    w = p.options.window
    interval = monitoring_v3.TimeInterval(start_time=w.start, end_time=w.end)
    left, added = set(ids), 0  # the instances no family has given usage for yet
    with _monitoring_client(credentials) as client:
        def one_page(**request):  # retry=None: our Retry backs off on throttling, not the client's own as well
            return next(iter(client.list_time_series(request=request, retry=None, timeout=TIMEOUT).pages))

        def read(metric: str, aligner: str, extra: str, wanted: set[str], scale: float) -> dict[str, list]:
            """Instance id -> its per-GPU series of one metric type, for the instances wanted."""
            aggregation = monitoring_v3.Aggregation(
                alignment_period=timedelta(seconds=PERIOD),
                per_series_aligner=monitoring_v3.Aggregation.Aligner[aligner])
            out: dict[str, list] = {}
            for page in pages(one_page, p.retry, throttled, token_in="page_token", token_out="next_page_token",
                              name=f"projects/{project}", interval=interval, aggregation=aggregation,
                              filter=f'metric.type = "{metric}" AND resource.type = "gce_instance"{extra}',
                              view=monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL):
                for ts in page.time_series:
                    iid = ts.resource.labels.get("instance_id")
                    if iid in wanted:
                        points = _points(ts, scale)
                        if len(points) < len(ts.points):
                            p.unread(f"{metric} points that are not numbers", len(ts.points) - len(points))
                        out.setdefault(iid, []).append(points)
            return out

        for m in GPU_METRICS:
            if not left:
                break  # every instance has its usage: the other families are not asked
            util = read(m.utilization, "ALIGN_MEAN", "", left, m.util_to_pct)
            mem = read(m.memory, "ALIGN_MAX", f" AND {m.memory_used}", set(util), 1.0) if util else {}
            for iid in sorted(util):
                usage = usage_summary(iid, util[iid], mem.get(iid, []), PERIOD, f"cloud-monitoring:{m.family}",
                                      memory_scale=1 / 2**30)
                if usage:
                    p.gpu_usage.append(usage)
                    left.discard(iid)
                    added += 1
    return {"gpu_usage": added}


def _points(ts, scale: float = 1.0) -> list[tuple[datetime, float]]:
    """(period start, value times scale) of an aligned series. An aligned point is stamped with the end of its
    period; `usage_summary` counts each sample from its period's start."""
    out = []
    for pt in ts.points:
        kind = type(pt.value).pb(pt.value).WhichOneof("value")
        if kind in ("double_value", "int64_value"):
            out.append((utc(pt.interval.end_time) - timedelta(seconds=PERIOD), float(getattr(pt.value, kind)) * scale))
    return out


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
            if not isinstance(job, dict) or not job.get("name"):
                p.unread("custom jobs without a name")
                continue
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
    written, blank, first = 0, 0, None
    with open(target, "w", encoding="utf-8") as f:
        for page in rows.pages:  # each row is already one JSON line, made by BigQuery: written as it comes
            lines = [row[0] for row in page]
            for line in lines:  # but checked first: a line without money is not written as if it were read
                if not billing_row_ok(line):
                    blank += 1
                    first = first or line
            f.write("".join(line + "\n" for line in lines))
            written += len(lines)
    if blank:
        target.unlink()
        raise UnreadableAnswer(f"{blank} of the {written} billing rows of {table} lack a cost that is a number, a "
                               f"currency or a usage start time (the first: {str(first)[:160]}); no cost was written")
    p.note("checked: every row has a numeric cost, a currency and a usage start time")
    if not written:
        target.unlink()
        raise LookupError(f"no billing rows in {table} for {w.label}")
    return {"rows": written, "files": 1}


def billing_row_ok(line: str) -> bool:
    """Whether a billing export row (one JSON object) has what every cost line needs."""
    try:
        row = json.loads(line)
    except ValueError:
        return False
    cost = row.get("cost") if isinstance(row, dict) else None
    return (isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost)
            and bool(row.get("currency")) and bool(row.get("usage_start_time")))


# ---- GPU prices from the Cloud Billing Catalog (REST) --------------------------------------------------------

COMPUTE_ENGINE = "services/6F81-5844-456A"  # Compute Engine in the Cloud Billing Catalog
# A GPU's own SKU, on demand or Spot: "Nvidia Tesla A100 GPU running in Americas", "Spot Preemptible Nvidia L4
# GPU running in Americas". Commitments, Virtual Workstation licences and other variants do not match.
GPU_SKU = re.compile(r"(?:Spot Preemptible )?Nvidia (?:Tesla )?(?P<gpu>[A-Z]+\d+[A-Z]*(?: \d+GB)?(?: Mega)?) "
                     r"GPU running in [\w ]+", re.I)
USAGE_TYPES = {"OnDemand": "", "Preemptible": ":spot"}  # the SKU's usage type -> suffix of the price's name


def _gpu_skus(p: Pull, credentials, endpoint: str | None) -> list[dict[str, Any]]:
    """Compute Engine's hourly GPU SKUs, on demand and Spot, every page of `list_skus`."""
    from google.cloud import billing_v1

    options = ClientOptions(api_endpoint=endpoint) if endpoint else None
    out = []
    with billing_v1.CloudCatalogClient(credentials=credentials, transport="rest", client_options=options) as client:
        def one_page(**request):
            return next(iter(client.list_skus(request=request, retry=None, timeout=TIMEOUT).pages))

        for page in pages(one_page, p.retry, throttled, token_in="page_token", token_out="next_page_token",
                          parent=COMPUTE_ENGINE, currency_code="USD", page_size=5000):
            for sku in page.skus:
                m = GPU_SKU.fullmatch(sku.description)
                suffix = USAGE_TYPES.get(sku.category.usage_type)
                if not m or suffix is None or sku.category.resource_group != "GPU" or not sku.pricing_info:
                    continue
                expression = sku.pricing_info[0].pricing_expression  # the current price: no time range was asked
                rate = next((r for r in expression.tiered_rates if not r.start_usage_amount), None)
                if expression.usage_unit != "h" or rate is None:
                    continue
                price = Decimal(rate.unit_price.units) + Decimal(rate.unit_price.nanos).scaleb(-9)  # exact
                model = gpu_model(m["gpu"])
                out.append({"model": model, "name": f"gpu:{model}{suffix}",
                            "regions": set(sku.service_regions), "price": format(price.normalize(), "f"),
                            "currency": rate.unit_price.currency_code or "USD",
                            "source": f'Cloud Billing Catalog API, SKU {sku.sku_id} "{sku.description}", per GPU'})
    return out


def _prices(p: Pull, gpu_skus, project: str) -> dict[str, int]:
    """Per-GPU hourly prices of the GPU models this project's instances and jobs use, in their regions."""
    seen = [x for x in p.assets + p.jobs if x["provider"] == "gcp" and x["account"] == project and x.get("gpu_model")]
    models, regions = {x["gpu_model"] for x in seen}, {x["region"] for x in seen}
    if not models:
        return {"prices": 0}
    found = 0
    for sku in gpu_skus():
        if sku["model"] not in models:
            continue
        for region in sorted(regions & sku["regions"]):
            p.prices.append({"provider": "gcp", "instance_type": sku["name"], "region": region,
                             "price_per_hour": sku["price"], "currency": sku["currency"], "source": sku["source"]})
            found += 1
    return {"prices": found}

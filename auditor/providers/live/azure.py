"""Live Azure for `gpu-auditor pull` (DefaultAzureCredential), per subscription (`--account`, default
$AZURE_SUBSCRIPTION_ID).

Sources, each recorded in the snapshot manifest on its own (one failing does not stop the others):
- `azure:<sub>:compute`: VMs with GPU sizes (`virtual_machines.list_all`), priority Spot or Low and, for those,
  the eviction policy (`properties.evictionPolicy`: Deallocate or Delete), with tags.
- `azure:<sub>:scalesets`: VM scale sets with GPU sizes (`virtual_machine_scale_sets.list_all`): one asset per
  scale set, not per instance, because Cost Management bills a scale set's instances under the scale set's
  ResourceId (so the asset's cost joins), and the scale set is what one scales down or deletes. Its GPU count is
  the size's (from the catalog) times the capacity; priority Spot or Low makes it spot, with the eviction policy
  of `virtualMachineProfile.evictionPolicy`. Flexible-orchestration scale sets are skipped: their instances are
  ordinary VMs, listed and billed by the compute source.
- `azure:<sub>:metrics`: GPU utilisation and memory per VM and scale set from Azure Monitor. Azure has no
  platform GPU metric for VMs; the documented way to get one is Telegraf's `nvidia_smi` input with its
  `azure_monitor` output, which writes custom metrics in namespace `Telegraf/nvidia_smi` (`utilization_gpu` in
  percent, `memory_used` in MiB) against the VM (or, with its `resource_id` set, the scale set). They are read
  with the Metrics API (`GET {resource}/providers/Microsoft.Insights/metrics`, api-version 2023-10-01), hourly,
  without splitting by GPU: Azure Monitor then averages the GPUs (and a scale set's instances) per hour and
  takes the fullest one's maximum, which is what the usage summary needs. Series that come split anyway
  (`metadatavalues`) are read by their dimension: by GPU or by machine as one series each; by any other dimension
  not merged, and named in the source's line. A resource without these metrics (no agent) has no utilisation, and
  the count says how many.
- `azure:<sub>:ml`: Azure ML command and sweep jobs of every workspace, from the ARM REST API
  (`Microsoft.MachineLearningServices/workspaces/{ws}/jobs`, api-version 2024-04-01, every `nextLink` followed;
  other job types, such as pipelines, are counted in the source's line): spot when `queueSettings.jobTier` is Spot
  or the compute cluster's `vmPriority` is LowPriority; the instance type from `resources.instanceType`
  (serverless) or the cluster's `vmSize`; the checkpoint location as the gate reads it from a manifest (an output,
  environment variable or `--checkpoint-dir` argument that names one). A sweep job is a job of kind `sweep`: its
  trial read as a command job on the sweep's compute, with `limits` (maxTotalTrials, maxConcurrentTrials,
  trialTimeout, timeout), the sampling algorithm, the early termination policy and the objective. ARM gives a job
  no start or end time, so `start_time` is its creation time, and a finished job created before the window is
  left out. A `computeId` that is not a resource id is counted, and the job read without its cluster.
- `azure:<sub>:cost`: daily actual cost from the Cost Management Query API grouped by resource and meter (the
  API allows two groupings), every `nextLink` page followed. The answer's columns are read by name: the cost under
  any name the API gives it (the aggregation's alias or name, PreTaxCost, CostUSD, ...), the date as a number
  (20260701) or text; an answer without a cost or currency column, or a row without a cost, fails the source
  naming what it got, so no line is written with its money missing. `204 No Content` is asked again after its
  `Retry-After` (at most a minute, three asks), then taken as no cost, said in the source's line. The raw pages are
  kept under `raw/azure/` as the API sent them, and DuckDB turns them into a cost-details CSV under `billing/` (no
  Python loop over the rows); the VM and scale set inventory fills in each machine's tags and location, which the
  grouped query does not carry.
- `azure:prices` (with `--prices`): pay-as-you-go Linux prices of the GPU sizes seen, per region, from the Azure
  Retail Prices API (no credential; OData `$filter`, every `NextPageLink` followed), kept in the inventory's
  `prices` as evidence; spot, low-priority and Windows meters are left out.

The Monitor and ML calls go through azure.core's ARM pipeline (bearer token from the same credential), so no
further SDK is needed; throttling (429, 503) is retried with the pull's backoff on every call.

`GPU_AUDITOR_AZURE_ENDPOINT` (a base URL) sends the management calls elsewhere: the tests' loopback server
(over plain http, where the SDK is told that bearer tokens may go without TLS).
`GPU_AUDITOR_AZURE_PRICES_ENDPOINT` does the same for the Retail Prices API (default https://prices.azure.com).
Not done yet: Azure ML job end times, training seconds and interruptions (ARM does not give them;
the run history API would); a sweep's trials as they ran (child jobs); pipeline jobs; GPU metrics of AKS nodes
(they come through `--provider k8s` and DCGM).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest

from auditor.providers.live.pull import Pull, UnreadableAnswer, http_link, iso, usage_summary, utc
from auditor.providers.live.snapshot import EVICTION_POLICIES
from auditor.providers.manifests import INTERVAL_KEY, checkpoint_of  # the gate's reading: a job and its manifest agree
from auditor.sql import lit

ENDPOINT_ENV = "GPU_AUDITOR_AZURE_ENDPOINT"
PRICES_ENDPOINT_ENV = "GPU_AUDITOR_AZURE_PRICES_ENDPOINT"
ARM = "https://management.azure.com"
PRICES = "https://prices.azure.com"
GPU_SIZE = re.compile(r"(?i)^Standard_N[CDVG]")
METRICS_API = "2023-10-01"
ML_API = "2024-04-01"
PRICES_API = "2023-01-01-preview"
GPU_NAMESPACE = "Telegraf/nvidia_smi"  # Telegraf's azure_monitor output: "Telegraf/" + the input's name
PERIOD = 3600
# The metrics read, and the aggregation each is read by: utilisation averaged, memory at its fullest.
METRIC_AGGREGATION = {"utilization_gpu": "average", "memory_used": "maximum"}
# Dimensions (Telegraf's tags, Azure's own) that split a GPU metric into one series a GPU or a machine.
SPLITS = {**dict.fromkeys(("index", "gpu", "gpu_index", "uuid", "gpu_uuid", "pci_bus_id"), "GPU"),
          **dict.fromkeys(("host", "hostname", "instance", "instanceid", "vmname", "computer"), "machine")}
FINISHED = {"completed", "failed", "canceled"}


def throttled(e: BaseException) -> bool:
    return isinstance(e, HttpResponseError) and e.status_code in (429, 503)


def pull(p: Pull, credential: Any = None) -> None:
    if credential is None:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential(exclude_interactive_browser_credential=True)
    subscriptions = p.options.accounts or [s for s in [os.environ.get("AZURE_SUBSCRIPTION_ID")] if s]
    if not subscriptions:
        for source, kind in (("compute", "inventory"), ("scalesets", "inventory"), ("metrics", "metrics"),
                             ("ml", "jobs"), ("cost", "billing")):
            p.fail(f"azure:{source}", kind, "no subscription: name one with --account SUBSCRIPTION_ID")
        return
    endpoint = os.environ.get(ENDPOINT_ENV)
    kw = {"base_url": endpoint} if endpoint else {}
    call = {"enforce_https": False} if endpoint and endpoint.startswith("http://") else {}
    arm = Arm(p, credential, endpoint or ARM, call)
    for sub in subscriptions:
        vms = p.run(f"azure:{sub}:compute", "inventory", lambda s=sub: _compute(p, credential, s, kw, call))
        sets = p.run(f"azure:{sub}:scalesets", "inventory", lambda s=sub: _scale_sets(p, credential, s, kw, call))
        if vms or sets:
            p.run(f"azure:{sub}:metrics", "metrics", lambda s=sub: _metrics(p, arm, s))
        else:
            p.fail(f"azure:{sub}:metrics", "metrics", "skipped: the VM and scale set inventories failed")
        p.run(f"azure:{sub}:ml", "jobs", lambda s=sub: _ml_jobs(p, arm, s))
        p.run(f"azure:{sub}:cost", "billing", lambda s=sub: _cost(p, credential, s, kw, call))
    if p.options.prices:
        p.run("azure:prices", "prices", lambda: _prices(p, os.environ.get(PRICES_ENDPOINT_ENV) or PRICES))


class Arm:
    """GETs on Azure Resource Manager through azure.core's pipeline, with the ARM bearer-token policy, for the
    APIs whose SDKs this adapter does without (Monitor metrics, Azure ML). No SDK retry policy: the pull's own
    backoff retries throttling, once, in one place."""

    def __init__(self, p: Pull, credential, base: str, call: dict):
        from azure.core.pipeline import policies
        from azure.mgmt.core import ARMPipelineClient
        from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy

        self.p, self.base, self.call = p, base.rstrip("/"), call
        self.client = ARMPipelineClient(self.base, policies=[
            policies.RequestIdPolicy(), policies.HeadersPolicy(), policies.UserAgentPolicy(sdk_moniker="gpu-auditor"),
            policies.ProxyPolicy(), policies.RedirectPolicy(),
            ARMChallengeAuthenticationPolicy(credential, f"{ARM}/.default")])

    def get(self, url: str, **params: str) -> dict:
        """One GET (a path under the endpoint, or a nextLink on the endpoint's host), retried when throttled."""
        if not url.startswith("/"):
            url = http_link(url, "nextLink", self.base)
        request = HttpRequest("GET", self.base + url if url.startswith("/") else url, params=params)

        def send() -> dict:
            response = self.client.send_request(request, **self.call)
            response.raise_for_status()
            return answer(response)

        return self.p.retry.call(send, throttled=throttled)

    def pages(self, path: str, **params: str) -> Iterator[dict]:
        """Every page of an ARM list, following `nextLink` to the end."""
        return follow(self.get(path, **params), "nextLink", self.get)


def answer(response) -> dict:
    """A response's JSON object; a body that is empty or not a JSON object is refused in one line."""
    try:
        doc = json.loads(response.text() or "null")
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise UnreadableAnswer(f"{response.request.method} {urlsplit(response.request.url).path} answered "
                               f"{response.status_code} without a JSON object ({len(response.text())} characters)")
    return doc


def follow(page: dict, key: str, get: Callable[[str], dict]) -> Iterator[dict]:
    """The pages of a list, each page's `key` linking to the next, to the end (a link seen twice stops it). `get`
    refuses a link that is not an http(s) URL on its endpoint's host."""
    seen: set[str] = set()
    while True:
        yield page
        link = page.get(key)
        if not link:
            return
        if link in seen:
            raise RuntimeError(f"the API returned the {key} {link} twice; stopped paging")
        seen.add(link)
        page = get(http_link(link, key))


def _compute(p: Pull, credential, sub: str, kw: dict, call: dict) -> dict[str, int]:
    from azure.mgmt.compute import ComputeManagementClient

    client = ComputeManagementClient(credential, sub, **kw)
    vms = p.retry.call(lambda: list(client.virtual_machines.list_all(**call)), throttled=throttled)
    found, seen = 0, set()
    for vm in vms:
        size = vm.hardware_profile.vm_size if vm.hardware_profile else None
        if not size or not GPU_SIZE.match(size):
            continue
        if not vm.id or vm.id.lower() in seen:
            p.unread("GPU VMs listed twice" if vm.id else "GPU VMs without an id")
            continue
        seen.add(vm.id.lower())
        found += 1
        spot = (vm.priority or "").lower() in ("spot", "low")
        p.assets.append({
            "id": vm.id.lower(), "provider": "azure", "account": sub, "region": vm.location,
            "zone": (vm.zones or [None])[0],
            "name": vm.name, "kind": "vm", "instance_type": size,
            "lifecycle": "spot" if spot else "on_demand", "eviction_policy": eviction(vm.eviction_policy, spot),
            "state": (vm.provisioning_state or "").lower() or None,
            "launch_time": iso(utc(vm.time_created)) if getattr(vm, "time_created", None) else None,
            "tags": dict(vm.tags or {}),
        })
    return {"vms": len(vms), "gpu_vms": found}


def _scale_sets(p: Pull, credential, sub: str, kw: dict, call: dict) -> dict[str, int]:
    from azure.mgmt.compute import ComputeManagementClient

    from auditor.providers.catalog import load_catalog

    catalog = load_catalog()
    client = ComputeManagementClient(credential, sub, **kw)
    sets = p.retry.call(lambda: list(client.virtual_machine_scale_sets.list_all(**call)), throttled=throttled)
    found, seen = 0, set()
    for s in sets:
        size = s.sku.name if s.sku else None
        if not size or not GPU_SIZE.match(size) or (s.orchestration_mode or "").lower() == "flexible":
            continue
        if not s.id or s.id.lower() in seen:
            p.unread("GPU scale sets listed twice" if s.id else "GPU scale sets without an id")
            continue
        seen.add(s.id.lower())
        found += 1
        profile = s.virtual_machine_profile
        spot = bool(profile) and (profile.priority or "").lower() in ("spot", "low")
        per_vm = catalog.instance("azure", size)
        capacity = s.sku.capacity
        p.assets.append({
            "id": s.id.lower(), "provider": "azure", "account": sub, "region": s.location,
            # kind vm, not cluster: a cluster must show jobs (GPU005), and only Azure ML jobs are seen here
            "zone": s.zones[0] if s.zones and len(s.zones) == 1 else None,  # none for one spread over zones
            "name": s.name, "kind": "vm", "instance_type": size,
            # all its GPUs: a scale set at capacity 0 has none, and the GPU rules pass it by
            "gpu_count": per_vm.gpu_count * capacity if per_vm and capacity is not None else None,
            "lifecycle": "spot" if spot else "on_demand",
            "eviction_policy": eviction(profile.eviction_policy, spot) if profile else None,
            "state": (s.provisioning_state or "").lower() or None,
            "launch_time": iso(utc(s.time_created)) if getattr(s, "time_created", None) else None,
            "tags": dict(s.tags or {}),
        })
    return {"scale_sets": len(sets), "gpu_scale_sets": found}


def eviction(policy: str | None, spot: bool) -> str | None:
    """The snapshot's eviction policy of a Spot or Low priority machine: deallocate or delete. None for a regular
    one, or a value Azure may add later (the snapshot schema would refuse it)."""
    value = (policy or "").lower()
    return value if spot and value in EVICTION_POLICIES else None


# ---- Azure Monitor: GPU metrics the Telegraf agent writes -------------------------------------------------

def _metrics(p: Pull, arm: Arm, sub: str) -> dict[str, int]:
    ids = sorted({a["id"] for a in p.assets if a["provider"] == "azure" and a["account"] == sub})
    w = p.options.window
    added = missing = 0
    for rid in ids:
        try:
            doc = arm.get(f"{rid}/providers/Microsoft.Insights/metrics", **{
                "api-version": METRICS_API, "metricnamespace": GPU_NAMESPACE,
                "metricnames": ",".join(METRIC_AGGREGATION), "aggregation": "average,maximum",
                "interval": "PT1H", "timespan": f"{iso(w.start)}/{iso(w.end)}"})
        except HttpResponseError as e:
            if e.status_code not in (400, 404):  # 400/404: no such metric on this resource (no agent)
                raise
            doc = {}
        series = metric_series(p, doc)
        usage = usage_summary(rid, series["utilization_gpu"], series["memory_used"], PERIOD, "azure-monitor")
        if usage:  # memory_used is in MiB, as nvidia-smi reports it
            p.gpu_usage.append(usage)
            added += 1
        else:
            missing += 1
    return {"resources": len(ids), "gpu_usage": added, "without_gpu_metrics": missing}


def metric_series(p: Pull, doc: dict[str, Any]) -> dict[str, list[list[tuple]]]:
    """A Metrics API answer as point lists per metric asked for, each series read for what splits it.

    The adapter asks without `$filter`, so Azure Monitor answers one series a metric: the GPUs (and a scale set's
    instances) averaged per hour, the fullest one's maximum. Where series come split anyway (`metadatavalues`),
    a split by GPU or by instance is one series a GPU or a machine, which the usage summary averages per hour as
    it does the GCP and DCGM per-GPU series; a split by any other dimension is not merged: the metric is not read
    for that resource, and the source's line names the dimension."""
    out: dict[str, list[list[tuple]]] = {name: [] for name in METRIC_AGGREGATION}
    for metric in doc.get("value") or []:
        name = (metric.get("name") or {}).get("value")
        if name not in out:
            p.unread(f"metrics not asked for ({name})")
            continue
        if str(metric.get("errorCode") or "Success") != "Success":
            p.unread(f"{name} answers with errorCode {metric.get('errorCode')} ({metric.get('errorMessage') or ''})")
            continue
        agg, read, refused = METRIC_AGGREGATION[name], [], set()
        for ts in metric.get("timeseries") or []:
            dims = {str((m.get("name") or {}).get("value") or "").lower() for m in ts.get("metadatavalues") or []}
            if dims - SPLITS.keys():
                refused |= dims - SPLITS.keys()
                continue
            for kind in sorted({SPLITS[d] for d in dims}):
                p.note(f"{name} series split by {kind} read as one series a {kind}")
            points = []
            for d in ts.get("data") or []:
                value, when = d.get(agg), d.get("timeStamp")
                if value is None:
                    continue  # an hour without a sample
                try:
                    if isinstance(value, bool) or not isinstance(value, int | float):
                        raise ValueError(value)
                    points.append((utc(str(when)), value))
                except ValueError:
                    p.unread(f"{name} points without a number and a time")
            read.append(points)
        if refused:
            p.unread(f"resources whose {name} series are split by {', '.join(sorted(refused))} (a dimension not "
                     "asked for; not merged)")
            continue
        out[name] = read
    return out


# ---- Azure ML command and sweep jobs (ARM REST) --------------------------------------------------------------

ARM_ID = re.compile(r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/")
JOB_TYPES = {"Command": "command_jobs", "Sweep": "sweep_jobs"}


def _ml_jobs(p: Pull, arm: Arm, sub: str) -> dict[str, int]:
    w = p.options.window
    workspaces = [ws for page in arm.pages(f"/subscriptions/{sub}/providers/Microsoft.MachineLearningServices/"
                                           "workspaces", **{"api-version": ML_API})
                  for ws in page.get("value") or []]
    computes: dict[str, dict | None] = {}
    counts = {"workspaces": len(workspaces), **dict.fromkeys(JOB_TYPES.values(), 0)}
    seen: set[str] = set()
    for ws in workspaces:
        if not ARM_ID.match(str(ws.get("id") or "")):
            p.unread("workspaces without a resource id")
            continue
        # every job type in one list: command and sweep jobs are read, the others counted by type
        for page in arm.pages(f"{ws['id']}/jobs", **{"api-version": ML_API}):
            for job in page.get("value") or []:
                props = job.get("properties") or {}
                job_type = props.get("jobType")
                created = utc((job.get("systemData") or {}).get("createdAt"))
                if job_type not in JOB_TYPES:
                    p.unread(f"{job_type or 'untyped'} jobs (only Command and Sweep jobs are read)")
                    continue
                if created and created >= w.end:
                    continue
                if created and created < w.start and (props.get("status") or "").lower() in FINISHED:
                    continue  # finished, and begun before the window: most likely outside it
                jid = job_id(job, ws)
                if jid is None or jid.lower() in seen:
                    p.unread("jobs without an id or name" if jid is None else "jobs listed twice")
                    continue
                seen.add(jid.lower())
                compute_id = str(props.get("computeId") or "")
                if compute_id and not ARM_ID.match(compute_id):
                    p.unread(f"computeId values that are not resource ids ({compute_id[:60]!r}; the job is read "
                             "without its cluster)")
                    compute_id = ""
                if compute_id and compute_id.lower() not in computes:
                    computes[compute_id.lower()] = _aml_compute(arm, compute_id)
                compute = computes.get(compute_id.lower())
                make = azureml_sweep if job_type == "Sweep" else azureml_job
                p.jobs.append({**make(job, ws, compute, sub), "id": jid})
                counts[JOB_TYPES[job_type]] += 1
    return counts


def job_id(job: dict[str, Any], workspace: dict[str, Any]) -> str | None:
    """A job's ARM id; where the answer's `id` is not one, the workspace's id and the job's name make it."""
    if ARM_ID.match(str(job.get("id") or "")):
        return job["id"]
    return f"{workspace['id']}/jobs/{job['name']}" if job.get("name") else None


def _aml_compute(arm: Arm, compute_id: str) -> dict | None:
    try:
        return arm.get(compute_id, **{"api-version": ML_API})
    except HttpResponseError as e:
        if e.status_code == 404:  # the cluster was deleted since: the job says what it can alone
            return None
        raise


def azureml_job(job: dict[str, Any], workspace: dict[str, Any], compute: dict | None, sub: str) -> dict[str, Any]:
    """An ARM Azure ML command job (with its compute, when it ran on a cluster) as a snapshot job."""
    props = job.get("properties") or {}
    resources = props.get("resources") or {}
    cluster = ((compute or {}).get("properties") or {}).get("properties") or {}
    tier = str((props.get("queueSettings") or {}).get("jobTier") or "")
    # `default` is the run's own artifact folder that Azure ML adds to every job, named after the job: it says
    # nothing about checkpoints (and a job called llm-nockpt would read as one)
    outputs = {k: v for k, v in (props.get("outputs") or {}).items() if isinstance(v, dict) and k != "default"}
    # an output without a uri goes to the workspace's default datastore under the job's name: durable too
    mounts = {f"/outputs/{k}": v.get("uri") or f"azureml://datastores/workspaceblobstore/paths/azureml/"
              f"{job.get('name')}/{k}/" for k, v in outputs.items()}
    command = re.sub(r"\$\{\{\s*outputs\.([\w-]+)\s*\}\}", r"/outputs/\1", str(props.get("command") or ""))
    tags = {str(k): str(v) for k, v in (props.get("tags") or {}).items()}
    try:
        interval = float(tags[INTERVAL_KEY]) if INTERVAL_KEY in tags else None
    except ValueError:
        interval = None
    count = resources.get("instanceCount")
    return {
        "id": job.get("id"), "platform": "azureml", "provider": "azure", "account": sub,
        "region": workspace.get("location"), "name": props.get("displayName") or job.get("name"),
        "state": (props.get("status") or "").lower() or None,
        "instance_type": resources.get("instanceType") or cluster.get("vmSize"),
        "instance_count": count if isinstance(count, int) and count >= 1 else 1,
        "spot": tier.lower() == "spot" or str(cluster.get("vmPriority") or "").lower() == "lowpriority",
        "checkpoint_uri": checkpoint_of({str(k): str(v) for k, v in (props.get("environmentVariables") or {}).items()},
                                        command, mounts),
        "checkpoint_interval_min": interval if interval is not None and interval >= 0 else None,
        "max_runtime_s": duration_s((props.get("limits") or {}).get("timeout")),
        "start_time": iso(utc((job.get("systemData") or {}).get("createdAt"))), "tags": tags,
    }


def azureml_sweep(job: dict[str, Any], workspace: dict[str, Any], compute: dict | None, sub: str) -> dict[str, Any]:
    """An ARM Azure ML sweep job as a snapshot job of kind `sweep`: its trial (command, resources, environment)
    read as a command job on the sweep's compute, with the sweep's limits, sampling and early termination.
    `max_runtime_s` is the whole sweep's timeout; each trial's is `sweep_trial_timeout_s`."""
    props = job.get("properties") or {}
    trial = props.get("trial") or {}
    limits = props.get("limits") or {}
    as_command = {**props, "limits": {"timeout": limits.get("timeout")},
                  **{k: trial.get(k) for k in ("resources", "command", "environmentVariables")}}
    objective = props.get("objective") or {}
    goal, metric = objective.get("goal"), objective.get("primaryMetric")

    def positive(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None

    return {
        **azureml_job({**job, "properties": as_command}, workspace, compute, sub), "kind": "sweep",
        "sweep_max_trials": positive(limits.get("maxTotalTrials")),
        "sweep_parallel_trials": positive(limits.get("maxConcurrentTrials")),
        "sweep_trial_timeout_s": duration_s(limits.get("trialTimeout")),
        "sweep_algorithm": str((props.get("samplingAlgorithm") or {}).get("samplingAlgorithmType") or "").lower()
        or None,
        "sweep_early_stopping": str((props.get("earlyTermination") or {}).get("policyType") or "").lower() or None,
        "sweep_objective": f"{str(goal).lower()} {metric}" if goal and metric else None,
    }


def duration_s(text: str | None) -> int | None:
    """Seconds of an ISO 8601 duration as ARM writes them (PT5M, PT3600S, P1DT12H); None when absent or odd."""
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text or "")
    if not m or not any(m.groups()):
        return None
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return int(d * 86400 + h * 3600 + mi * 60 + s)


# ---- Retail Prices -----------------------------------------------------------------------------------------

def _prices(p: Pull, base: str) -> dict[str, int]:
    """Pay-as-you-go Linux prices of the GPU sizes this pull saw, in each region seen."""
    from azure.core import PipelineClient
    from azure.core.pipeline import policies

    from auditor.providers.catalog import load_catalog

    catalog = load_catalog()
    seen = [(x["instance_type"], x["region"]) for x in p.assets + p.jobs
            if x["provider"] == "azure" and x.get("instance_type") and x.get("region")]
    wanted: dict[tuple[str, str], tuple[str, str]] = {}
    for size, region in seen:  # the API's filter is case-sensitive: the catalog's spelling where it has one
        t = catalog.instance("azure", size)
        if t or GPU_SIZE.match(size):
            wanted.setdefault((size.lower(), region.lower()), (t.name if t else size, region.lower()))
    client = PipelineClient(base.rstrip("/"), policies=[policies.HeadersPolicy(), policies.UserAgentPolicy(
        sdk_moniker="gpu-auditor"), policies.ProxyPolicy(), policies.RedirectPolicy()])

    def get(url: str, params: dict | None = None) -> dict:
        url = http_link(url, "NextPageLink", base)

        def send() -> dict:
            response = client.send_request(HttpRequest("GET", url, params=params))
            response.raise_for_status()
            return json.loads(response.text(), parse_float=Decimal)  # money stays exact

        return p.retry.call(send, throttled=throttled)

    found = 0
    for size, region in sorted(wanted.values()):
        odata = (f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and armSkuName eq '{size}' "
                 "and priceType eq 'Consumption'")
        first = get(f"{base.rstrip('/')}/api/retail/prices", {"api-version": PRICES_API, "$filter": odata})
        items = [item for page in follow(first, "NextPageLink", get) for item in page.get("Items") or []]
        best = retail_price(items)
        if best:
            p.prices.append({"provider": "azure", "instance_type": size, "region": region,
                             "price_per_hour": str(best["retailPrice"]), "currency": best.get("currencyCode") or "USD",
                             "source": "Azure Retail Prices API"})
            found += 1
    return {"sizes": len(wanted), "prices": found}


def retail_price(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pay-as-you-go Linux meter among Retail Prices items: not spot, low priority or Windows; hourly; the
    primary meter region and the latest effective date first."""
    def plain(i: dict) -> bool:
        names = (str(i.get("skuName") or ""), str(i.get("meterName") or ""))
        return (i.get("type") == "Consumption" and i.get("unitOfMeasure") == "1 Hour"
                and not any(n.endswith((" Spot", " Low Priority")) for n in names)
                and not str(i.get("productName") or "").endswith(" Windows")
                and Decimal(str(i.get("retailPrice") or 0)) > 0)

    return max((i for i in items if plain(i)), default=None,
               key=lambda i: (bool(i.get("isPrimaryMeterRegion")), str(i.get("effectiveStartDate") or "")))


# ---- Cost Management ---------------------------------------------------------------------------------------

# The query's aggregations: the answer names its columns after them (the alias or the name, by API version).
AGGREGATION = {"totalCost": "Cost", "totalQuantity": "UsageQuantity"}
# Each part of a cost line, and the names the Query API gives its column, in order of preference: the
# billing-currency cost before the USD one (whose currency is then USD).
COST_NAMES = ("totalCost", "Cost", "PreTaxCost", "CostInBillingCurrency", "CostUSD", "PreTaxCostUSD", "CostInUSD")
QUERY_COLUMNS = {
    "date": ("UsageDate", "BillingMonth", "UsageStart", "Date"),
    "currency": ("Currency", "BillingCurrency", "BillingCurrencyCode"),
    "resource": ("ResourceId",),
    "group": ("ResourceGroup", "ResourceGroupName"),
    "meter": ("Meter", "MeterName"),
    "category": ("MeterCategory", "ServiceName"),
    "quantity": ("totalQuantity", "UsageQuantity", "Quantity"),
}
EMPTY_TRIES = 3  # asks of a query that answers 204 No Content with a Retry-After, before its answer is taken as empty
MAX_RETRY_AFTER = 60.0  # seconds: the longest Retry-After waited


def _cost(p: Pull, credential, sub: str, kw: dict, call: dict) -> dict[str, int]:
    from azure.mgmt.costmanagement import CostManagementClient
    from azure.mgmt.costmanagement.models import (
        QueryAggregation,
        QueryDataset,
        QueryDefinition,
        QueryGrouping,
        QueryTimePeriod,
    )

    w = p.options.window
    client = CostManagementClient(credential, **kw)
    base = kw.get("base_url") or ARM
    scope = f"/subscriptions/{sub}"
    query = QueryDefinition(
        type="ActualCost", timeframe="Custom",
        time_period=QueryTimePeriod(from_property=w.start, to=w.end - timedelta(seconds=1)),  # `to` is inclusive
        dataset=QueryDataset(granularity="Daily", aggregation={
            alias: QueryAggregation(name=name, function="Sum") for alias, name in AGGREGATION.items()},
            grouping=[QueryGrouping(type="Dimension", name="ResourceId"),
                      QueryGrouping(type="Dimension", name="Meter")]))
    pages = [_query_page(p, lambda: client.query.usage(scope, query, cls=lambda r, d, h: r.http_response, **call))]
    while pages[-1] and (pages[-1].get("properties") or {}).get("nextLink"):
        link = http_link(pages[-1]["properties"]["nextLink"], "nextLink", base)
        request = HttpRequest("POST", link, json=query.as_dict())
        # nextLink: the SDK has no pager for the query API
        pages.append(_query_page(p, lambda r=request: client._client.send_request(r, **call)))
    pages = [page for page in pages if page]
    rows = sum(len((page.get("properties") or {}).get("rows") or []) for page in pages)
    if not rows:
        p.note(f"no cost in {w.label}: the query answered without rows")
        return {"pages": len(pages), "rows": 0}
    raw_dir = p.root / "raw" / "azure" / sub
    raw_dir.mkdir(parents=True, exist_ok=True)
    for i, page in enumerate(pages, 1):
        (raw_dir / f"query-{i:04d}.json").write_text(page["text"], encoding="utf-8")  # as the API sent it
    where = query_columns(pages)
    p.note("columns read by name: " + ", ".join(f"{k} {v[0]}" for k, v in where.items() if v))
    _to_csv(p, raw_dir, where, f"azure/{sub}/cost-{w.start:%Y%m%d}-{w.end:%Y%m%d}.csv", sub)
    return {"pages": len(pages), "rows": rows}


def _query_page(p: Pull, send: Callable[[], Any]) -> dict | None:
    """One page of the Query API, throttling retried. `204 No Content` is an answer the API documents: asked again
    after the `Retry-After` it gives (at most a minute, `EMPTY_TRIES` asks), then taken as no rows (None)."""
    def checked():  # raised inside the retried call, so a throttled nextLink page is retried too
        response = send()
        response.raise_for_status()
        return response

    for tries in range(1, EMPTY_TRIES + 1):
        response = p.retry.call(checked, throttled=throttled)
        if response.status_code != 204:
            page = answer(response)
            page["text"] = response.text()
            return page
        wait = retry_after(response.headers)
        if wait is None or tries == EMPTY_TRIES:
            p.note(f"the Query API answered 204 No Content ({tries} ask{'s' if tries > 1 else ''}): no rows")
            return None
        p.retry.retried += 1
        p.retry.sleep(wait)
    return None


def retry_after(headers) -> float | None:
    """Seconds to wait from a `Retry-After` (seconds or an HTTP date) or `x-ms-retry-after-ms`, at most a minute."""
    from email.utils import parsedate_to_datetime

    value = headers.get("Retry-After")
    try:
        if headers.get("x-ms-retry-after-ms"):
            seconds = float(headers["x-ms-retry-after-ms"]) / 1000
        elif value and value.strip().replace(".", "", 1).isdigit():
            seconds = float(value)
        elif value:
            seconds = (parsedate_to_datetime(value) - utc_now()).total_seconds()
        else:
            return None
    except (TypeError, ValueError):
        return None
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


def utc_now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def query_columns(pages: list[dict]) -> dict[str, tuple[str, int] | None]:
    """Where each part of a cost line is in the Query API's positional rows, by the columns' names: {part: (name,
    index) or None}. Every page must have the first page's columns. Without a cost column, or without a currency
    where the cost is not in USD, the answer is refused, naming the columns it has and the ones it needs."""
    columns = [str(c.get("name")) for c in (pages[0].get("properties") or {}).get("columns") or []
               if isinstance(c, dict)]
    for i, page in enumerate(pages[1:], 2):
        got = [str(c.get("name")) for c in (page.get("properties") or {}).get("columns") or [] if isinstance(c, dict)]
        if got != columns:
            raise UnreadableAnswer(f"the Cost Management query's page {i} has columns {', '.join(got) or 'none'}, "
                                   f"page 1 {', '.join(columns) or 'none'}")
    lower = {c.lower(): i for i, c in reversed(list(enumerate(columns)))}

    def find(names: tuple[str, ...]) -> tuple[str, int] | None:
        return next(((columns[lower[n.lower()]], lower[n.lower()]) for n in names if n.lower() in lower), None)

    where = {"cost": find(COST_NAMES), **{part: find(names) for part, names in QUERY_COLUMNS.items()}}
    usd = where["cost"] is not None and where["cost"][0].lower().endswith("usd")
    missing = [what for what, ok in (("a cost (" + ", ".join(COST_NAMES) + ")", where["cost"]),
                                     ("a currency (" + ", ".join(QUERY_COLUMNS["currency"]) + ")",
                                      where["currency"] or usd)) if not ok]
    if missing:
        raise UnreadableAnswer(f"the Cost Management answer has columns {', '.join(columns) or 'none'}; it needs "
                               f"{' and '.join(missing)}: no cost was written")
    if usd:
        where["currency"] = None
    return where


def _to_csv(p: Pull, raw_dir, where: dict[str, tuple[str, int] | None], target: str, sub: str) -> None:
    """The query's positional rows as a cost-details CSV, in DuckDB, each part found by its column's name; VM tags
    and location from the inventory. Every row is checked first: a row without a cost that is a number, a date or
    a currency fails the source, so no line is written with money missing."""
    import duckdb

    def col(part: str, default: str = "NULL") -> str:
        found = where.get(part)
        return f"nullif(trim(json_extract_string(r, '$[{found[1]}]')), '')" if found else default

    w = p.options.window
    cost = f"TRY_CAST({col('cost')} AS DECIMAL(38, 18))"
    currency = col("currency", "'USD'")
    # UsageDate as a number (20260701) or text; BillingMonth and others as ISO text. Without a date column (a
    # query without granularity), the cost is the window's, dated its first day.
    date = (f"COALESCE(try_strptime({col('date')}, '%Y%m%d'), TRY_CAST({col('date')} AS TIMESTAMP))"
            if where["date"] else f"TIMESTAMP '{w.start:%Y-%m-%d}'")
    con = duckdb.connect()
    pages = lit(str(raw_dir / "*.json"))
    con.execute(f"""CREATE TEMP VIEW r AS SELECT unnest(properties."rows") AS r
                    FROM read_json({pages}, columns = {{'properties': 'STRUCT("rows" JSON[])'}})""")
    width = 1 + max(v[1] for v in where.values() if v)
    n, short, no_cost, no_date, no_currency, example = con.execute(f"""
        SELECT count(*), count(*) FILTER (json_array_length(r) < {width}),
               count(*) FILTER ({cost} IS NULL), count(*) FILTER (({date}) IS NULL),
               count(*) FILTER (({currency}) IS NULL),
               first(CAST(r AS VARCHAR)) FILTER ({cost} IS NULL OR ({date}) IS NULL OR ({currency}) IS NULL
                                                 OR json_array_length(r) < {width})
        FROM r""").fetchone()
    bad = [f"{k} {what}" for k, what in ((short, "shorter than the columns"),
                                         (no_cost, f"without a number in {where['cost'][0]}"),
                                         (no_date, f"without a date in {(where['date'] or ('',))[0]}"),
                                         (no_currency, "without a currency")) if k]
    if bad:
        raise UnreadableAnswer(f"of the {n} rows of the Cost Management answer, {', '.join(bad)} (the first: "
                               f"{str(example)[:120]}): no cost was written")
    if not where["date"]:
        p.note(f"no date column: each row is the window's cost, dated {w.start:%Y-%m-%d}")
    if not where["resource"]:
        p.note("no ResourceId column: cost by " + (where["group"][0] if where["group"] else "subscription"))
    con.execute("CREATE TABLE vms (id VARCHAR, location VARCHAR, tags VARCHAR)")
    vms = [(a["id"], a["region"], json.dumps(a["tags"])) for a in p.assets if a["account"] == sub]
    if vms:
        con.executemany("INSERT INTO vms VALUES (?, ?, ?)", vms)
    rid = f"lower({col('resource')})"
    # a VM, or a scale set (its instances are billed under its id): both are Virtual Machines meters, by the hour
    machine = (f"COALESCE(regexp_matches({rid}, '/microsoft\\.compute/(virtualmachines|virtualmachinescalesets)/'), "
               "false)")
    con.execute(f"""
        COPY (
            SELECT strftime({date}, '%Y-%m-%d') AS Date,
                   {lit(sub)} AS SubscriptionId,
                   {rid} AS ResourceId,
                   {col('group')} AS ResourceGroup,
                   COALESCE({col('category')}, CASE WHEN {machine} THEN 'Virtual Machines' ELSE 'Other' END)
                       AS MeterCategory,
                   {col('meter')} AS MeterName,
                   COALESCE(v.location, '') AS ResourceLocation,
                   {cost} AS CostInBillingCurrency,
                   {currency} AS BillingCurrency,
                   {col('quantity')} AS Quantity,
                   CASE WHEN {machine} THEN '1 Hour' END AS UnitOfMeasure,
                   CASE WHEN {col('meter')} LIKE '% Spot' THEN 'Spot' ELSE 'OnDemand' END AS PricingModel,
                   'Usage' AS ChargeType,
                   COALESCE(v.tags, '{{}}') AS Tags
            FROM r LEFT JOIN vms v ON v.id = {rid}
            ORDER BY 1, 3, 6, 4
        ) TO {lit(str(p.billing_path(target)))} (HEADER, DELIMITER ',')""")
    con.close()

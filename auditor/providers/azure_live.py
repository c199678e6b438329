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
  takes the fullest one's maximum, which is what the usage summary needs. A resource without these metrics
  (no agent) has no utilisation, and the count says how many.
- `azure:<sub>:ml`: Azure ML command jobs of every workspace, from the ARM REST API
  (`Microsoft.MachineLearningServices/workspaces/{ws}/jobs`, api-version 2024-04-01, every `nextLink` followed):
  spot when `queueSettings.jobTier` is Spot or the compute cluster's `vmPriority` is LowPriority; the instance
  type from `resources.instanceType` (serverless) or the cluster's `vmSize`; the checkpoint location as the gate
  reads it from a manifest (an output, environment variable or `--checkpoint-dir` argument that names one). ARM
  gives a job no start or end time, so `start_time` is its creation time, and a finished job created before
  the window is left out.
- `azure:<sub>:cost`: daily actual cost from the Cost Management Query API grouped by resource and meter (the
  API allows two groupings), every `nextLink` page followed. The raw pages are kept under `raw/azure/`, and
  DuckDB turns them into a cost-details CSV under `billing/` (no Python loop over the rows); the VM and scale set
  inventory fills in each machine's tags and location, which the grouped query does not carry.
- `azure:prices` (with `--prices`): pay-as-you-go Linux prices of the GPU sizes seen, per region, from the Azure
  Retail Prices API (no credential; OData `$filter`, every `NextPageLink` followed), kept in the inventory's
  `prices` as evidence; spot, low-priority and Windows meters are left out.

The Monitor and ML calls go through azure.core's ARM pipeline (bearer token from the same credential), so no
further SDK is needed; throttling (429, 503) is retried with the pull's backoff on every call.

`GPU_AUDITOR_AZURE_ENDPOINT` (a base URL) sends the management calls elsewhere: the tests' loopback server
(over plain http, where the SDK is told that bearer tokens may go without TLS).
`GPU_AUDITOR_AZURE_PRICES_ENDPOINT` does the same for the Retail Prices API (default https://prices.azure.com).
Not done yet: Azure ML job end times, training seconds and interruptions (ARM does not give them;
the run history API would); sweep and pipeline jobs; GPU metrics of AKS nodes (they come through
`--provider k8s` and DCGM).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest

from auditor.providers.columns import lit
from auditor.providers.manifests import INTERVAL_KEY, checkpoint_of  # the gate's reading: a job and its manifest agree
from auditor.providers.snapshot import EVICTION_POLICIES
from auditor.pull import Pull, iso, usage_summary, utc

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
        """One GET (a path under the endpoint, or a nextLink as given), retried when throttled."""
        request = HttpRequest("GET", url if "://" in url else self.base + url, params=params)

        def send() -> dict:
            response = self.client.send_request(request, **self.call)
            response.raise_for_status()
            return response.json()

        return self.p.retry.call(send, throttled=throttled)

    def pages(self, path: str, **params: str) -> Iterator[dict]:
        """Every page of an ARM list, following `nextLink` to the end."""
        return follow(self.get(path, **params), "nextLink", self.get)


def follow(page: dict, key: str, get: Callable[[str], dict]) -> Iterator[dict]:
    """The pages of a list, each page's `key` linking to the next, to the end (a link seen twice stops it)."""
    seen: set[str] = set()
    while True:
        yield page
        link = page.get(key)
        if not link:
            return
        if link in seen:
            raise RuntimeError(f"the API returned the {key} {link} twice; stopped paging")
        seen.add(link)
        page = get(link)


def _compute(p: Pull, credential, sub: str, kw: dict, call: dict) -> dict[str, int]:
    from azure.mgmt.compute import ComputeManagementClient

    client = ComputeManagementClient(credential, sub, **kw)
    vms = p.retry.call(lambda: list(client.virtual_machines.list_all(**call)), throttled=throttled)
    found = 0
    for vm in vms:
        size = vm.hardware_profile.vm_size if vm.hardware_profile else None
        if not size or not GPU_SIZE.match(size):
            continue
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

    from auditor.catalog import load_catalog

    catalog = load_catalog()
    client = ComputeManagementClient(credential, sub, **kw)
    sets = p.retry.call(lambda: list(client.virtual_machine_scale_sets.list_all(**call)), throttled=throttled)
    found = 0
    for s in sets:
        size = s.sku.name if s.sku else None
        if not size or not GPU_SIZE.match(size) or (s.orchestration_mode or "").lower() == "flexible":
            continue
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
                "metricnames": "utilization_gpu,memory_used", "aggregation": "average,maximum",
                "interval": "PT1H", "timespan": f"{iso(w.start)}/{iso(w.end)}"})
        except HttpResponseError as e:
            if e.status_code not in (400, 404):  # 400/404: no such metric on this resource (no agent)
                raise
            doc = {}
        series: dict[str, list[list]] = {"utilization_gpu": [], "memory_used": []}
        for metric in doc.get("value") or []:
            name = (metric.get("name") or {}).get("value")
            agg = "average" if name == "utilization_gpu" else "maximum"
            if name in series:
                series[name] += [[(utc(d["timeStamp"]), d[agg]) for d in ts.get("data") or []
                                  if d.get(agg) is not None] for ts in metric.get("timeseries") or []]
        usage = usage_summary(rid, series["utilization_gpu"], series["memory_used"], PERIOD, "azure-monitor")
        if usage:  # memory_used is in MiB, as nvidia-smi reports it
            p.gpu_usage.append(usage)
            added += 1
        else:
            missing += 1
    return {"resources": len(ids), "gpu_usage": added, "without_gpu_metrics": missing}


# ---- Azure ML command jobs (ARM REST) ------------------------------------------------------------------------

def _ml_jobs(p: Pull, arm: Arm, sub: str) -> dict[str, int]:
    w = p.options.window
    workspaces = [ws for page in arm.pages(f"/subscriptions/{sub}/providers/Microsoft.MachineLearningServices/"
                                           "workspaces", **{"api-version": ML_API})
                  for ws in page.get("value") or []]
    computes: dict[str, dict | None] = {}
    count = 0
    for ws in workspaces:
        for page in arm.pages(f"{ws['id']}/jobs", **{"api-version": ML_API, "jobType": "Command"}):
            for job in page.get("value") or []:
                props = job.get("properties") or {}
                created = utc((job.get("systemData") or {}).get("createdAt"))
                if props.get("jobType") != "Command" or (created and created >= w.end):
                    continue
                if created and created < w.start and (props.get("status") or "").lower() in FINISHED:
                    continue  # finished, and begun before the window: most likely outside it
                compute_id = props.get("computeId")
                if compute_id and compute_id.lower() not in computes:
                    computes[compute_id.lower()] = _aml_compute(arm, compute_id)
                p.jobs.append(azureml_job(job, ws, computes.get((compute_id or "").lower()), sub))
                count += 1
    return {"workspaces": len(workspaces), "command_jobs": count}


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
        "id": job["id"], "platform": "azureml", "provider": "azure", "account": sub,
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

    from auditor.catalog import load_catalog

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
    scope = f"/subscriptions/{sub}"
    query = QueryDefinition(
        type="ActualCost", timeframe="Custom",
        time_period=QueryTimePeriod(from_property=w.start, to=w.end - timedelta(seconds=1)),  # `to` is inclusive
        dataset=QueryDataset(granularity="Daily", aggregation={
            "totalCost": QueryAggregation(name="Cost", function="Sum"),
            "totalQuantity": QueryAggregation(name="UsageQuantity", function="Sum")},
            grouping=[QueryGrouping(type="Dimension", name="ResourceId"),
                      QueryGrouping(type="Dimension", name="Meter")]))
    raw_pages = [p.retry.call(lambda: client.query.usage(scope, query, cls=lambda r, d, h: r.http_response.json(),
                                                         **call), throttled=throttled)]
    while (raw_pages[-1].get("properties") or {}).get("nextLink"):
        request = HttpRequest("POST", raw_pages[-1]["properties"]["nextLink"], json=query.as_dict())
        raw_pages.append(p.retry.call(lambda r=request: _send(client, r, call), throttled=throttled))
    raw_dir = p.root / "raw" / "azure" / sub
    raw_dir.mkdir(parents=True, exist_ok=True)
    for i, page in enumerate(raw_pages, 1):
        (raw_dir / f"query-{i:04d}.json").write_text(json.dumps(page), encoding="utf-8")
    rows = sum(len((page.get("properties") or {}).get("rows") or []) for page in raw_pages)
    if not rows:
        raise LookupError(f"the Cost Management query returned no cost for {w.label}")
    columns = [c["name"] for c in raw_pages[0]["properties"]["columns"]]
    _to_csv(p, raw_dir, columns, p.billing_path(f"azure/{sub}/cost-{w.start:%Y%m%d}-{w.end:%Y%m%d}.csv"), sub)
    return {"pages": len(raw_pages), "rows": rows}


def _send(client, request: HttpRequest, call: dict) -> dict:
    response = client._client.send_request(request, **call)  # nextLink: the SDK has no pager for the query API
    response.raise_for_status()
    return response.json()


def _to_csv(p: Pull, raw_dir, columns: list[str], target, sub: str) -> None:
    """The query's positional rows as a cost-details CSV, in DuckDB; VM tags and location from the inventory."""
    import duckdb

    def col(name: str, default: str = "NULL") -> str:
        lower = [c.lower() for c in columns]
        return f"json_extract_string(r, '$[{lower.index(name.lower())}]')" if name.lower() in lower else default

    con = duckdb.connect()
    con.execute("CREATE TABLE vms (id VARCHAR, location VARCHAR, tags VARCHAR)")
    vms = [(a["id"], a["region"], json.dumps(a["tags"])) for a in p.assets if a["account"] == sub]
    if vms:
        con.executemany("INSERT INTO vms VALUES (?, ?, ?)", vms)
    date = col("UsageDate")
    # a VM, or a scale set (its instances are billed under its id): both are Virtual Machines meters, by the hour
    machine = (f"regexp_matches(lower({col('ResourceId')}), "
               "'/microsoft\\.compute/(virtualmachines|virtualmachinescalesets)/')")
    con.execute(f"""
        COPY (
            SELECT strftime(strptime({date}, '%Y%m%d'), '%Y-%m-%d') AS Date,
                   {lit(sub)} AS SubscriptionId,
                   lower({col('ResourceId')}) AS ResourceId,
                   CASE WHEN {machine} THEN 'Virtual Machines' ELSE 'Other' END AS MeterCategory,
                   {col('Meter')} AS MeterName,
                   COALESCE(v.location, '') AS ResourceLocation,
                   {col('Cost')} AS CostInBillingCurrency,
                   {col('Currency')} AS BillingCurrency,
                   {col('UsageQuantity')} AS Quantity,
                   CASE WHEN {machine} THEN '1 Hour' END AS UnitOfMeasure,
                   CASE WHEN {col('Meter')} LIKE '% Spot' THEN 'Spot' ELSE 'OnDemand' END AS PricingModel,
                   'Usage' AS ChargeType,
                   COALESCE(v.tags, '{{}}') AS Tags
            FROM (SELECT unnest(properties."rows") AS r FROM read_json({lit(str(raw_dir / '*.json'))},
                  columns = {{'properties': 'STRUCT("rows" JSON[])'}}))
            LEFT JOIN vms v ON v.id = lower({col('ResourceId')})
            ORDER BY 1, 3, 5
        ) TO {lit(str(target))} (HEADER, DELIMITER ',')""")
    con.close()


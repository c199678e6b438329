"""Live Azure for `gpu-auditor pull` (DefaultAzureCredential), per subscription (`--account`, default
$AZURE_SUBSCRIPTION_ID).

Sources, each recorded in the snapshot manifest on its own:
- `azure:<sub>:compute`: VMs with GPU sizes (`virtual_machines.list_all`), priority Spot or Low, with tags.
- `azure:<sub>:cost`: daily actual cost from the Cost Management Query API grouped by resource and meter (the
  API allows two groupings), every `nextLink` page followed. The raw pages are kept under `raw/azure/`, and
  DuckDB turns them into a cost-details CSV under `billing/` (no Python loop over the rows); the VM inventory
  fills in each VM's tags and location, which the grouped query does not carry.

`GPU_AUDITOR_AZURE_ENDPOINT` (a base URL) sends the management calls elsewhere: the tests' loopback server
(over plain http, where the SDK is told that bearer tokens may go without TLS). Not done yet: scale sets (AKS
node pools), GPU metrics (Azure Monitor has no GPU metric for plain VMs; AKS GPU metrics come through
`--provider k8s` and DCGM), and Retail Prices.
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest

from auditor.providers.columns import lit
from auditor.pull import Pull, iso, utc

ENDPOINT_ENV = "GPU_AUDITOR_AZURE_ENDPOINT"
GPU_SIZE = re.compile(r"(?i)^Standard_N[CDVG]")


def throttled(e: BaseException) -> bool:
    return isinstance(e, HttpResponseError) and e.status_code in (429, 503)


def pull(p: Pull, credential: Any = None) -> None:
    if credential is None:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential(exclude_interactive_browser_credential=True)
    subscriptions = p.options.accounts or [s for s in [os.environ.get("AZURE_SUBSCRIPTION_ID")] if s]
    if not subscriptions:
        p.fail("azure:compute", "inventory", "no subscription: name one with --account SUBSCRIPTION_ID")
        p.fail("azure:cost", "billing", "no subscription: name one with --account SUBSCRIPTION_ID")
        return
    endpoint = os.environ.get(ENDPOINT_ENV)
    kw = {"base_url": endpoint} if endpoint else {}
    call = {"enforce_https": False} if endpoint and endpoint.startswith("http://") else {}
    for sub in subscriptions:
        p.run(f"azure:{sub}:compute", "inventory", lambda s=sub: _compute(p, credential, s, kw, call))
        p.run(f"azure:{sub}:cost", "billing", lambda s=sub: _cost(p, credential, s, kw, call))


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
        p.assets.append({
            "id": vm.id.lower(), "provider": "azure", "account": sub, "region": vm.location,
            "zone": (vm.zones or [None])[0],
            "name": vm.name, "kind": "vm", "instance_type": size,
            "lifecycle": "spot" if (vm.priority or "").lower() in ("spot", "low") else "on_demand",
            "state": (vm.provisioning_state or "").lower() or None,
            "launch_time": iso(utc(vm.time_created)) if getattr(vm, "time_created", None) else None,
            "tags": dict(vm.tags or {}),
        })
    return {"vms": len(vms), "gpu_vms": found}


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
    con.execute(f"""
        COPY (
            SELECT strftime(strptime({date}, '%Y%m%d'), '%Y-%m-%d') AS Date,
                   {lit(sub)} AS SubscriptionId,
                   lower({col('ResourceId')}) AS ResourceId,
                   CASE WHEN lower({col('ResourceId')}) LIKE '%/microsoft.compute/virtualmachines/%'
                        THEN 'Virtual Machines' ELSE 'Other' END AS MeterCategory,
                   {col('Meter')} AS MeterName,
                   COALESCE(v.location, '') AS ResourceLocation,
                   {col('Cost')} AS CostInBillingCurrency,
                   {col('Currency')} AS BillingCurrency,
                   {col('UsageQuantity')} AS Quantity,
                   CASE WHEN lower({col('ResourceId')}) LIKE '%/virtualmachines/%' THEN '1 Hour' END AS UnitOfMeasure,
                   CASE WHEN {col('Meter')} LIKE '% Spot' THEN 'Spot' ELSE 'OnDemand' END AS PricingModel,
                   'Usage' AS ChargeType,
                   COALESCE(v.tags, '{{}}') AS Tags
            FROM (SELECT unnest(properties."rows") AS r FROM read_json({lit(str(raw_dir / '*.json'))},
                  columns = {{'properties': 'STRUCT("rows" JSON[])'}}))
            LEFT JOIN vms v ON v.id = lower({col('ResourceId')})
            ORDER BY 1, 3, 5
        ) TO {lit(str(target))} (HEADER, DELIMITER ',')""")
    con.close()


"""Live Azure for `gpu-auditor pull` (DefaultAzureCredential), per subscription (`--account`, default
$AZURE_SUBSCRIPTION_ID): the adapter's entry, and its inventory sources.

Sources, each recorded in the snapshot manifest on its own (one failing does not stop the others):
- `azure:<sub>:compute`: VMs with GPU sizes (`virtual_machines.list_all`), priority Spot or Low and, for those,
  the eviction policy (`properties.evictionPolicy`: Deallocate or Delete), with tags.
- `azure:<sub>:scalesets`: VM scale sets with GPU sizes (`virtual_machine_scale_sets.list_all`): one asset per
  scale set, not per instance, because Cost Management bills a scale set's instances under the scale set's
  ResourceId (so the asset's cost joins), and the scale set is what one scales down or deletes. Its GPU count is
  the size's (from the catalog) times the capacity; priority Spot or Low makes it spot, with the eviction policy
  of `virtualMachineProfile.evictionPolicy`. Flexible-orchestration scale sets are skipped: their instances are
  ordinary VMs, listed and billed by the compute source.
- `azure:<sub>:metrics`: GPU utilisation and memory from Azure Monitor (`azure_monitor.py`).
- `azure:<sub>:ml`: Azure ML command and sweep jobs (`azure_ml.py`).
- `azure:<sub>:cost`: daily actual cost from the Cost Management Query API (`azure_cost.py`).
- `azure:prices` (with `--prices`): pay-as-you-go prices from the Retail Prices API (`azure_prices.py`).

The Monitor, ML and Retail Prices calls go through azure.core's pipeline (`azure_rest.py`; for ARM, a bearer
token from the same credential), so no further SDK is needed; throttling (429, 503) is retried with the pull's
backoff on every call.

`GPU_AUDITOR_AZURE_ENDPOINT` (a base URL) sends the management calls elsewhere: the tests' loopback server
(over plain http, where the SDK is told that bearer tokens may go without TLS).
`GPU_AUDITOR_AZURE_PRICES_ENDPOINT` does the same for the Retail Prices API (default https://prices.azure.com).
Not done yet: GPU metrics of AKS nodes (they come through `--provider k8s` and DCGM); what `azure_ml.py` names.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from decimal import Decimal
from functools import partial
from typing import Any

from auditor.providers.live import azure_cost, azure_ml, azure_monitor, azure_prices
from auditor.providers.live.azure_rest import ARM, GPU_SIZE, Rest, throttled
from auditor.providers.live.pull import Pull, iso, utc
from auditor.providers.live.snapshot import EVICTION_POLICIES

ENDPOINT_ENV = "GPU_AUDITOR_AZURE_ENDPOINT"
PRICES_ENDPOINT_ENV = "GPU_AUDITOR_AZURE_PRICES_ENDPOINT"


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
    arm = Rest.arm(p, credential, endpoint or ARM, call)
    for sub in subscriptions:
        vms = p.run(f"azure:{sub}:compute", "inventory", partial(_compute, p, credential, sub, kw, call))
        sets = p.run(f"azure:{sub}:scalesets", "inventory", partial(_scale_sets, p, credential, sub, kw, call))
        if vms or sets:
            p.run(f"azure:{sub}:metrics", "metrics", partial(azure_monitor.metrics, p, arm, sub))
        else:
            p.fail(f"azure:{sub}:metrics", "metrics", "skipped: the VM and scale set inventories failed")
        p.run(f"azure:{sub}:ml", "jobs", partial(azure_ml.jobs, p, arm, sub))
        p.run(f"azure:{sub}:cost", "billing", partial(azure_cost.daily_cost, p, credential, sub, kw, call))
    if p.options.prices:
        base = os.environ.get(PRICES_ENDPOINT_ENV) or azure_prices.PRICES
        p.run("azure:prices", "prices", lambda: azure_prices.prices(p, base))


def _compute(p: Pull, credential, sub: str, kw: dict, call: dict) -> dict[str, int]:
    from azure.mgmt.compute import ComputeManagementClient

    client = ComputeManagementClient(credential, sub, **kw)
    vms = p.retry.call(lambda: list(client.virtual_machines.list_all(**call)), throttled=throttled)
    found = 0
    for vm, size in _gpu_machines(p, vms, "VMs", lambda vm: vm.hardware_profile and vm.hardware_profile.vm_size):
        found += 1
        spot = (vm.priority or "").lower() in ("spot", "low")
        p.assets.append(_asset(vm, sub, size, spot, zone=(vm.zones or [None])[0],
                               eviction_policy=eviction(vm.eviction_policy, spot)))
    return {"vms": len(vms), "gpu_vms": found}


def _scale_sets(p: Pull, credential, sub: str, kw: dict, call: dict) -> dict[str, int]:
    from azure.mgmt.compute import ComputeManagementClient

    from auditor.providers.catalog import load_catalog

    catalog = load_catalog()
    client = ComputeManagementClient(credential, sub, **kw)
    sets = p.retry.call(lambda: list(client.virtual_machine_scale_sets.list_all(**call)), throttled=throttled)
    uniform = [s for s in sets if (s.orchestration_mode or "").lower() != "flexible"]
    found = 0
    for s, size in _gpu_machines(p, uniform, "scale sets", lambda s: s.sku.name if s.sku else None):
        found += 1
        profile = s.virtual_machine_profile
        spot = bool(profile) and (profile.priority or "").lower() in ("spot", "low")
        per_vm = catalog.instance("azure", size)
        capacity = s.sku.capacity
        # kind vm, not cluster: a cluster must show jobs (GPU005), and only Azure ML jobs are seen here
        p.assets.append(_asset(
            s, sub, size, spot,
            zone=s.zones[0] if s.zones and len(s.zones) == 1 else None,  # none for one spread over zones
            # all its GPUs: a scale set at capacity 0 has none, and the GPU rules pass it by
            # a partial-GPU size (NVadsA10 v5) is its share of a GPU
            gpu_count=_count(per_vm.gpus * capacity) if per_vm and capacity is not None else None,
            eviction_policy=eviction(profile.eviction_policy, spot) if profile else None))
    return {"scale_sets": len(sets), "gpu_scale_sets": found}


def _gpu_machines(p: Pull, listed: list, what: str, size_of: Callable[[Any], str | None]) -> Iterator[tuple[Any, str]]:
    """(machine, size) of the listed VMs or scale sets with a GPU size, each id once; one without an id or
    listed twice is counted in the source's line."""
    seen: set[str] = set()
    for m in listed:
        size = size_of(m)
        if not size or not GPU_SIZE.match(size):
            continue
        if not m.id or m.id.lower() in seen:
            p.unread(f"GPU {what} listed twice" if m.id else f"GPU {what} without an id")
            continue
        seen.add(m.id.lower())
        yield m, size


def _asset(m: Any, sub: str, size: str, spot: bool, zone: str | None, eviction_policy: str | None,
           **gpus: Any) -> dict[str, Any]:
    """A VM or scale set as a snapshot asset (`gpus`: a scale set's `gpu_count`)."""
    return {
        "id": m.id.lower(), "provider": "azure", "account": sub, "region": m.location, "zone": zone,
        "name": m.name, "kind": "vm", "instance_type": size, **gpus,
        "lifecycle": "spot" if spot else "on_demand", "eviction_policy": eviction_policy,
        "state": (m.provisioning_state or "").lower() or None,
        "launch_time": iso(utc(m.time_created)) if getattr(m, "time_created", None) else None,
        "tags": dict(m.tags or {}),
    }


def eviction(policy: str | None, spot: bool) -> str | None:
    """The snapshot's eviction policy of a Spot or Low priority machine: deallocate or delete. None for a regular
    one, or a value Azure may add later (the snapshot schema would refuse it)."""
    value = (policy or "").lower()
    return value if spot and value in EVICTION_POLICIES else None


def _count(gpus: Decimal) -> int | float:
    """GPUs as the snapshot holds them: whole as an integer, a fraction (partial-GPU sizes) as a number."""
    return int(gpus) if gpus == gpus.to_integral_value() else float(gpus)

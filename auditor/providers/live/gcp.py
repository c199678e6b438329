"""Live Google Cloud for `gpu-auditor pull` (Application Default Credentials): the adapter's entry and the
Compute Engine inventory.

Sources, each recorded in the snapshot manifest on its own, per project (`--account`, default: ADC's project):
- `gcp:billing`: the Cloud Billing export from BigQuery (`gcp_billing.py`).
- `gcp:<project>:compute`: instances with guest accelerators or a GPU machine family (A2, A3, G2, ...), SPOT
  or preemptible (google-cloud-compute, REST transport); for those, `scheduling.instanceTerminationAction` as
  the eviction policy (STOP: deallocate, DELETE: delete; not known when the response leaves it out).
- `gcp:<project>:monitoring`: GPU utilisation and memory used from Cloud Monitoring (`gcp_monitoring.py`).
- `gcp:<project>:vertex:<region>`: Vertex AI custom jobs (`gcp_vertex.py`).
- `gcp:<project>:prices` (with `--prices`): per-GPU prices from the Cloud Billing Catalog (`gcp_prices.py`).

Endpoints: `GPU_AUDITOR_GCP_ENDPOINT` (a base URL) sends every REST call (Compute, BigQuery, Vertex AI, Billing
Catalog) to one endpoint instead of Google's: a private endpoint, or the tests' loopback server.
`GPU_AUDITOR_GCP_MONITORING_ENDPOINT` does the same for Cloud Monitoring's gRPC (`gcp_monitoring.py`).
"""

from __future__ import annotations

import functools
import os
import re

import google.auth
from google.auth.credentials import Credentials
from google.auth.exceptions import GoogleAuthError
from google.auth.transport.requests import AuthorizedSession

from auditor.providers.live import gcp_billing, gcp_monitoring, gcp_prices, gcp_vertex
from auditor.providers.live.gcp_api import PAGE, SCOPES, client_options, list_pages
from auditor.providers.live.pull import Pull, gpu_model, iso, utc

GPU_FAMILIES = re.compile(r"^(a2|a3|a4|g2|g4)-")
ENDPOINT_ENV = "GPU_AUDITOR_GCP_ENDPOINT"
TERMINATION = {"STOP": "deallocate", "DELETE": "delete"}  # instanceTerminationAction as a snapshot eviction policy


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
    gpu_skus = functools.cache(lambda: gcp_prices.gpu_skus(p, credentials, endpoint))
    try:
        for project in projects:
            if p.run(f"gcp:{project}:compute", "inventory",
                     functools.partial(_compute, p, credentials, endpoint, project)):
                p.run(f"gcp:{project}:monitoring", "metrics",
                      functools.partial(gcp_monitoring.metrics, p, credentials, project))
            else:
                p.fail(f"gcp:{project}:monitoring", "metrics", "skipped: the Compute Engine inventory failed")
            for region in o.regions or ["us-central1"]:
                p.run(f"gcp:{project}:vertex:{region}", "jobs",
                      functools.partial(gcp_vertex.custom_jobs, p, session, endpoint, project, region))
            if o.prices:
                p.run(f"gcp:{project}:prices", "prices", functools.partial(gcp_prices.prices, p, gpu_skus, project))
        if o.billing:
            p.run("gcp:billing", "billing", lambda: gcp_billing.export(p, credentials, endpoint, projects))
        else:
            p.fail("gcp:billing", "billing", "no billing export named: use --billing-uri project.dataset.table")
    finally:
        p.secret(getattr(credentials, "token", None))


def _compute(p: Pull, credentials: Credentials, endpoint: str | None, project: str) -> dict[str, int]:
    from google.cloud import compute_v1

    client = compute_v1.InstancesClient(credentials=credentials, transport="rest",
                                        client_options=client_options(endpoint))
    seen = found = 0
    for page in list_pages(p, client.aggregated_list, project=project, max_results=PAGE):
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

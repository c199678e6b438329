"""The `gcp:<project>:monitoring` source: GPU utilisation and memory used of the Compute Engine inventory's GPU
instances from Cloud Monitoring (google-cloud-monitoring, gRPC: the only transport it has), one series per GPU,
utilisation as the hourly mean and memory as the hourly max.

First the Ops Agent's NVML metrics, `agent.googleapis.com/gpu/utilization` (percent) and
`agent.googleapis.com/gpu/memory/bytes_used` with `memory_state = "used"`; then, for the GPU instances that have
none, the Ops Agent DCGM receiver's (version 2) `workload.googleapis.com/gpu.dcgm.utilization` (a fraction, turned
into percent) and `workload.googleapis.com/gpu.dcgm.memory.bytes_used` with `state = "used"`. Each `gpu_usage`
row's `source` names the family it came from: `cloud-monitoring:agent.googleapis.com/gpu` or
`cloud-monitoring:workload.googleapis.com/gpu.dcgm`.

`GPU_AUDITOR_GCP_MONITORING_ENDPOINT` (`host:port`) sends the gRPC calls to another endpoint: TLS to a remote host;
a loopback host (an emulator, a tunnel, the tests' server) is reached in plain gRPC with gRPC's local credentials,
which still carry the OAuth token and which gRPC refuses to use with any peer off this machine.
"""

from __future__ import annotations

import ipaddress
import os
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from google.auth.credentials import Credentials

from auditor.providers.live.gcp_api import SCOPES, TIMEOUT, client_options, list_pages
from auditor.providers.live.pull import Pull, usage_summary, utc

MONITORING_ENDPOINT_ENV = "GPU_AUDITOR_GCP_MONITORING_ENDPOINT"
PERIOD = 3600


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


def _monitoring_client(credentials: Credentials) -> Any:
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
        return monitoring_v3.MetricServiceClient(credentials=credentials, client_options=client_options(endpoint))
    import grpc
    from google.cloud.monitoring_v3.services.metric_service.transports import MetricServiceGrpcTransport

    transport = MetricServiceGrpcTransport(
        host=endpoint, credentials=credentials, scopes=SCOPES,
        ssl_channel_credentials=grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP))
    return monitoring_v3.MetricServiceClient(transport=transport)


def metrics(p: Pull, credentials: Credentials, project: str) -> dict[str, int]:
    ids = {a["id"] for a in p.assets if a["provider"] == "gcp" and a["account"] == project}
    if not ids:
        return {"gpu_usage": 0}
    from google.cloud import monitoring_v3

    w = p.options.window
    interval = monitoring_v3.TimeInterval(start_time=w.start, end_time=w.end)
    left, added = set(ids), 0  # the instances no family has given usage for yet
    with _monitoring_client(credentials) as client:
        def read(metric: str, aligner: str, extra: str, wanted: set[str], scale: float) -> dict[str, list]:
            """Instance id -> its per-GPU series of one metric type, for the instances wanted."""
            aggregation = monitoring_v3.Aggregation(
                alignment_period=timedelta(seconds=PERIOD),
                per_series_aligner=getattr(monitoring_v3.Aggregation.Aligner, aligner))
            out: dict[str, list] = {}
            # retry=None: our Retry backs off on throttling, not the client's own as well
            for page in list_pages(p, client.list_time_series, {"retry": None, "timeout": TIMEOUT},
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


def _points(ts: Any, scale: float = 1.0) -> list[tuple[datetime, float]]:
    """(period start, value times scale) of an aligned series. An aligned point is stamped with the end of its
    period; `usage_summary` counts each sample from its period's start."""
    out = []
    for pt in ts.points:
        kind = type(pt.value).pb(pt.value).WhichOneof("value")
        if kind in ("double_value", "int64_value"):
            out.append((utc(pt.interval.end_time) - timedelta(seconds=PERIOD), float(getattr(pt.value, kind)) * scale))
    return out

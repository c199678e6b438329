"""The `azure:<sub>:metrics` source: GPU utilisation and memory per VM and scale set from Azure Monitor.

Azure has no platform GPU metric for VMs; the documented way to get one is Telegraf's `nvidia_smi` input with its
`azure_monitor` output, which writes custom metrics in namespace `Telegraf/nvidia_smi` (`utilization_gpu` in
percent, `memory_used` in MiB) against the VM (or, with its `resource_id` set, the scale set). They are read with
the Metrics API (`GET {resource}/providers/Microsoft.Insights/metrics`, api-version 2023-10-01), hourly, without
splitting by GPU: Azure Monitor then averages the GPUs (and a scale set's instances) per hour and takes the fullest
one's maximum, which is what the usage summary needs. Series that come split anyway (`metadatavalues`) are read by
their dimension: by GPU or by machine as one series each; by any other dimension not merged, and named in the
source's line. A resource without these metrics (no agent) has no utilisation, and the count says how many.
"""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import HttpResponseError

from auditor.providers.live.azure_rest import Rest
from auditor.providers.live.pull import Pull, iso, usage_summary, utc

METRICS_API = "2023-10-01"
GPU_NAMESPACE = "Telegraf/nvidia_smi"  # Telegraf's azure_monitor output: "Telegraf/" + the input's name
PERIOD = 3600
# The metrics read, and the aggregation each is read by: utilisation averaged, memory at its fullest.
METRIC_AGGREGATION = {"utilization_gpu": "average", "memory_used": "maximum"}
# Dimensions (Telegraf's tags, Azure's own) that split a GPU metric into one series a GPU or a machine.
SPLITS = {**dict.fromkeys(("index", "gpu", "gpu_index", "uuid", "gpu_uuid", "pci_bus_id"), "GPU"),
          **dict.fromkeys(("host", "hostname", "instance", "instanceid", "vmname", "computer"), "machine")}


def metrics(p: Pull, arm: Rest, sub: str) -> dict[str, int]:
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

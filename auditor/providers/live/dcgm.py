"""DCGM exporter series (read through Prometheus) as the snapshot's usage rows.

`DCGM_FI_PROF_GR_ENGINE_ACTIVE` is the share of time the graphics engine was busy, of a whole GPU or, on a MIG
slice, of that slice; it is read in preference to `DCGM_FI_DEV_GPU_UTIL`, which reads 0 on MIG slices.
`DCGM_FI_DEV_FB_USED` is framebuffer memory used in MiB, per GPU or per MIG slice. The exporter labels a
series with its node (`Hostname`), GPU (`gpu`, `UUID`), MIG instance (`GPU_I_ID`, `GPU_I_PROFILE`) and, where it
maps devices to pods, the pod (`namespace`, `pod`). Scraped by a Prometheus that keeps its own target labels
(a ServiceMonitor without honorLabels), the exporter's pod mapping comes as `exported_namespace` and
`exported_pod`, and `namespace`/`pod` name the exporter's own pod: that pod is never a GPU's user.

A node's utilisation is the mean over its physical GPUs of each GPU's activity, a MIG GPU's being its slices'
activity weighted by their compute slices (`slices / slices_per_gpu`; a slice nobody uses counts as idle).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from auditor.providers.live.pull import iso, usage_summary

NODE_LABELS = ("Hostname", "node", "kubernetes_node", "nodename", "instance")
SOURCE = "dcgm-exporter"
Key = tuple[Any, ...]  # asset id, gpu, MIG instance (and namespace, pod where kept apart)


def node_of(labels: dict[str, str], nodes: dict[str, dict]) -> dict | None:
    """The node asset a series belongs to, by the first node label naming a known node (`host:port` too)."""
    return next((nodes[v] for v in (labels.get(k, "").split(":")[0] for k in NODE_LABELS) if v in nodes), None)


EXPORTER = re.compile(r"dcgm-exporter|dcgm_exporter")


def pod_of(labels: dict[str, str]) -> tuple[str | None, str | None]:
    """(namespace, pod) of the workload a series' device serves: the exporter's own mapping, never the
    exporter's pod (which Prometheus's target labels name on every series, idle GPUs' too)."""
    if labels.get("exported_pod"):
        return labels.get("exported_namespace") or None, labels["exported_pod"]
    pod = labels.get("pod") or None
    if pod is None or EXPORTER.search(pod) or EXPORTER.search(labels.get("container") or ""):
        return None, None
    return labels.get("namespace") or None, pod


def _by_device(series: Iterable[dict], by_pod: bool = False) -> dict[Key, dict]:
    """Series per device (a GPU, or a MIG instance of one; per pod too with `by_pod`): its labels and its
    samples by time. Two series of one device (the exporter repeats a shared GPU for each pod it serves, a
    slice changes hands) are one reading: the larger is kept."""
    out: dict[Key, dict] = {}
    for s in series:
        labels, node = s["metric"], s["node"]
        key: Key = (node["id"], labels.get("gpu") or labels.get("UUID") or "?", labels.get("GPU_I_ID") or None)
        if by_pod:
            key += pod_of(labels)
        d = out.setdefault(key, {"labels": labels, "node": node, "points": {}})
        for t, v in s["points"]:
            d["points"][t] = max(v, d["points"].get(t, v))
    return out


def node_usage(active: list[dict], util: list[dict], memory: list[dict], per_gpu: Callable[[dict], int],
               period_s: int) -> list[dict]:
    """One `gpu_usage` row per node: from engine activity where the node reports it, else from GPU_UTIL.
    Each series is `{"metric": labels, "node": asset, "points": [(time, value)]}`."""
    act, utl, mem = _by_device(active), _by_device(util), _by_device(memory)
    by_id = {d["node"]["id"]: d["node"] for d in (*act.values(), *utl.values())}
    rows = []
    for asset_id in sorted({k[0] for k in (*act, *utl)}):
        n = per_gpu(by_id[asset_id])
        if any(k[0] == asset_id for k in act):
            series = _per_gpu(act, asset_id, functools.partial(_engine_share, n=n))
        else:
            series = _per_gpu(utl, asset_id, lambda d: 1.0)
        used = _per_gpu(mem, asset_id, lambda d: 1.0)  # MiB; a MIG GPU's is the sum of its slices'
        row = usage_summary(asset_id, series, used, period_s, SOURCE)
        if row:
            rows.append(row)
    return rows


def _engine_share(d: dict, n: int) -> float:
    """A device's engine activity as percent of its physical GPU (a MIG slice counts its share)."""
    return 100.0 * _weight(d["labels"], n)


def _weight(labels: dict[str, str], slices_per_gpu: int) -> float:
    m = re.match(r"(\d+)g\.", labels.get("GPU_I_PROFILE") or "")
    return int(m.group(1)) / slices_per_gpu if labels.get("GPU_I_ID") and m else 1.0


def _per_gpu(devices: dict[Key, dict], asset_id: str, scale: Callable[[dict], float]) -> list[list]:
    """Per physical GPU of the node, its devices' values summed per time (scaled per device)."""
    gpus: dict[str, dict[datetime, float]] = {}
    for (aid, gpu, _), d in devices.items():
        if aid != asset_id:
            continue
        k = scale(d)
        for t, v in d["points"].items():
            gpus.setdefault(gpu, {})[t] = gpus.get(gpu, {}).get(t, 0.0) + v * k
    return [sorted(series.items()) for _, series in sorted(gpus.items())]


def slice_usage(active: list[dict], memory: list[dict], period_s: int) -> list[dict]:
    """One `slice_usage` row per MIG instance, and per whole or shared GPU the exporter maps to a pod: mean and
    p95 engine activity (percent of the slice) and peak memory used."""
    act, mem = _by_device(active, by_pod=True), _by_device(memory, by_pod=True)
    rows = []
    for key, d in sorted(act.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        asset_id, gpu, instance, namespace, pod = key
        if instance is None and pod is None:
            continue
        values = sorted(d["points"].items())
        if not values:
            continue
        pct = sorted(100.0 * v for _, v in values)
        p95 = pct[min(len(pct) - 1, max(0, -(-95 * len(pct) // 100) - 1))]
        peak = max(mem[key]["points"].values(), default=None) if key in mem else None
        labels = d["labels"]
        rows.append({"asset_id": asset_id, "gpu": gpu, "uuid": labels.get("UUID"), "instance": instance,
                     "profile": labels.get("GPU_I_PROFILE") or None, "namespace": namespace, "pod": pod,
                     "window_start": iso(values[0][0]),
                     "window_end": iso(values[-1][0] + timedelta(seconds=period_s)), "samples": len(pct),
                     "mean_active_pct": round(min(100.0, sum(pct) / len(pct)), 3),
                     "p95_active_pct": round(min(100.0, p95), 3),
                     "peak_mem_gb": round(peak / 1024, 3) if peak is not None else None, "source": SOURCE})
    return rows

"""Interactive GPUs: notebooks and dev machines, told apart from training and serving machines by what the
inventory says of them (the kind `notebook`, a SageMaker notebook instance's ARN, a Vertex AI Workbench or an
Azure ML compute instance's path) or by a label (`workload: interactive`, `interactive: "true"`, ...), with the
spans in which their GPUs sat at nil utilisation: the off-hours rule (OFF001) reads them."""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from auditor.model import InteractiveGpu
from auditor.sql import lit
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.tables.store import Store

NIL_PCT = 1.0  # mean GPU utilisation under this is nil: nobody is using the GPU
SAMPLE_S = 3600  # only samples of an hour or less tell night from day
PLATFORMS = (  # (platform, pattern on the lower-case id)
    ("sagemaker-notebook", re.compile(r":notebook-instance/")),
    ("vertex-workbench", re.compile(r"notebooks\.googleapis\.com|/locations/[^/]+/instances/")),
    ("azureml-compute-instance",
     re.compile(r"/providers/microsoft\.machinelearningservices/workspaces/[^/]+/computes/")),
)
LABELS = {"workload": {"interactive", "notebook", "dev", "devbox"}, "interactive": {"true", "yes", "1"},
          "role": {"notebook", "devbox"}}


def platform_of(rid: str, kind: str | None, tags: dict[str, str]) -> str | None:
    """What makes a machine interactive, or None."""
    low = rid.lower()
    for name, pattern in PLATFORMS:
        if pattern.search(low):
            return name
    if kind == "notebook":
        return "notebook"
    for key, value in tags.items():
        if value.strip().lower() in LABELS.get(key.strip().lower(), ()):
            return "labelled-interactive"
    return None


def merge(samples: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Sorted spans, those that touch or overlap joined."""
    out: list[tuple[datetime, datetime]] = []
    for start, end in sorted(samples):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _samples(store: Store, window: Window, table: str, key: str, util: str, keys: list[str]
             ) -> dict[str, list[tuple[datetime, datetime, bool]]]:
    """Samples of an hour or less in the window, per key: (start, end, at nil utilisation)."""
    if not keys:
        return {}
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    rows = store.con.execute(f"""
        SELECT {key}, greatest(window_start, TIMESTAMP {ws}), least(window_end, TIMESTAMP {we}), {util} < {NIL_PCT}
        FROM {table}
        WHERE {key} IN ({', '.join(lit(i) for i in sorted(keys))}) AND {util} IS NOT NULL
          AND epoch(window_end) - epoch(window_start) <= {SAMPLE_S}
          AND window_start < TIMESTAMP {we} AND window_end > TIMESTAMP {ws}
        ORDER BY 1, 2""").fetchall()
    out: dict[str, list[tuple[datetime, datetime, bool]]] = {}
    for k, start, end, nil in rows:
        out.setdefault(k, []).append((start, end, nil))
    return out


def _spans(mine: list[tuple[datetime, datetime, bool]]) -> tuple[float, datetime | None, datetime | None, list]:
    """(hours sampled, first sample's start, last one's end, the spans at nil utilisation)."""
    covered = merge([(s, e) for s, e, _ in mine])
    return (sum((e - s).total_seconds() for s, e in covered) / 3600, covered[0][0] if covered else None,
            covered[-1][1] if covered else None, merge([(s, e) for s, e, nil in mine if nil]))


def interactive_gpus(store: Store, window: Window, assets: list, slices: list) -> list[InteractiveGpu]:
    """The interactive ones among the GPU assets (entities.GpuAsset, with their billed cost) and the Kubernetes
    pods holding GPUs (GpuSlice, with their share of the node: shared_gpus.py) labelled interactive, with the
    spans in which their GPUs (the pod's slice: its DCGM engine activity) sat at nil utilisation."""
    picked = {a.id: (a, p) for a in assets if (p := platform_of(a.id, a.kind, a.tags))}
    samples = _samples(store, window, "gpu_usage", "asset_id", "mean_util_pct", list(picked))
    out = [InteractiveGpu(a.id, a.provider, platform, a.account, a.region, a.name, a.instance_type, a.gpu_model,
                          a.gpu_count, a.tags, *_spans(samples.get(rid, [])), a.cost, a.billed_hours)
           for rid, (a, platform) in sorted(picked.items())]
    pods = {f"{s.namespace}/{s.pod}": s for s in slices if s.pod and platform_of("", None, s.tags)}
    used = _samples(store, window, "slice_usage", "namespace || '/' || pod", "mean_active_pct", list(pods))
    out += [InteractiveGpu(s.id, s.provider, "kubernetes-pod", s.account, s.region, s.pod, s.instance_type,
                           s.gpu_model, s.units, s.tags, *_spans(used.get(key, [])), s.cost,
                           Decimal(str(s.hours)) if s.hours else None, s.node)
            for key, s in sorted(pods.items())]
    return out

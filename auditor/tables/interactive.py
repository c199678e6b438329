"""Interactive GPUs: notebooks and dev machines, told apart from training and serving machines by what the
inventory says of them (the kind `notebook`, a SageMaker notebook instance's ARN, a Vertex AI Workbench or an
Azure ML compute instance's path) or by a label (`workload: interactive`, `interactive: "true"`, ...), with the
spans in which their GPUs sat at nil utilisation: the off-hours rule (OFF001) reads them."""

from __future__ import annotations

import re
from datetime import datetime
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


def interactive_gpus(store: Store, window: Window, assets: list) -> list[InteractiveGpu]:
    """The interactive ones among the GPU assets (entities.GpuAsset, with their cost), with their idle spans."""
    picked = {a.id: (a, p) for a in assets if (p := platform_of(a.id, a.kind, a.tags))}
    if not picked:
        return []
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    rows = store.con.execute(f"""
        SELECT asset_id, greatest(window_start, TIMESTAMP {ws}), least(window_end, TIMESTAMP {we}),
               mean_util_pct < {NIL_PCT}
        FROM gpu_usage
        WHERE asset_id IN ({', '.join(lit(i) for i in sorted(picked))}) AND mean_util_pct IS NOT NULL
          AND epoch(window_end) - epoch(window_start) <= {SAMPLE_S}
          AND window_start < TIMESTAMP {we} AND window_end > TIMESTAMP {ws}
        ORDER BY 1, 2""").fetchall()
    samples: dict[str, list[tuple[datetime, datetime, bool]]] = {}
    for rid, start, end, nil in rows:
        samples.setdefault(rid, []).append((start, end, nil))
    out = []
    for rid, (a, platform) in sorted(picked.items()):
        mine = samples.get(rid, [])
        covered = merge([(s, e) for s, e, _ in mine])
        out.append(InteractiveGpu(
            a.id, a.provider, platform, a.account, a.region, a.name, a.instance_type, a.gpu_model, a.gpu_count,
            a.tags, sum((e - s).total_seconds() for s, e in covered) / 3600,
            covered[0][0] if covered else None, covered[-1][1] if covered else None,
            merge([(s, e) for s, e, nil in mine if nil]), a.cost, a.billed_hours))
    return out

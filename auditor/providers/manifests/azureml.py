"""Azure ML command and sweep jobs, as the CLI v2 YAML writes them."""

from __future__ import annotations

import re
from pathlib import Path

from auditor.catalog import Catalog
from auditor.model import Job
from auditor.providers.manifests.common import (
    as_int,
    as_list,
    as_map,
    checkpoint_of,
    gpu_from_type,
    interval_of,
    looks_gpu,
    own_keys,
    tags_of,
)
from auditor.providers.manifests.documents import Document, UnknownKind


def parse(doc: Document, catalog: Catalog) -> Job:
    d = doc.data
    kind = str(d.get("type") or "command")
    if kind not in ("command", "sweep"):
        raise doc.error(f"unknown manifest kind: Azure ML {kind} job (the gate reads command and sweep jobs)",
                        UnknownKind)
    trial = as_map(d.get("trial"), doc, "trial") if kind == "sweep" else d
    resources = as_map(d.get("resources") or trial.get("resources"), doc, "resources")
    instance_type = resources.get("instance_type")
    instance_type = str(instance_type) if instance_type else None
    count = as_int(resources.get("instance_count"), doc, "resources.instance_count") or 1
    limits = as_map(d.get("limits"), doc, "limits")
    timeout = as_int(limits.get("timeout"), doc, "limits.timeout")
    if kind == "sweep":  # trials at once x nodes each; the sweep's own timeout, else trials x trial timeout
        concurrent = as_int(limits.get("max_concurrent_trials"), doc, "limits.max_concurrent_trials") or 1
        total = as_int(limits.get("max_total_trials"), doc, "limits.max_total_trials")
        trial_timeout = as_int(limits.get("trial_timeout"), doc, "limits.trial_timeout")
        if timeout is None and total and trial_timeout:
            timeout = -(-total // concurrent) * trial_timeout
        count *= concurrent
    _, model, gpus = gpu_from_type(catalog, "azure", instance_type)
    outputs = as_map(d.get("outputs"), doc, "outputs")
    mounts: dict[str, str | None] = {}
    for out_name, out in outputs.items():
        out = out if isinstance(out, dict) else {"path": out}
        # an output without a path goes to the workspace's default datastore: durable too
        mounts[f"/outputs/{out_name}"] = str(out.get("path") or f"azureml://datastores/workspaceblobstore/outputs/"
                                                                f"{out_name}")
    command = re.sub(r"\$\{\{\s*outputs\.([\w-]+)\s*\}\}", r"/outputs/\1", str(trial.get("command") or ""))
    env = tags_of(trial.get("environment_variables") or d.get("environment_variables"))
    checkpoint = checkpoint_of(env, command, mounts)
    tags = tags_of(d.get("tags"))
    locations = as_list(resources.get("locations"), doc, "resources.locations")
    name = str(d.get("name") or d.get("display_name") or Path(doc.path).stem)
    return Job(
        id=f"azureml:{name}", platform="azureml", provider="azure", region=str(locations[0]) if locations else None,
        name=name, instance_type=instance_type, instance_count=count, gpu_model=model, gpu_count=gpus,
        spot=str(as_map(d.get("queue_settings"), doc, "queue_settings").get("job_tier", "")).lower() == "spot",
        checkpoint_uri=checkpoint, checkpoint_interval_min=interval_of(tags, {}, doc), max_runtime_s=timeout,
        tags=tags, source_file=doc.path, source_line=doc.line, workload="training", manifest_kind=kind,
        accelerator=instance_type if instance_type and (model or looks_gpu("azure", instance_type)) else None,
        annotations=own_keys(tags))


"""Azure ML command and sweep jobs, as the CLI v2 YAML writes them."""

from __future__ import annotations

import re
from pathlib import Path

from auditor.model import Job
from auditor.providers.catalog import Catalog
from auditor.providers.manifests.common import (
    Context,
    as_int,
    as_list,
    as_map,
    checkpoint_of,
    gpu_from_type,
    grid_points,
    interval_of,
    looks_gpu,
    own_keys,
    tags_of,
)
from auditor.providers.manifests.documents import Document, UnknownKind


def parse(doc: Document, ctx: Context) -> list[Job]:
    return [_job(doc, ctx.catalog)]


def _job(doc: Document, catalog: Catalog) -> Job:
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
    job = Job(
        id=f"azureml:{name}", platform="azureml", provider="azure", region=str(locations[0]) if locations else None,
        name=name, instance_type=instance_type, instance_count=count, gpu_model=model, gpu_count=gpus,
        spot=str(as_map(d.get("queue_settings"), doc, "queue_settings").get("job_tier", "")).lower() == "spot",
        checkpoint_uri=checkpoint, checkpoint_interval_min=interval_of(tags, {}, doc), max_runtime_s=timeout,
        tags=tags, source_file=doc.path, source_line=doc.line, workload="training", manifest_kind=kind,
        accelerator=instance_type if instance_type and (model or looks_gpu("azure", instance_type)) else None,
        annotations=own_keys(tags))
    if kind == "sweep":
        _sweep(job, d, limits, doc)
    return job


def _sweep(job: Job, d: dict, limits: dict, doc: Document) -> None:
    """A sweep's limits, sampling and early termination (its instances and runtime are counted above)."""
    sampling = d.get("sampling_algorithm") or "random"
    algorithm = str(as_map(sampling, doc, "sampling_algorithm").get("type") if isinstance(sampling, dict)
                    else sampling).lower()
    grid = None
    if algorithm == "grid":
        sizes: list[int | None] = []
        for value in as_map(d.get("search_space"), doc, "search_space").values():
            value = value if isinstance(value, dict) else {}
            sizes.append(len(as_list(value.get("values"), doc, "search_space values"))
                         if value.get("type") == "choice" else None)
        grid = grid_points(sizes)
    early = as_map(d.get("early_termination"), doc, "early_termination").get("type")
    job.kind = "sweep"
    job.sweep_max_trials = as_int(limits.get("max_total_trials"), doc, "limits.max_total_trials") or grid
    job.sweep_parallel_trials = as_int(limits.get("max_concurrent_trials"), doc, "limits.max_concurrent_trials") or 1
    job.sweep_early_stopping = str(early).lower() if early else None
    job.sweep_algorithm, job.sweep_grid_size = algorithm, grid


"""Azure ML jobs as the CLI v2 YAML writes them: command and sweep jobs, AutoML jobs (a sweep of trials),
fine-tuning jobs, and pipeline jobs (each step a job of its own, on the pipeline's default compute)."""

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
from auditor.providers.manifests.registry import platform

KINDS = ("command", "sweep", "automl", "finetuning", "pipeline")
PIPELINE_INHERITS = ("compute", "resources", "queue_settings", "tags")  # what a step takes from its pipeline


@platform("azureml", what="Azure ML command, sweep, automl, finetuning or pipeline job", rank=3,
          detect=lambda d: "azureml" in str(d.get("$schema", "")).lower() or (d.get("type") in KINDS and any(
              k in d for k in ("command", "trial", "compute", "task", "jobs", "model", "resources"))))
def parse(doc: Document, ctx: Context) -> list[Job]:
    if str(doc.data.get("type")) == "pipeline":
        return _pipeline(doc, ctx.catalog)
    return [_job(doc, ctx.catalog)]


def _pipeline(doc: Document, catalog: Catalog) -> list[Job]:
    """A pipeline job: each step under `jobs` a job of its own (named pipeline/step), on the pipeline's default
    compute unless it names its own; a step that asks for no GPU is not the gate's business."""
    d = doc.data
    name = str(d.get("name") or d.get("display_name") or Path(doc.path).stem)
    settings = as_map(d.get("settings"), doc, "settings")
    base = {k: d[k] for k in PIPELINE_INHERITS if k in d}
    if settings.get("default_compute"):
        base["compute"] = settings["default_compute"]
    jobs = []
    for step, spec in as_map(d.get("jobs"), doc, "jobs").items():
        spec = as_map(spec, doc, f"jobs.{step}")
        if str(spec.get("type") or "command") == "pipeline":
            raise doc.error(f"jobs.{step}: a pipeline inside a pipeline; the gate reads its steps from its own file",
                            UnknownKind)
        job = _job(doc.part({**base, **spec, "name": f"{name}/{step}"}), catalog)
        if job.accelerator or job.gpu_model:
            jobs.append(job)
    return jobs


def _job(doc: Document, catalog: Catalog) -> Job:
    d = doc.data
    kind = str(d.get("type") or "command")
    if kind not in KINDS:
        raise doc.error(f"unknown manifest kind: Azure ML {kind} job (the gate reads command, sweep, automl, "
                        "finetuning and pipeline jobs)", UnknownKind)
    trial = as_map(d.get("trial"), doc, "trial") if kind == "sweep" else d
    resources = as_map(d.get("resources") or trial.get("resources"), doc, "resources")
    types = as_list(resources.get("instance_types"), doc, "resources.instance_types")  # fine-tuning: a choice
    instance_type = resources.get("instance_type") or (types[0] if types else None)
    instance_type = str(instance_type) if instance_type else None
    count = as_int(resources.get("instance_count"), doc, "resources.instance_count") or 1
    limits = as_map(d.get("limits"), doc, "limits")
    timeout = as_int(limits.get("timeout"), doc, "limits.timeout")
    if kind == "automl":  # trials of an AutoML search, max_concurrent_trials at once; its timeout in minutes
        minutes = as_int(limits.get("timeout_minutes"), doc, "limits.timeout_minutes")
        timeout = minutes * 60 if minutes is not None else timeout
        count *= as_int(limits.get("max_concurrent_trials"), doc, "limits.max_concurrent_trials") or 1
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
        tags=tags, source_file=doc.path, source_line=doc.line,
        workload="fine-tuning" if kind == "finetuning" else "training", manifest_kind=kind,
        accelerator=instance_type if instance_type and (model or looks_gpu("azure", instance_type)) else None,
        annotations=own_keys(tags))
    if kind == "sweep":
        _sweep(job, d, limits, doc)
    elif kind == "automl":
        _automl(job, d, limits, doc)
    return job


def _automl(job: Job, d: dict, limits: dict, doc: Document) -> None:
    """An AutoML job is a sweep: max_trials in all (1 unless set), max_concurrent_trials at once, and the early
    termination and sampling of its `sweep` section (image tasks)."""
    sweep = as_map(d.get("sweep"), doc, "sweep")
    early = as_map(sweep.get("early_termination"), doc, "sweep.early_termination").get("type")
    sampling = sweep.get("sampling_algorithm")
    job.kind = "sweep"
    job.sweep_max_trials = as_int(limits.get("max_trials"), doc, "limits.max_trials") or 1
    job.sweep_parallel_trials = as_int(limits.get("max_concurrent_trials"), doc, "limits.max_concurrent_trials") or 1
    job.sweep_early_stopping = str(early).lower() if early else None
    job.sweep_algorithm = str(sampling).lower() if sampling else None


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


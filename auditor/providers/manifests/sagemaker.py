"""SageMaker CreateTrainingJob and CreateHyperParameterTuningJob requests (JSON or YAML, as the API or boto3
takes them)."""

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
    as_sweep,
    family_named,
    gpu_from_type,
    grid_points,
    interval_of,
    looks_gpu,
    own_keys,
)
from auditor.providers.manifests.documents import Document
from auditor.providers.manifests.registry import platform


@platform("sagemaker", what="SageMaker CreateTrainingJob or CreateHyperParameterTuningJob request", rank=1,
          detect=lambda d: any(k in d for k in ("TrainingJobName", "AlgorithmSpecification",
                                                 "HyperParameterTuningJobConfig")))
def parse(doc: Document, ctx: Context) -> list[Job]:
    if "HyperParameterTuningJobConfig" in doc.data:
        return [_tuning_job(doc, ctx.catalog)]
    return [_training_job(doc, doc.data, ctx.catalog)]


def _training_job(doc: Document, d: dict, catalog: Catalog) -> Job:
    name = str(d.get("TrainingJobName") or Path(doc.path).stem)
    rc = as_map(d.get("ResourceConfig"), doc, "ResourceConfig")
    groups = [as_map(g, doc, "InstanceGroups[]") for g in as_list(rc.get("InstanceGroups"), doc, "InstanceGroups")]
    total = None
    if groups:  # heterogeneous cluster: the GPU groups (the first names the type), each with its own GPUs
        gpu_groups = [g for g in groups if gpu_from_type(catalog, "aws", g.get("InstanceType"))[1] or
                      family_named(str(g.get("InstanceType") or "").removeprefix("ml."))] or groups
        instance_type = gpu_groups[0].get("InstanceType")
        counts = [as_int(g.get("InstanceCount"), doc, "InstanceGroups[].InstanceCount") or 1 for g in gpu_groups]
        count = sum(counts)
        each = [gpu_from_type(catalog, "aws", g.get("InstanceType"))[2] for g in gpu_groups]
        known = [g for g in each if g is not None]
        total = sum(n * g for n, g in zip(counts, known, strict=True)) if len(known) == len(each) else None
    else:
        instance_type = rc.get("InstanceType")
        count = as_int(rc.get("InstanceCount"), doc, "ResourceConfig.InstanceCount") or 1
    instance_type = str(instance_type) if instance_type else None
    _, model, gpus = gpu_from_type(catalog, "aws", instance_type)
    family = family_named(instance_type.removeprefix("ml.")) if instance_type and model is None else None
    stop = as_map(d.get("StoppingCondition"), doc, "StoppingCondition")
    tags = {}
    for t in as_list(d.get("Tags"), doc, "Tags"):
        if not isinstance(t, dict) or "Key" not in t:
            raise doc.error(f"Tags: expected items like {{Key: team, Value: vision}}, got {t!r}")
        tags[str(t["Key"])] = str(t.get("Value", ""))
    image = str(as_map(d.get("AlgorithmSpecification"), doc, "AlgorithmSpecification").get("TrainingImage") or "")
    region = m.group(1) if (m := re.search(r"\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com", image)) else None
    account = m.group(1) if (m := re.match(r"arn:aws[\w-]*:iam::(\d{12}):", str(d.get("RoleArn") or ""))) else None
    ckpt = as_map(d.get("CheckpointConfig"), doc, "CheckpointConfig").get("S3Uri")
    return Job(
        id=f"sagemaker:{name}", platform="sagemaker", provider="aws", account=account, region=region, name=name,
        instance_type=instance_type, instance_count=count, gpu_model=model, gpu_count=gpus,
        spot=bool(d.get("EnableManagedSpotTraining")), checkpoint_uri=str(ckpt) if ckpt else None,
        checkpoint_interval_min=interval_of(tags, {}, doc),
        max_runtime_s=as_int(stop.get("MaxRuntimeInSeconds"), doc, "StoppingCondition.MaxRuntimeInSeconds"),
        max_wait_s=as_int(stop.get("MaxWaitTimeInSeconds"), doc, "StoppingCondition.MaxWaitTimeInSeconds"),
        tags=tags, source_file=doc.path, source_line=doc.line, workload="training",
        manifest_kind="CreateTrainingJob",
        accelerator=instance_type if instance_type and (model or family or looks_gpu("aws", instance_type)) else None,
        annotations=own_keys(tags), accelerator_family=family, gpu_total=total)



def _tuning_job(doc: Document, catalog: Catalog) -> Job:
    """A tuning job: its training job definition as the trial, MaxParallelTrainingJobs at once and
    MaxNumberOfTrainingJobs in all (a grid search runs every point of its categorical ranges)."""
    d = doc.data
    config = as_map(d.get("HyperParameterTuningJobConfig"), doc, "HyperParameterTuningJobConfig")
    definitions = as_list(d.get("TrainingJobDefinitions"), doc, "TrainingJobDefinitions")
    definition = as_map(d.get("TrainingJobDefinition") or (definitions[0] if definitions else None), doc,
                        "TrainingJobDefinition")
    name = str(d.get("HyperParameterTuningJobName") or Path(doc.path).stem)
    trial = _training_job(doc, {**definition, "TrainingJobName": name, "Tags": d.get("Tags")}, catalog)
    limits = as_map(config.get("ResourceLimits"), doc, "ResourceLimits")
    strategy = str(config.get("Strategy") or "Bayesian")
    ranges = as_map(config.get("ParameterRanges") or definition.get("HyperParameterRanges"), doc, "ParameterRanges")
    grid = None
    if strategy.lower() == "grid":
        continuous = ranges.get("IntegerParameterRanges") or ranges.get("ContinuousParameterRanges")
        grid = grid_points([None] if continuous else [
            len(as_list(as_map(r, doc, "CategoricalParameterRanges[]").get("Values"), doc, "Values"))
            for r in as_list(ranges.get("CategoricalParameterRanges"), doc, "CategoricalParameterRanges")])
    early = "hyperband" if strategy.lower() == "hyperband" else \
        ("auto" if str(config.get("TrainingJobEarlyStoppingType", "Off")).lower() == "auto" else None)
    trial.id, trial.manifest_kind = f"sagemaker:{name}", "CreateHyperParameterTuningJob"
    def limit(key: str) -> int | None:
        return as_int(limits.get(key), doc, f"ResourceLimits.{key}")

    return as_sweep(trial, max_trials=limit("MaxNumberOfTrainingJobs"), parallel=limit("MaxParallelTrainingJobs"),
                    early_stopping=early, algorithm=strategy, grid_size=grid,
                    sweep_runtime_s=limit("MaxRuntimeInSeconds"))

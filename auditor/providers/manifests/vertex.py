"""Vertex AI CustomJob and HyperparameterTuningJob specs, in the REST API's camelCase or the Python SDK's
snake_case."""

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
    checkpoint_of,
    family_named,
    get,
    gpu_from_type,
    gpu_model_named,
    grid_points,
    interval_of,
    seconds,
    tags_of,
)
from auditor.providers.manifests.documents import Document
from auditor.providers.manifests.registry import platform


@platform("vertex", what="Vertex AI CustomJob or HyperparameterTuningJob", rank=2,
          detect=lambda d: any(k in d for k in ("jobSpec", "job_spec", "workerPoolSpecs", "worker_pool_specs",
                                                 "studySpec", "study_spec", "trialJobSpec", "trial_job_spec")))
def parse(doc: Document, ctx: Context) -> list[Job]:
    if get(doc.data, "studySpec") is not None or get(doc.data, "trialJobSpec") is not None:
        return [_tuning_job(doc, ctx.catalog)]
    return [_custom_job(doc, doc.data, ctx.catalog)]


def _custom_job(doc: Document, d: dict, catalog: Catalog) -> Job:
    spec = as_map(get(d, "jobSpec"), doc, "jobSpec") if get(d, "jobSpec") is not None else d
    pools = [as_map(p, doc, "workerPoolSpecs[]") for p in as_list(get(spec, "workerPoolSpecs"), doc, "workerPoolSpecs")]
    machine_type = accelerator = model = family = None
    gpus, total, count, env, words = 0, 0, 0, {}, []
    for pool in pools:
        if not pool:  # an empty pool keeps the places of the pools after it
            continue
        ms = as_map(get(pool, "machineSpec"), doc, "machineSpec")
        acc_type = get(ms, "acceleratorType")
        acc_count = as_int(get(ms, "acceleratorCount"), doc, "machineSpec.acceleratorCount") or 0
        mt = get(ms, "machineType")
        _, type_model, type_gpus = gpu_from_type(catalog, "gcp", mt)
        other = family_named(acc_type) or family_named(mt)  # a TPU (TPU_V5_LITEPOD, ct5lp-hightpu-4t)
        if (acc_type and acc_type != "ACCELERATOR_TYPE_UNSPECIFIED") or type_model or other:
            replicas = as_int(get(pool, "replicaCount"), doc, "replicaCount") or 1
            count += replicas
            gpus = max(gpus, acc_count or type_gpus or 0)
            total += replicas * (acc_count or type_gpus or 0)  # each pool its own accelerators
            if machine_type is None:
                machine_type = mt
                accelerator = acc_type or mt
                model = gpu_model_named(catalog, acc_type) if acc_type else type_model
                family = other if model is None else None
        for key in ("containerSpec", "pythonPackageSpec"):
            c = as_map(get(pool, key), doc, key)
            for e in as_list(c.get("env"), doc, "env"):
                if isinstance(e, dict) and e.get("name"):
                    env[str(e["name"])] = str(e.get("value", ""))
            words += [str(w) for w in as_list(c.get("command"), doc, "command") + as_list(c.get("args"), doc, "args")]
    scheduling = as_map(get(spec, "scheduling"), doc, "scheduling")
    base = as_map(get(spec, "baseOutputDirectory"), doc, "baseOutputDirectory")
    base_uri = get(base, "outputUriPrefix")
    # Vertex AI sets AIP_CHECKPOINT_DIR to <baseOutputDirectory>/checkpoints/ for the job
    checkpoint = checkpoint_of(env, " ".join(words), {}) or (str(base_uri).rstrip("/") + "/checkpoints/"
                                                          if base_uri else None)
    labels = tags_of(d.get("labels"))
    full = str(d.get("name") or "")
    region = m.group(1) if (m := re.search(r"/locations/([a-z0-9-]+)", full)) else None
    if region is None:
        images = " ".join(str(get(as_map(get(p, "containerSpec"), doc, "containerSpec"), "imageUri") or "")
                          for p in pools)
        region = m.group(1) if (m := re.search(r"\b([a-z]+-[a-z]+\d)-docker\.pkg\.dev", images)) else None
    account = m.group(1) if (m := re.match(r"projects/([^/]+)/", full)) else None
    name = str(get(d, "displayName") or full.rsplit("/", 1)[-1] or Path(doc.path).stem)
    return Job(
        id=f"vertex:{name}", platform="vertex", provider="gcp", account=account, region=region, name=name,
        instance_type=machine_type, instance_count=count or 1, gpu_model=model, gpu_count=gpus or None,
        spot=str(scheduling.get("strategy", "")).upper() == "SPOT", checkpoint_uri=checkpoint,
        checkpoint_interval_min=interval_of(labels, {}, doc),
        max_runtime_s=seconds(scheduling.get("timeout"), doc, "scheduling.timeout"), tags=labels,
        source_file=doc.path, source_line=doc.line, workload="training", manifest_kind="CustomJob",
        accelerator=accelerator, accelerator_family=family, gpu_total=total or None)



# Vertex AI's study algorithms; an unspecified one is Bayesian optimisation
ALGORITHMS = {"ALGORITHM_UNSPECIFIED": "bayesian", "GRID_SEARCH": "grid", "RANDOM_SEARCH": "random"}
STOPPING = ("decayCurveStoppingSpec", "medianAutomatedStoppingSpec", "convexAutomatedStoppingSpec", "convexStopConfig")


def _tuning_job(doc: Document, catalog: Catalog) -> Job:
    """A HyperparameterTuningJob: its trialJobSpec as the trial, parallelTrialCount at once, maxTrialCount in all."""
    d = doc.data
    study = as_map(get(d, "studySpec"), doc, "studySpec")
    trial = _custom_job(doc, {"displayName": get(d, "displayName"), "name": d.get("name"), "labels": d.get("labels"),
                              "jobSpec": as_map(get(d, "trialJobSpec"), doc, "trialJobSpec")}, catalog)
    algorithm = str(get(study, "algorithm") or "ALGORITHM_UNSPECIFIED")
    early = next((key for key in STOPPING if get(study, key) is not None), None)
    grid = None
    if ALGORITHMS.get(algorithm) == "grid":
        sizes: list[int | None] = []
        for p in as_list(get(study, "parameters"), doc, "studySpec.parameters"):
            p = as_map(p, doc, "parameters[]")
            listed = get(p, "discreteValueSpec") or get(p, "categoricalValueSpec")
            ints = get(p, "integerValueSpec")
            if listed is not None:
                sizes.append(len(as_list(as_map(listed, doc, "valueSpec").get("values"), doc, "values")))
            elif ints is not None:
                lo, hi = (as_int(get(ints, k), doc, f"integerValueSpec.{k}") for k in ("minValue", "maxValue"))
                sizes.append(hi - lo + 1 if lo is not None and hi is not None and hi >= lo else None)
            else:
                sizes.append(None)
        grid = grid_points(sizes)
    trial.manifest_kind = "HyperparameterTuningJob"
    return as_sweep(trial, max_trials=as_int(get(d, "maxTrialCount"), doc, "maxTrialCount"),
                    parallel=as_int(get(d, "parallelTrialCount"), doc, "parallelTrialCount"),
                    early_stopping=early and early.removesuffix("Spec").removesuffix("Config"),
                    algorithm=ALGORITHMS.get(algorithm, algorithm), grid_size=grid)

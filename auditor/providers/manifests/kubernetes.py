"""Kubernetes objects to jobs: the kinds the gate reads and where each keeps its pod templates.

Core workloads (Pod, Job, CronJob, Deployment, StatefulSet, ReplicaSet, ReplicationController, DaemonSet) are read
here, Kubeflow's in kubeflow.py, the operators' (Volcano, KubeRay, JobSet, LeaderWorkerSet, Argo, Tekton) in
operators.py, KServe's in kserve.py; `KINDS` maps (API group, kind) to each reader. A Katib Experiment wraps any of
them as its trial; any object that carries another whole (an Argo `resource:` step) is read for the one it carries
(`embedded`). Kueue's objects place the workloads queued to them (kueue.py).
Any other object that asks for a GPU somewhere is named, never passed: its kind is not read.
"""

from __future__ import annotations

import re
from typing import Any

from auditor.errors import InputError
from auditor.model import Job
from auditor.providers.manifests import kserve, kubeflow, kueue, registry
from auditor.providers.manifests.common import (
    RUNTIME_KEY,
    Context,
    as_int,
    as_list,
    as_map,
    as_sweep,
    grid_points,
    lenient_map,
    own_keys,
    range_points,
    runtime_hours,
    tags_of,
)
from auditor.providers.manifests.documents import Document, UnknownKind, unrendered, yaml_documents
from auditor.providers.manifests.pods import Workload, build_job, gpu_request_path
from auditor.providers.manifests.registry import kinds, platform

# kinds of groups the gate reads that run nothing of their own (a Kubeflow kind not read is named); KServe's
# graphs route to InferenceServices, its trained models load onto one, its storage and caches hold models
QUIET_KINDS = {("kubeflow.org", "Profile"), ("kubeflow.org", "PodDefault")} | \
    {("serving.kserve.io", k) for k in ("InferenceGraph", "TrainedModel", "ClusterStorageContainer",
                                        "LocalModelCache", "LocalModelNodeGroup", "ClusterLocalModel")}
# Objects that say where other workloads run, never workloads: Kueue's queues and flavors (and its Workload, which
# Kueue makes from a queued job: the job itself is judged).
PLACEMENT_GROUPS = {"kueue.x-k8s.io"}

CREATING = ("create", "apply", "replace")  # an Argo resource step's actions that start what its manifest holds
MANIFEST_TEXT = re.compile(r"^\s*apiVersion\s*:", re.M)  # YAML text that holds a Kubernetes object


@platform("kubernetes", what="Kubernetes or Kubeflow object", rank=0,
          detect=lambda d: "apiVersion" in d and "kind" in d)
def parse(doc: Document, ctx: Context) -> list[Job]:
    """The jobs of one Kubernetes object; [] for one that runs nothing on a GPU."""
    d = doc.data
    kind, api = str(d["kind"]), str(d["apiVersion"])
    group = _group(api)
    if kind == "List":
        items = as_list(d.get("items"), doc, "items")
        return [j for i, item in enumerate(items) for j in parse(_item(doc, item, i), ctx)]
    meta = as_map(d.get("metadata"), doc, "metadata")
    spec = as_map(d.get("spec"), doc, "spec")
    if (group, kind) == ("kubeflow.org", "Experiment"):
        return _katib(doc, meta, spec, ctx)
    if group in PLACEMENT_GROUPS:  # read before parsing (collect) for where the workloads they queue run
        return []
    inner = [j for part in embedded(doc) for j in parse(part, ctx)]
    reader = registry.reader(group, kind)
    if reader is None:
        if inner:  # a wrapper of other objects: judged by what it wraps
            return inner
        if where := gpu_request_path(d):
            raise doc.error(f"unknown manifest kind {kind} ({api}): it asks for GPUs at {where}, and the gate does "
                            "not read this kind", UnknownKind)
        if group in registry.QUIET_GROUPS or (group, kind) in QUIET_KINDS or embedded(doc):
            return []
        raise doc.error(f"unknown manifest kind {kind} ({api})", UnknownKind)
    workloads = reader(doc, spec, ctx)
    if workloads is None:  # judged through the objects that use it
        return inner
    jobs = [j for w in workloads if (j := build_job(doc, ctx, w))] + inner
    if not jobs and (where := gpu_request_path(d)):
        raise doc.error(f"{kind} ({api}) asks for GPUs at {where}, a place the gate does not read", UnknownKind)
    return jobs


def _item(doc: Document, item: Any, i: int) -> Document:
    """An item of a List (`kubectl get -o yaml`, kustomize), which is a Kubernetes object of its own."""
    item = as_map(item, doc, f"items[{i}]")
    if "apiVersion" not in item or "kind" not in item:
        raise doc.error(f"items[{i}]: expected a Kubernetes object with apiVersion and kind")
    return doc.part(item)


# The core kinds: their groups' other kinds (Service, ConfigMap, PVC, ...) run nothing of their own.
@kinds("", "Pod", others_pass=True)
def _pod(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    return [Workload([(1, {"metadata": doc.data.get("metadata"), "spec": spec})])]


@kinds("batch", "Job", others_pass=True)
def _job(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    return [Workload([(as_int(spec.get("parallelism"), doc, "spec.parallelism") or 1, spec.get("template"))],
                     deadline=as_int(spec.get("activeDeadlineSeconds"), doc, "spec.activeDeadlineSeconds"))]


@kinds("batch", "CronJob")
def _cron_job(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    job_template = as_map(spec.get("jobTemplate"), doc, "spec.jobTemplate")
    job_spec = as_map(job_template.get("spec"), doc, "spec.jobTemplate.spec")
    jt_meta = as_map(job_template.get("metadata"), doc, "spec.jobTemplate.metadata")
    return [Workload([(as_int(job_spec.get("parallelism"), doc, "parallelism") or 1, job_spec.get("template"))],
                     deadline=as_int(job_spec.get("activeDeadlineSeconds"), doc,
                                     "spec.jobTemplate.spec.activeDeadlineSeconds"),
                     labels=tags_of(jt_meta.get("labels")), annotations=tags_of(jt_meta.get("annotations")))]


@kinds("apps", "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", others_pass=True)
@kinds("", "ReplicationController")
def _server(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    replicas = as_int(spec.get("replicas"), doc, "spec.replicas")
    claims = {c.get("metadata", {}).get("name") for c in as_list(spec.get("volumeClaimTemplates"), doc,
                                                                  "spec.volumeClaimTemplates") if isinstance(c, dict)}
    return [Workload([(1 if replicas is None else replicas, spec.get("template"))], workload="inference",
                     kind="server", claim_templates=claims)]


def _group(api: str) -> str:
    return api.rsplit("/", 1)[0] if "/" in api else ""


def embedded(doc: Document) -> list[Document]:
    """The Kubernetes objects another object carries inside it, as documents of their own: an Argo `resource:`
    step's `manifest` (YAML text, or an object), any CRD that wraps a workload whole. Not descended into: what
    they carry in turn is found when they are parsed."""
    out: list[Document] = []
    stack: list[tuple[Any, str]] = [(v, k) for k, v in doc.data.items() if k not in ("metadata", "status")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("apiVersion"), str) and isinstance(value.get("kind"), str) and \
                    ("spec" in value or "metadata" in value):  # an object, not a reference ({apiVersion, kind, name})
                out.append(doc.part(value))
                continue
            if str(value.get("action", "create")).lower() not in CREATING:
                continue  # an Argo step that deletes, patches or waits on an object runs nothing new
            stack += [(v, f"{path}.{k}") for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{path}[{i}]") for i, v in enumerate(value)]
        elif isinstance(value, str) and MANIFEST_TEXT.search(value) and "\n" in value.strip():
            try:
                parts = [d.data for d in yaml_documents(value, doc.path)]
            except InputError as e:
                raise doc.error(f"{path}: the manifest it holds cannot be read: {e.message}") from None
            out += [doc.part(p) for p in parts if isinstance(p, dict) and "apiVersion" in p and "kind" in p]
    for part in out:
        unrendered(part)
    return out


def collect(doc: Document, ctx: Context) -> None:
    """Note what other objects may name: Trainer runtimes (and which runtimes TrainJobs name), and disruption
    budgets. Lenient: the parse that follows reports what is malformed."""
    d = doc.data
    if not isinstance(d, dict):
        return
    kind, group = str(d.get("kind")), _group(str(d.get("apiVersion")))
    if kind == "List" and isinstance(d.get("items"), list):
        for item in d["items"]:
            collect(doc.part(item), ctx)
    elif group == "trainer.kubeflow.org" and kind in kubeflow.RUNTIME_KINDS:
        ctx.runtimes[kubeflow.runtime_key(d)] = doc
    elif group == "trainer.kubeflow.org" and kind == "TrainJob" and (ref := kubeflow.runtime_ref(d)):
        ctx.runtime_refs.add(ref)
    elif group == "kueue.x-k8s.io":
        kueue.collect(d, ctx)
    elif group == "serving.kserve.io" and kind == "InferenceService":
        ctx.serving_runtimes.update(kserve.runtimes_named(d))
    elif group == "policy" and kind == "PodDisruptionBudget" and isinstance(d.get("spec"), dict):
        spec, meta = d["spec"], lenient_map(d.get("metadata"))
        protects = str(spec.get("minAvailable", "1")) not in ("0", "0%") and \
            str(spec.get("maxUnavailable", "")) != "100%"
        if protects and isinstance(spec.get("selector"), dict):
            ctx.budgets.append((str(meta.get("namespace") or "default"), str(meta.get("name")), spec["selector"]))


# ---- Katib --------------------------------------------------------------------------------------------------

KATIB_PARALLEL_DEFAULT = 3  # Katib runs three trials at once unless told otherwise


def _katib(doc: Document, meta: dict, spec: dict, ctx: Context) -> list[Job]:
    """A Katib Experiment: its trial job, parallelTrialCount at once and maxTrialCount in all."""
    template = as_map(spec.get("trialTemplate"), doc, "spec.trialTemplate")
    trial = template.get("trialSpec")
    if trial is None:
        where = "a ConfigMap" if template.get("configMap") else "no trialSpec"
        raise doc.error(f"Katib Experiment: the trial template is in {where}; the gate reads "
                        "spec.trialTemplate.trialSpec", UnknownKind)
    trial = as_map(trial, doc, "spec.trialTemplate.trialSpec")
    if "apiVersion" not in trial or "kind" not in trial:
        raise doc.error("spec.trialTemplate.trialSpec: expected a Kubernetes object with apiVersion and kind")
    algorithm = as_map(spec.get("algorithm"), doc, "spec.algorithm").get("algorithmName")
    early = as_map(spec.get("earlyStopping"), doc, "spec.earlyStopping").get("algorithmName")
    grid = _katib_grid(spec, doc) if str(algorithm).lower() == "grid" else None
    name = str(meta.get("name") or "experiment")
    namespace = str(meta.get("namespace") or "default")
    labels, annotations = tags_of(meta.get("labels")), tags_of(meta.get("annotations"))
    jobs = parse(doc.part(trial), ctx)
    for job in jobs:
        part = job.name.rsplit("/", 1)[1] if len(jobs) > 1 and job.name and "/" in job.name else None
        job.id = f"k8s:{namespace}/Experiment/{name}" + (f"/{part}" if part else "")
        job.name, job.manifest_kind, job.platform = name + (f"/{part}" if part else ""), "Experiment", "kubeflow"
        job.tags = labels | job.tags
        job.annotations = annotations | job.annotations | own_keys(labels)
        if job.max_runtime_s is None and RUNTIME_KEY in job.annotations:  # the runtime of one trial
            job.max_runtime_s = runtime_hours(job.annotations[RUNTIME_KEY], doc)
        as_sweep(job, max_trials=as_int(spec.get("maxTrialCount"), doc, "spec.maxTrialCount"),
                 parallel=as_int(spec.get("parallelTrialCount"), doc, "spec.parallelTrialCount")
                 or KATIB_PARALLEL_DEFAULT, early_stopping=early, algorithm=algorithm, grid_size=grid)
    return jobs


def _katib_grid(spec: dict, doc: Document) -> int | None:
    sizes: list[int | None] = []
    for p in as_list(spec.get("parameters"), doc, "spec.parameters"):
        p = as_map(p, doc, "parameters[]")
        space = as_map(p.get("feasibleSpace"), doc, "parameters[].feasibleSpace")
        if space.get("list") is not None:
            sizes.append(len(as_list(space["list"], doc, "feasibleSpace.list")))
        else:
            step = space.get("step") or (1 if p.get("parameterType") == "int" else None)
            sizes.append(range_points(space.get("min"), space.get("max"), step))
    return grid_points(sizes)

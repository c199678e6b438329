"""Kubeflow workloads: the training operator's jobs (PyTorchJob, TFJob, MPIJob, ...), Notebooks, and Kubeflow
Trainer TrainJobs with the TrainingRuntime or ClusterTrainingRuntime they name. (Katib Experiments wrap any of
these and are read in kubernetes.py.)"""

from __future__ import annotations

import copy
from typing import Any

from auditor.providers.manifests.common import Context, as_int, as_list, as_map, lenient_map, tags_of
from auditor.providers.manifests.documents import Document
from auditor.providers.manifests.operators import replicated_jobs
from auditor.providers.manifests.pods import Workload
from auditor.providers.manifests.registry import kinds

KUBEFLOW_REPLICAS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
                     "XGBoostJob": "xgbReplicaSpecs", "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs"}
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
TRAINER_JOB = "node"  # the replicated job, and its container, that a TrainJob's trainer settings apply to


@kinds("kubeflow.org", *KUBEFLOW_REPLICAS)
def training_operator(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    key = KUBEFLOW_REPLICAS[str(doc.data["kind"])]
    replica_specs = as_map(spec.get(key), doc, f"spec.{key}")
    templates = [(as_int(as_map(r, doc, role).get("replicas"), doc, f"{role}.replicas") or 1, r.get("template"))
                 for role, r in replica_specs.items()]
    run_policy = as_map(spec.get("runPolicy"), doc, "spec.runPolicy")
    deadline = as_int(run_policy.get("activeDeadlineSeconds", spec.get("activeDeadlineSeconds")), doc,
                      "runPolicy.activeDeadlineSeconds")
    return [Workload(templates, platform="kubeflow", deadline=deadline)]


@kinds("kubeflow.org", "Notebook")
def notebook(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    return [Workload([(1, spec.get("template"))], platform="kubeflow", workload="notebook")]


def runtime_key(data: dict) -> tuple[str, str, str]:
    """(kind, namespace, name) of a runtime object; a cluster runtime has no namespace."""
    meta = lenient_map(data.get("metadata"))
    kind = str(data.get("kind"))
    namespace = str(meta.get("namespace") or "default") if kind == "TrainingRuntime" else ""
    return kind, namespace, str(meta.get("name"))


def runtime_ref(data: dict) -> tuple[str, str, str] | None:
    """The runtime a TrainJob names, as a runtime_key; a ref without a kind means a ClusterTrainingRuntime."""
    spec = lenient_map(data.get("spec"))
    ref = spec.get("runtimeRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    meta = lenient_map(data.get("metadata"))
    kind = str(ref.get("kind") or "ClusterTrainingRuntime")
    namespace = str(meta.get("namespace") or "default") if kind == "TrainingRuntime" else ""
    return kind, namespace, str(ref["name"])


@kinds("trainer.kubeflow.org", *RUNTIME_KINDS, others_pass=True)
def runtime(doc: Document, spec: dict, ctx: Context) -> list[Workload] | None:
    """A runtime some TrainJob of the run names is judged through those jobs (None); one on its own is judged as
    what every TrainJob that uses it would run."""
    if runtime_key(doc.data) in ctx.runtime_refs:
        return None
    return [Workload([(n, t) for _, n, t in _runtime_templates(doc, spec)], platform="kubeflow")]


@kinds("trainer.kubeflow.org", "TrainJob")
def trainjob(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    """A TrainJob: the trainer's settings over its runtime's templates where the runtime is among the files,
    else the trainer container alone (its resources, nodes and pod overrides)."""
    ref = runtime_ref(doc.data)
    runtime_doc = ctx.runtimes.get(ref) if ref else None
    trainer = as_map(spec.get("trainer"), doc, "spec.trainer")
    if runtime_doc is None:
        pod: dict[str, Any] = {"containers": [{"name": TRAINER_JOB}]}
        templates: list[list[Any]] = [[TRAINER_JOB, 1, {"spec": pod}]]  # [name, replicas, template]
    else:
        runtime_spec = as_map(runtime_doc.data.get("spec"), runtime_doc, "spec")
        templates = [[name, n, copy.deepcopy(t)] for name, n, t in _runtime_templates(runtime_doc, runtime_spec)]
    for entry in templates:
        name, _, template = entry
        pod = as_map(as_map(template, doc, "template").get("spec"), doc, "template.spec")
        if name == TRAINER_JOB:
            containers = [c for c in as_list(pod.get("containers"), doc, "containers") if isinstance(c, dict)]
            node = next((c for c in containers if c.get("name") == TRAINER_JOB), containers[0] if containers else {})
            if trainer.get("resourcesPerNode") is not None:
                node["resources"] = as_map(trainer.get("resourcesPerNode"), doc, "spec.trainer.resourcesPerNode")
            for key in ("command", "args"):
                if trainer.get(key) is not None:
                    node[key] = trainer[key]
            node["env"] = as_list(node.get("env"), doc, "env") + as_list(trainer.get("env"), doc, "trainer.env")
            entry[1] = as_int(trainer.get("numNodes"), doc, "spec.trainer.numNodes") or entry[1]
        for override in as_list(spec.get("podTemplateOverrides") or spec.get("podSpecOverrides"), doc, "overrides"):
            o = as_map(override, doc, "podTemplateOverrides[]")
            targets = [t.get("name") for t in as_list(o.get("targetJobs"), doc, "targetJobs") if isinstance(t, dict)]
            if not targets or name in targets:
                _override(pod, as_map(o.get("spec"), doc, "podTemplateOverrides[].spec") if "spec" in o else o, doc)
        template["spec"] = pod
    return [Workload([(n, t) for _, n, t in templates], platform="kubeflow", labels=tags_of(spec.get("labels")),
                     annotations=tags_of(spec.get("annotations")), always=True)]


def _runtime_templates(doc: Document, spec: dict) -> list[tuple[str, int, Any]]:
    """(replicated job, pods, pod template) of a runtime's JobSet template; the node job runs mlPolicy.numNodes."""
    ml_policy = as_map(spec.get("mlPolicy"), doc, "spec.mlPolicy")
    jobset = as_map(as_map(spec.get("template"), doc, "spec.template").get("spec"), doc, "spec.template.spec")
    out = []
    for name, pods, job_spec in replicated_jobs(doc, jobset):
        if name == TRAINER_JOB:
            pods = as_int(ml_policy.get("numNodes"), doc, "spec.mlPolicy.numNodes") or pods
        out.append((name, pods, job_spec.get("template")))
    return out


def _override(pod: dict, o_spec: dict, doc: Document) -> None:
    """A TrainJob's pod override: node placement and volumes replace the runtime's; containers add mounts and env."""
    for key in ("nodeSelector", "affinity", "tolerations", "volumes"):
        if o_spec.get(key):
            pod[key] = o_spec[key]
    containers = {c.get("name"): c for c in as_list(pod.get("containers"), doc, "containers") if isinstance(c, dict)}
    for c in as_list(o_spec.get("containers"), doc, "containers"):
        if not isinstance(c, dict):
            continue
        target = containers.get(c.get("name")) or containers.get(TRAINER_JOB) or next(iter(containers.values()), {})
        target["volumeMounts"] = as_list(target.get("volumeMounts"), doc, "volumeMounts") + \
            as_list(c.get("volumeMounts"), doc, "volumeMounts")
        target["env"] = as_list(target.get("env"), doc, "env") + as_list(c.get("env"), doc, "env")

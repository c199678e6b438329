"""Kubernetes objects (Job, CronJob, Pod, Deployment, StatefulSet, ReplicaSet, DaemonSet), Kubeflow
PyTorchJob/TFJob/MPIJob/XGBoostJob and Notebook, Kubeflow Trainer TrainJob and Volcano Job: their pod templates
as jobs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.catalog import Catalog
from auditor.model import Job
from auditor.providers.manifests.common import (
    as_int,
    as_list,
    as_map,
    checkpoint_of,
    gpu_from_type,
    gpu_model_named,
    interval_of,
    looks_gpu,
    own_keys,
    tags_of,
)
from auditor.providers.manifests.documents import Document, UnknownKind

CORE_GROUPS = {"", "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
               "storage.k8s.io", "scheduling.k8s.io", "apiextensions.k8s.io", "admissionregistration.k8s.io",
               "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "certificates.k8s.io",
               "karpenter.sh", "karpenter.k8s.aws", "kubeflow.org", "trainer.kubeflow.org", "batch.volcano.sh",
               "scheduling.volcano.sh"}
KUBEFLOW_REPLICAS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
                     "XGBoostJob": "xgbReplicaSpecs", "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs"}
SERVING_KINDS = {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"}

# node label -> (values that mean spot, the provider it implies)
SPOT_LABELS = {
    "eks.amazonaws.com/capacitytype": ({"spot"}, "aws"),
    "karpenter.sh/capacity-type": ({"spot"}, None),
    "cloud.google.com/gke-spot": ({"true"}, "gcp"),
    "cloud.google.com/gke-preemptible": ({"true"}, "gcp"),
    "kubernetes.azure.com/scalesetpriority": ({"spot"}, "azure"),
}
PROVIDER_PREFIXES = {"eks.amazonaws.com/": "aws", "karpenter.k8s.aws/": "aws", "cloud.google.com/": "gcp",
                     "kubernetes.azure.com/": "azure"}
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
GPU_LABELS = ("cloud.google.com/gke-accelerator", "karpenter.k8s.aws/instance-gpu-name", "nvidia.com/gpu.product",
              "accelerator")
FAMILY_LABEL = "karpenter.k8s.aws/instance-family"
OTHER_ACCELERATORS = re.compile(r"^(amd\.com/gpu|gpu\.intel\.com/.+|habana\.ai/gaudi|aws\.amazon\.com/neuron.*|"
                                r"google\.com/tpu)$")
# MIG profiles that exist only on the 40 GB A100; the others are shared by several GPUs and need a node label.
A100_40GB_MIG = {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}
DURABLE_VOLUMES = ("awsElasticBlockStore", "gcePersistentDisk", "azureDisk", "azureFile", "cephfs", "glusterfs",
                   "iscsi", "rbd", "fc", "portworxVolume", "vsphereVolume", "quobyte", "flexVolume")


@dataclass
class _Pod:
    """What one pod template of a workload asks for, and how many replicas of it run at once."""

    replicas: int
    gpus: int
    mig: str | None
    other: str | None  # a non-NVIDIA accelerator resource
    nodes: dict[str, list[str]]  # node label -> values it may take (nodeSelector and affinity)
    spot: bool
    checkpoint: str | None
    deadline: int | None


def parse(doc: Document, catalog: Catalog) -> list[Job]:
    d = doc.data
    kind, api = str(d["kind"]), str(d["apiVersion"])
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    if kind == "List":
        items = as_list(d.get("items"), doc, "items")
        return [j for item in items for j in parse(doc.part(item), catalog)]
    meta = as_map(d.get("metadata"), doc, "metadata")
    spec = as_map(d.get("spec"), doc, "spec")
    labels, annotations = tags_of(meta.get("labels")), tags_of(meta.get("annotations"))
    deadline = None
    platform, workload = "kubernetes", "training"
    if kind == "Pod" and group == "":
        templates = [(1, {"metadata": meta, "spec": spec})]
    elif kind == "Job" and group == "batch":
        templates = [(as_int(spec.get("parallelism"), doc, "spec.parallelism") or 1, spec.get("template"))]
        deadline = as_int(spec.get("activeDeadlineSeconds"), doc, "spec.activeDeadlineSeconds")
    elif kind == "CronJob" and group == "batch":
        job_template = as_map(spec.get("jobTemplate"), doc, "spec.jobTemplate")
        job_spec = as_map(job_template.get("spec"), doc, "spec.jobTemplate.spec")
        jt_meta = as_map(job_template.get("metadata"), doc, "spec.jobTemplate.metadata")
        labels |= tags_of(jt_meta.get("labels"))
        annotations |= tags_of(jt_meta.get("annotations"))
        templates = [(as_int(job_spec.get("parallelism"), doc, "parallelism") or 1, job_spec.get("template"))]
        deadline = as_int(job_spec.get("activeDeadlineSeconds"), doc, "spec.jobTemplate.spec.activeDeadlineSeconds")
    elif kind in SERVING_KINDS and group == "apps":
        templates = [(as_int(spec.get("replicas"), doc, "spec.replicas") or 1, spec.get("template"))]
        workload = "inference"
    elif kind in KUBEFLOW_REPLICAS and group == "kubeflow.org":
        platform = "kubeflow"
        replica_specs = as_map(spec.get(KUBEFLOW_REPLICAS[kind]), doc, f"spec.{KUBEFLOW_REPLICAS[kind]}")
        templates = [(as_int(as_map(r, doc, role).get("replicas"), doc, f"{role}.replicas") or 1, r.get("template"))
                     for role, r in replica_specs.items()]
        run_policy = as_map(spec.get("runPolicy"), doc, "spec.runPolicy")
        deadline = as_int(run_policy.get("activeDeadlineSeconds", spec.get("activeDeadlineSeconds")), doc,
                        "runPolicy.activeDeadlineSeconds")
    elif kind == "Notebook" and group == "kubeflow.org":
        platform, workload = "kubeflow", "notebook"
        templates = [(1, spec.get("template"))]
    elif kind == "TrainJob" and group == "trainer.kubeflow.org":
        platform = "kubeflow"
        labels |= tags_of(spec.get("labels"))
        annotations |= tags_of(spec.get("annotations"))
        templates = [_trainjob_template(spec, doc)]
    elif kind == "Job" and group == "batch.volcano.sh":
        platform = "volcano"
        tasks = as_list(spec.get("tasks"), doc, "spec.tasks")
        templates = [(as_int(as_map(t, doc, "task").get("replicas"), doc, "tasks[].replicas") or 1, t.get("template"))
                     for t in tasks]
    elif group in CORE_GROUPS:
        return []  # a Service, ConfigMap, PersistentVolumeClaim, ...: runs nothing
    else:
        raise doc.error(f"unknown manifest kind {kind} ({api})", UnknownKind)

    volume_claims = {c.get("metadata", {}).get("name") for c in as_list(spec.get("volumeClaimTemplates"), doc,
                                                                          "spec.volumeClaimTemplates")
                     if isinstance(c, dict)}
    pods = []
    for replicas, template in templates:
        t = as_map(template, doc, "template")
        t_meta = as_map(t.get("metadata"), doc, "template.metadata")
        labels |= tags_of(t_meta.get("labels"))
        annotations |= tags_of(t_meta.get("annotations"))
        pods.append(_pod(replicas, as_map(t.get("spec"), doc, "template.spec"), volume_claims, doc))
    gpu_pods = [p for p in pods if p.gpus or p.other]
    if not gpu_pods and kind != "TrainJob":
        return []  # no GPU asked for: not the gate's business
    nodes: dict[str, list[str]] = {}
    for p in gpu_pods or pods:
        for k, v in p.nodes.items():
            nodes.setdefault(k, v)
    provider = next((prov for prefix, prov in PROVIDER_PREFIXES.items() for k in nodes if k.startswith(prefix)), None)
    instance_type = next((nodes[k][0] for k in TYPE_LABELS if nodes.get(k)), None)
    gpu_label = next((nodes[k][0] for k in GPU_LABELS if nodes.get(k)), None)
    provider, model, _ = gpu_from_type(catalog, provider, instance_type)
    mig = next((p.mig for p in gpu_pods if p.mig), None)
    other = next((p.other for p in gpu_pods if p.other), None)
    accelerator = instance_type if instance_type and (model or looks_gpu(provider, instance_type)) else None
    if model is None and gpu_label:
        model, accelerator = gpu_model_named(catalog, gpu_label), gpu_label
    if model is None and nodes.get(FAMILY_LABEL):
        model = catalog.gpu_model_for("aws", nodes[FAMILY_LABEL][0] + ".x")
        accelerator = nodes[FAMILY_LABEL][0]
    if model is None and mig:
        model = "A100" if mig in A100_40GB_MIG else None
        accelerator = accelerator or f"nvidia.com/mig-{mig}"
    if other:
        model, accelerator = None, other
    name = str(meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else Path(doc.path).stem))
    namespace = str(meta.get("namespace") or "default")
    deadline = deadline or next((p.deadline for p in pods if p.deadline), None)
    id_kind = "VolcanoJob" if platform == "volcano" else kind  # not to be taken for a batch/v1 Job
    return [Job(
        id=f"k8s:{namespace}/{id_kind}/{name}", platform=platform, provider=provider,
        region=next((nodes[k][0] for k in REGION_LABELS if nodes.get(k)), None), name=name,
        instance_type=instance_type, instance_count=sum(p.replicas for p in gpu_pods) or 1,
        gpu_model=model, gpu_count=max((p.gpus for p in gpu_pods), default=None) or None,
        spot=any(p.spot for p in pods), checkpoint_uri=next((p.checkpoint for p in pods if p.checkpoint), None),
        checkpoint_interval_min=interval_of(labels, annotations, doc), max_runtime_s=deadline,
        tags=labels, source_file=doc.path, source_line=doc.line, workload=workload, manifest_kind=kind,
        accelerator=accelerator, mig_profile=mig, annotations=annotations | own_keys(labels))]


def _trainjob_template(spec: dict, doc: Document) -> tuple[int, dict]:
    """A Kubeflow Trainer TrainJob as one pod template: the trainer container with its resources per node,
    and the pod overrides (node selectors, tolerations, volumes) of the node job."""
    trainer = as_map(spec.get("trainer"), doc, "spec.trainer")
    container = {"name": "node", "resources": as_map(trainer.get("resourcesPerNode"), doc, "resourcesPerNode"),
                 "env": trainer.get("env"), "command": trainer.get("command"), "args": trainer.get("args")}
    pod: dict[str, Any] = {"containers": [container]}
    for override in as_list(spec.get("podTemplateOverrides") or spec.get("podSpecOverrides"), doc, "overrides"):
        o = as_map(override, doc, "podTemplateOverrides[]")
        o_spec = as_map(o.get("spec"), doc, "podTemplateOverrides[].spec") if "spec" in o else o
        for key in ("nodeSelector", "affinity", "tolerations", "volumes"):
            if o_spec.get(key):
                pod[key] = o_spec[key]
        for c in as_list(o_spec.get("containers"), doc, "containers"):
            container["volumeMounts"] = (container.get("volumeMounts") or []) + (c.get("volumeMounts") or [])
            container["env"] = (container.get("env") or []) + (c.get("env") or [])
    return as_int(trainer.get("numNodes"), doc, "spec.trainer.numNodes") or 1, {"spec": pod}


def _pod(replicas: int, spec: dict, claim_templates: set, doc: Document) -> _Pod:
    gpus, mig, other = 0, None, None
    env: dict[str, str] = {}
    words: list[str] = []
    mounts: dict[str, str | None] = {}
    volumes = {v.get("name"): v for v in as_list(spec.get("volumes"), doc, "volumes") if isinstance(v, dict)}
    for c in as_list(spec.get("containers"), doc, "containers"):
        c = as_map(c, doc, "containers[]")
        res = as_map(c.get("resources"), doc, "resources")
        amounts = as_map(res.get("requests"), doc, "resources.requests") | as_map(res.get("limits"), doc, "limits")
        for key, value in amounts.items():
            if key == "nvidia.com/gpu":
                gpus += as_int(value, doc, f"resources {key}") or 0
            elif key.startswith("nvidia.com/mig-"):
                gpus += as_int(value, doc, f"resources {key}") or 0
                mig = key.removeprefix("nvidia.com/mig-")
            elif OTHER_ACCELERATORS.match(key):
                other = key
        for e in as_list(c.get("env"), doc, "env"):
            if isinstance(e, dict) and e.get("name") and isinstance(e.get("value"), str | int):
                env[str(e["name"])] = str(e["value"])
        words += [str(w) for w in as_list(c.get("command"), doc, "command") + as_list(c.get("args"), doc, "args")]
        for m in as_list(c.get("volumeMounts"), doc, "volumeMounts"):
            if isinstance(m, dict) and m.get("mountPath"):
                uri = _volume_uri(volumes.get(m.get("name")), m.get("name"), claim_templates)
                if uri and m.get("subPath"):
                    uri = uri.rstrip("/") + "/" + str(m["subPath"]).strip("/")
                mounts[str(m["mountPath"])] = uri
    nodes: dict[str, list[str]] = {str(k).lower() if str(k).lower() in SPOT_LABELS else str(k): [str(v)]
                                   for k, v in as_map(spec.get("nodeSelector"), doc, "nodeSelector").items()}
    spot = False
    affinity = as_map(as_map(spec.get("affinity"), doc, "affinity").get("nodeAffinity"), doc, "nodeAffinity")
    required = as_map(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), doc, "required")
    terms = as_list(required.get("nodeSelectorTerms"), doc, "nodeSelectorTerms")
    preferred = as_list(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"), doc, "preferred")
    terms += [p.get("preference") or {} for p in preferred if isinstance(p, dict)]
    for term in terms:
        for e in as_list(as_map(term, doc, "nodeSelectorTerm").get("matchExpressions"), doc, "matchExpressions"):
            if not isinstance(e, dict) or not e.get("key"):
                continue
            key, op = str(e["key"]), str(e.get("operator", ""))
            key = key.lower() if key.lower() in SPOT_LABELS else key
            if op == "In":
                nodes.setdefault(key, [str(v) for v in e.get("values") or []])
            elif op == "Exists":
                nodes.setdefault(key, ["*"])
    for key, values in nodes.items():
        if key in SPOT_LABELS and any(v == "*" or v.lower() in SPOT_LABELS[key][0] for v in values):
            spot = True
    for t in as_list(spec.get("tolerations"), doc, "tolerations"):
        if isinstance(t, dict) and str(t.get("key", "")).lower() in SPOT_LABELS:
            key = str(t["key"]).lower()
            if t.get("operator") == "Exists" or str(t.get("value", "")).lower() in SPOT_LABELS[key][0]:
                spot = True
                nodes.setdefault(key, [str(t.get("value") or "*")])
    checkpoint = checkpoint_of(env, " ".join(words), mounts)
    deadline = as_int(spec.get("activeDeadlineSeconds"), doc, "activeDeadlineSeconds")
    return _Pod(replicas, gpus, mig, other, nodes, spot, checkpoint, deadline)


def _volume_uri(volume: dict | None, name: str | None, claim_templates: set) -> str | None:
    """A durable location for a pod volume; None for one that dies with the pod or the node."""
    if volume is None:
        return f"pvc://{name}" if name in claim_templates else None  # a StatefulSet's own claim
    if "persistentVolumeClaim" in volume:
        return f"pvc://{(volume['persistentVolumeClaim'] or {}).get('claimName', name)}"
    if "csi" in volume:
        csi = volume["csi"] or {}
        attrs = csi.get("volumeAttributes") or {}
        target = attrs.get("bucketName") or attrs.get("bucket") or attrs.get("containerName") or \
            csi.get("volumeHandle") or name
        return f"csi://{csi.get('driver', 'csi')}/{target}"
    if "nfs" in volume:
        nfs = volume["nfs"] or {}
        return f"nfs://{nfs.get('server', '')}{nfs.get('path', '')}"
    for kind in DURABLE_VOLUMES:
        if kind in volume:
            return f"{kind}://{name}"
    return None  # emptyDir, hostPath, ephemeral, configMap, secret, ...


"""Kubernetes pod templates, whatever object carries them: what each asks for (GPUs, nodes, spot, volumes,
checkpoints), and the `Job` a workload of such templates becomes. The kinds that carry them are read in
kubernetes.py, kubeflow.py and operators.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from auditor.model import Job
from auditor.providers.manifests import kueue
from auditor.providers.manifests.common import (
    Context,
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
from auditor.providers.manifests.documents import Document

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
# Accelerators that are not NVIDIA GPUs: resource key -> the family a policy names them by (`allowed` in the
# gpu_types clause). Counted like GPUs, judged by the same spot and tuning rules; not "unknown GPU types".
OTHER_ACCELERATORS = {"google.com/tpu": "TPU", "habana.ai/gaudi": "Gaudi", "amd.com/gpu": "AMD-Instinct",
                      "aws.amazon.com/neuron": "Neuron", "aws.amazon.com/neuroncore": "Neuron",
                      "aws.amazon.com/neurondevice": "Neuron"}
OTHER_PREFIXES = {"gpu.intel.com/": "Intel-GPU"}
NEURON_FAMILIES = {"trn": "Trainium", "inf": "Inferentia"}  # AWS Neuron by instance family (trn1, trn2, inf2)
TPU_LABEL = "cloud.google.com/gke-tpu-accelerator"  # tpu-v5p-slice, tpu-v6e-slice, ...


def other_family(key: str) -> str | None:
    """The family of an accelerator resource that is not an NVIDIA GPU; None for any other resource."""
    return OTHER_ACCELERATORS.get(key) or next((f for p, f in OTHER_PREFIXES.items() if key.startswith(p)), None)
# MIG profiles that exist only on the 40 GB A100; the others are shared by several GPUs and need a node label.
A100_40GB_MIG = {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}
DURABLE_VOLUMES = ("awsElasticBlockStore", "gcePersistentDisk", "azureDisk", "azureFile", "cephfs", "glusterfs",
                   "iscsi", "rbd", "fc", "portworxVolume", "vsphereVolume", "quobyte", "flexVolume")




@dataclass
class Pod:
    """What one pod template of a workload asks for, and how many replicas of it run at once."""

    replicas: int
    gpus: int
    mig: str | None
    other: str | None  # a non-NVIDIA accelerator resource
    nodes: dict[str, list[str]]  # node label -> values it may take (nodeSelector and affinity)
    spot: bool
    checkpoint: str | None
    deadline: int | None
    grace: int | None  # terminationGracePeriodSeconds, where declared
    labels: dict[str, str]


@dataclass
class Workload:
    """One run of pod templates that the gate judges as one job: (replicas, pod template) pairs, and what the
    object that carries them says of the whole."""

    templates: list[tuple[int, object]]
    platform: str = "kubernetes"
    workload: str = "training"  # training, inference, notebook
    kind: str = "job"  # job, server, sweep
    deadline: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    part: str | None = None  # the step of a workflow or pipeline that this job is
    claim_templates: set = field(default_factory=set)  # a StatefulSet's or Workflow's own volume claims
    always: bool = False  # a job even when no template asks for a GPU (the trainer's resources may be elsewhere)
    sequential: bool = False  # the containers run one after another (Tekton steps): GPUs are the most of one


def read_pod(replicas: int, spec: dict, claim_templates: set, doc: Document, labels: dict[str, str] | None = None,
             sequential: bool = False) -> Pod:
    gpus, mig, other = 0, None, None
    env: dict[str, str] = {}
    words: list[str] = []
    mounts: dict[str, str | None] = {}
    volumes = {v.get("name"): v for v in as_list(spec.get("volumes"), doc, "volumes") if isinstance(v, dict)}
    for c in as_list(spec.get("containers"), doc, "containers"):
        c = as_map(c, doc, "containers[]")
        res = as_map(c.get("resources"), doc, "resources")
        amounts = as_map(res.get("requests"), doc, "resources.requests") | as_map(res.get("limits"), doc, "limits")
        own = 0
        for key, value in amounts.items():
            if key == "nvidia.com/gpu":
                own += as_int(value, doc, f"resources {key}") or 0
            elif key.startswith("nvidia.com/mig-"):
                own += as_int(value, doc, f"resources {key}") or 0
                mig = key.removeprefix("nvidia.com/mig-")
            elif other_family(key):
                own += as_int(value, doc, f"resources {key}") or 0
                other = key
        gpus = max(gpus, own) if sequential else gpus + own
        for e in as_list(c.get("env"), doc, "env"):
            if isinstance(e, dict) and e.get("name") and isinstance(e.get("value"), str | int):
                env[str(e["name"])] = str(e["value"])
        words += [str(w) for w in as_list(c.get("command"), doc, "command") + as_list(c.get("args"), doc, "args")]
        words.append(str(c.get("script") or ""))  # Tekton steps and Argo scripts
        for m in as_list(c.get("volumeMounts"), doc, "volumeMounts"):
            if isinstance(m, dict) and m.get("mountPath"):
                uri = volume_uri(volumes.get(m.get("name")), m.get("name"), claim_templates)
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
    grace = as_int(spec.get("terminationGracePeriodSeconds"), doc, "terminationGracePeriodSeconds")
    return Pod(replicas, gpus, mig, other, nodes, spot, checkpoint, deadline, grace, labels or {})


def volume_uri(volume: dict | None, name: str | None, claim_templates: set) -> str | None:
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



def build_job(doc: Document, ctx: Context, w: Workload) -> Job | None:
    """The job of a workload's pod templates; None when none of them asks for a GPU."""
    d = doc.data
    kind = str(d["kind"])
    meta = as_map(d.get("metadata"), doc, "metadata")
    labels = tags_of(meta.get("labels")) | w.labels
    annotations = tags_of(meta.get("annotations")) | w.annotations
    pods = []
    for replicas, template in w.templates:
        t = as_map(template, doc, "template")
        t_meta = as_map(t.get("metadata"), doc, "template.metadata")
        labels |= tags_of(t_meta.get("labels"))
        annotations |= tags_of(t_meta.get("annotations"))
        pods.append(read_pod(replicas, as_map(t.get("spec"), doc, "template.spec"), w.claim_templates, doc,
                             tags_of(t_meta.get("labels")), w.sequential))
    gpu_pods = [p for p in pods if p.gpus or p.other]
    if not gpu_pods and not w.always:
        return None  # no GPU asked for: not the gate's business
    namespace = str(meta.get("namespace") or "default")
    # a workload queued to Kueue: the flavors it may be admitted to add their node labels and tolerations
    flavors = [read_pod(0, placement, set(), doc)  # the queue by label (or by annotation, as Kueue first read it)
               for placement in kueue.placements(annotations | labels, namespace, ctx)]
    nodes: dict[str, list[str]] = {}
    for p in (gpu_pods or pods) + flavors[:1]:
        for k, v in p.nodes.items():
            nodes.setdefault(k, v)
    catalog = ctx.catalog
    provider = next((prov for prefix, prov in PROVIDER_PREFIXES.items() for k in nodes if k.startswith(prefix)), None)
    instance_type = next((nodes[k][0] for k in TYPE_LABELS if nodes.get(k)), None)
    gpu_label = next((nodes[k][0] for k in GPU_LABELS if nodes.get(k)), None)
    provider, model, _ = gpu_from_type(catalog, provider, instance_type)
    mig = next((p.mig for p in gpu_pods if p.mig), None)
    other = next((p.other for p in gpu_pods if p.other), None)
    # an instance type the catalog lacks is an unknown GPU type when it looks like a GPU machine, or when the pods
    # ask for NVIDIA GPUs on it (no provider label needed: the request says what it is meant to be)
    asks_gpus = any(p.gpus for p in gpu_pods) and not other
    accelerator = (instance_type if instance_type and (model or asks_gpus or looks_gpu(provider, instance_type))
                   else None)
    if model is None and gpu_label:
        model, accelerator = gpu_model_named(catalog, gpu_label), gpu_label
    if model is None and nodes.get(FAMILY_LABEL):
        model = catalog.gpu_model_for("aws", nodes[FAMILY_LABEL][0] + ".x")
        accelerator = nodes[FAMILY_LABEL][0]
    if model is None and mig:
        model = "A100" if mig in A100_40GB_MIG else None
        accelerator = accelerator or f"nvidia.com/mig-{mig}"
    family = None
    if other:
        model, family, accelerator = None, other_family(other), other
        if family == "Neuron":
            machine = (instance_type or (nodes.get(FAMILY_LABEL) or [""])[0]).removeprefix("ml.").split(".")[0]
            family = next((f for prefix, f in NEURON_FAMILIES.items() if machine.startswith(prefix)), family)
        accelerator = (nodes.get(TPU_LABEL) or [family])[0] if family == "TPU" else family
    name = str(meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else Path(doc.path).stem))
    deadline = w.deadline or next((p.deadline for p in pods if p.deadline), None)
    id_kind = "VolcanoJob" if w.platform == "volcano" else kind  # not to be taken for a batch/v1 Job
    serving = gpu_pods or pods
    graces = [p.grace for p in serving]
    budget = None
    if w.kind == "server":
        budget = next((b for ns, b, selector in ctx.budgets if ns == namespace and
                       any(_selects(selector, p.labels) for p in serving)), None)
    return Job(
        id=f"k8s:{namespace}/{id_kind}/{name}" + (f"/{w.part}" if w.part else ""), platform=w.platform,
        provider=provider, region=next((nodes[k][0] for k in REGION_LABELS if nodes.get(k)), None),
        name=name + (f"/{w.part}" if w.part else ""),
        instance_type=instance_type, instance_count=sum(p.replicas for p in gpu_pods) or 1,
        gpu_model=model, gpu_count=max((p.gpus for p in gpu_pods), default=None) or None,
        spot=any(p.spot for p in pods + flavors),
        checkpoint_uri=next((p.checkpoint for p in pods if p.checkpoint), None),
        checkpoint_interval_min=interval_of(labels, annotations, doc), max_runtime_s=deadline,
        tags=labels, source_file=doc.path, source_line=doc.line, workload=w.workload, manifest_kind=kind,
        accelerator=accelerator, mig_profile=mig, annotations=annotations | own_keys(labels), kind=w.kind,
        grace_period_s=None if None in graces else min((g for g in graces if g is not None), default=None),
        disruption_budget=budget,
        gpu_total=sum(p.replicas * p.gpus for p in gpu_pods) or None, accelerator_family=family)


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions) picks pods with these labels."""
    match = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []
    if not match and not exprs:
        return False  # an empty selector in a PodDisruptionBudget selects nothing useful to rely on
    if any(labels.get(str(k)) != str(v) for k, v in match.items()):
        return False
    for e in exprs:
        key, op, values = str(e.get("key")), e.get("operator"), [str(v) for v in e.get("values") or []]
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) or \
                (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


GPU_KEY = re.compile(r"^(nvidia\.com/gpu|nvidia\.com/mig-.+|amd\.com/gpu|gpu\.intel\.com/.+|habana\.ai/gaudi|"
                     r"aws\.amazon\.com/neuron.*|google\.com/tpu)$")


def gpu_request_path(data: object) -> str | None:
    """Where in an object a container asks for a GPU or another accelerator (a resource key with an amount
    above zero), as a path like spec.workers[0].template.spec.containers[1].resources.limits; None if nowhere.
    Walked without recursion, so any object the reader accepted can be searched."""
    stack: list[tuple[object, str]] = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str) and GPU_KEY.match(k) and str(v).strip() not in ("0", "", "None"):
                    return path.lstrip(".") or k
                stack.append((v, f"{path}.{k}"))
        elif isinstance(value, list):
            stack += [(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return None

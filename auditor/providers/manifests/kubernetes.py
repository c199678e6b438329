"""Training-job manifests to `Job` entities, for the gate.

Reads Kubernetes workloads (Job, CronJob, Pod, Deployment, StatefulSet, ReplicaSet, DaemonSet), Kubeflow
PyTorchJob/TFJob/MPIJob/XGBoostJob and Notebook, Kubeflow Trainer TrainJob, Volcano Job, SageMaker
CreateTrainingJob requests, Vertex AI CustomJob specs, Azure ML command and sweep jobs and SkyPilot tasks,
from multi-document YAML or JSON. Every job keeps its file and the line its document starts on.

What a manifest does not say stays unknown (None) rather than guessed: a Kubernetes GPU request with no node
selector naming the GPU has no GPU model, a SageMaker request has no region unless its image names one. Only
what can be known from the file itself is used; nothing here reaches a cloud.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from auditor.catalog import Catalog, family_of
from auditor.errors import InputError
from auditor.model import Job
from auditor.safeyaml import NoAliasLoader

SUFFIXES = (".yaml", ".yml", ".json")
ANNOTATION_PREFIX = "gpu-auditor.dev/"
INTERVAL_KEY = ANNOTATION_PREFIX + "checkpoint-interval-min"
RUNTIME_KEY = ANNOTATION_PREFIX + "max-runtime-hours"  # for platforms with no runtime limit of their own


class UnknownKind(InputError):
    """A document that is no manifest the gate reads (exit 2, unless --skip-unknown)."""


@dataclass
class Document:
    data: Any
    path: str
    line: int

    def error(self, message: str, kind: type[InputError] = InputError) -> InputError:
        return kind(message, path=self.path, line=self.line)


# ---- files and documents ----------------------------------------------------------------------------------


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given, and folders as the *.yaml, *.yml and *.json files under them, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in SUFFIXES)
        elif p.is_file():
            out.append(p)
        else:
            raise InputError("no such file or folder", path=str(p))
    return out


class _Loader(NoAliasLoader):
    what = "a manifest"


def read_documents(path: str | Path) -> list[Document]:
    name = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte {e.start})", path=name) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", path=name) from None
    if name.lower().endswith(".json"):
        return _json_documents(text, name)
    return _yaml_documents(text, name)


def _yaml_documents(text: str, path: str) -> list[Document]:
    loader = _Loader(text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node)
            if data is not None:
                docs.append(Document(data, path, node.start_mark.line + 1))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        context = f" ({e.context} from line {e.context_mark.line + 1})" if e.context and e.context_mark else ""
        line = min(mark.line + 1, text.count("\n") or 1) if mark else None  # the end of the stream is no line
        raise InputError(f"not valid YAML: {e.problem or e.context}{context}", path=path, line=line) from None
    except yaml.YAMLError as e:
        raise InputError(f"not valid YAML: {e}", path=path) from None
    except InputError as e:
        e.path = path
        raise
    finally:
        loader.dispose()
    return docs


def _json_documents(text: str, path: str) -> list[Document]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg} (column {e.colno})", path=path, line=e.lineno) from None
    start = len(text) - len(text.lstrip())
    if not isinstance(data, list):
        return [Document(data, path, text.count("\n", 0, start) + 1)]
    # a JSON array of requests: find where each element starts, for its line
    decoder, pos, docs = json.JSONDecoder(), start + 1, []
    for item in data:
        while text[pos] in " \t\r\n,":
            pos += 1
        _, end = decoder.raw_decode(text, pos)
        docs.append(Document(item, path, text.count("\n", 0, pos) + 1))
        pos = end
    return docs


def load_jobs(paths: Iterable[str | Path], catalog: Catalog,
              skipped: list[str] | None = None) -> tuple[list[Job], list[str]]:
    """Jobs from manifest files and folders, and the files read. With a `skipped` list, a document of a kind
    the gate does not read is noted there instead of stopping the run."""
    jobs, files = [], []
    for path in expand(paths):
        files.append(str(path))
        for doc in read_documents(path):
            try:
                parsed = parse(doc, catalog)
            except UnknownKind as e:
                if skipped is None:
                    raise
                skipped.append(str(e))
                continue
            for job in parsed:
                if job.max_runtime_s is None and RUNTIME_KEY in job.annotations:
                    job.max_runtime_s = _runtime(job.annotations[RUNTIME_KEY], doc)
                jobs.append(job)
    return jobs, files


def _runtime(hours: str, doc: Document) -> int:
    try:
        value = float(hours)
    except ValueError:
        value = -1
    if not value > 0:
        raise doc.error(f"{RUNTIME_KEY}: expected hours, got {hours!r}")
    return round(value * 3600)


def parse(doc: Document, catalog: Catalog) -> list[Job]:
    """The jobs of one document; [] for a Kubernetes object that runs nothing on a GPU."""
    d = doc.data
    if isinstance(d, dict):
        if "apiVersion" in d and "kind" in d:
            return _kubernetes(doc, catalog)
        if "TrainingJobName" in d or "AlgorithmSpecification" in d:
            return [_sagemaker(doc, catalog)]
        if any(k in d for k in ("jobSpec", "job_spec", "workerPoolSpecs", "worker_pool_specs")):
            return [_vertex(doc, catalog)]
        if "azureml" in str(d.get("$schema", "")).lower() or \
                (d.get("type") in ("command", "sweep") and any(k in d for k in ("command", "trial", "compute"))):
            return [_azureml(doc, catalog)]
        if set(d) <= SKYPILOT_KEYS and ("resources" in d or "run" in d):
            return [_skypilot(doc, catalog)]
    raise doc.error("unknown manifest kind: not a Kubernetes or Kubeflow object, SageMaker CreateTrainingJob "
                    "request, Vertex AI CustomJob, Azure ML command or sweep job, or SkyPilot task", UnknownKind)


# ---- shared helpers -----------------------------------------------------------------------------------------


def _map(value: Any, doc: Document, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(f"{what}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, doc: Document, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise doc.error(f"{what}: expected a list, got {type(value).__name__}")
    return value


def _int(value: Any, doc: Document, what: str) -> int | None:
    """A whole number, also as text ("2", and Vertex AI's int64 strings)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit():
        raise doc.error(f"{what}: expected a whole number, got {value!r}")
    return int(value)


def _seconds(value: Any, doc: Document, what: str) -> int | None:
    """Seconds as a number or a protobuf duration ("86400s")."""
    if isinstance(value, str) and (m := re.fullmatch(r"\s*(\d+)(?:\.\d+)?s\s*", value)):
        return int(m.group(1))
    return _int(value, doc, what)


def _k(d: dict, camel: str) -> Any:
    """A key in camelCase (the REST APIs) or snake_case (the Python SDKs)."""
    if camel in d:
        return d[camel]
    return d.get(re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower())


def _tags(value: Any) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _interval(tags: dict[str, str], annotations: dict[str, str], doc: Document) -> float | None:
    raw = annotations.get(INTERVAL_KEY, tags.get(INTERVAL_KEY))
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        raise doc.error(f"{INTERVAL_KEY}: expected minutes, got {raw!r}") from None


def _own(tags: dict[str, str]) -> dict[str, str]:
    """Keys in the gate's own namespace, wherever a platform lets them be written (tags, labels)."""
    return {k: v for k, v in tags.items() if k.startswith(ANNOTATION_PREFIX)}


# GPU names as the platforms write them -> catalog models: nvidia-tesla-a100, NVIDIA_A100_80GB, A100-80GB:8,
# NVIDIA-A100-SXM4-80GB (GPU feature discovery), a100 (Karpenter), nvidia-h100-mega-80gb.
_VENDOR = re.compile(r"^(?:NVIDIA|TESLA|GEFORCE|RTX)[-_ ]+")


def gpu_model_named(catalog: Catalog, name: str | None) -> str | None:
    if not name:
        return None
    text = name.strip().upper().replace("_", "-").replace(" ", "-")
    while (stripped := _VENDOR.sub("", text)) != text:
        text = stripped
    if text in catalog.gpus:
        return text
    parts = text.split("-")
    base = parts[0]
    mem = next((int(p[:-2]) for p in parts[1:] if re.fullmatch(r"\d+GB", p)), None)
    variants = [f"{base}-{p}" for p in parts[1:] if p in ("NVL",)] + ([f"{base}-{mem}GB"] if mem else []) + [base]
    for v in variants:
        g = catalog.gpus.get(v)
        if g and (mem is None or v.endswith("GB") or g.memory_gb == mem or "NVL" in v):
            return v
    return None


def _instance(catalog: Catalog, provider: str | None, instance_type: str | None):
    """The catalog type and its provider, searching every provider when the manifest does not say."""
    if not instance_type:
        return None, provider
    providers = [provider] if provider else list(catalog.prices)
    for p in providers:
        t = catalog.instance(p, instance_type)
        if t:
            return t, p
    for p in providers:
        if catalog.gpu_model_for(p, instance_type):
            return None, p
    return None, provider


def _gpu_from_type(catalog: Catalog, provider: str | None, instance_type: str | None):
    """(provider, model, GPUs per instance) of an instance type, the model by family when the size is unknown."""
    t, provider = _instance(catalog, provider, instance_type)
    if t:
        return provider, t.gpu_model, t.gpu_count
    return provider, catalog.gpu_model_for(provider, instance_type) if provider else None, None


def _looks_gpu(provider: str | None, instance_type: str) -> bool:
    """An instance type the catalog lacks that is still meant as a GPU machine (so not knowing it matters)."""
    if provider == "aws" or instance_type.startswith("ml."):
        return bool(re.match(r"^[pg]\d", family_of("aws", instance_type)))
    if provider == "gcp":
        return bool(re.match(r"^(a\d|g\d)-", instance_type))
    if provider == "azure":
        return bool(re.match(r"^Standard_N[CDV]", instance_type, re.I))
    return False


# ---- checkpoints --------------------------------------------------------------------------------------------

CKPT_ENV = re.compile(r"^(?:[A-Z0-9]+_)*(?:CHECKPOINTS?|CKPTS?)(?:_(?:DIR|PATH|URI|URL|LOCATION|ROOT|BUCKET|PREFIX))?$",
                      re.I)
CKPT_ARG = re.compile(r"--(?:checkpoint|checkpoints|ckpt|save)[-_]?(?:dir|path|uri|location|root)s?(?:=|\s+)"
                      r"""["']?([^\s"']+)""", re.I)
CKPT_NAME = re.compile(r"checkpoint|ckpt", re.I)
LOCAL_SCHEMES = ("file", "local")


def _remote(uri: str) -> bool:
    m = re.match(r"^([a-z][a-z0-9+.-]*)://", uri, re.I)
    return bool(m) and m.group(1).lower() not in LOCAL_SCHEMES


def _resolve(path: str, mounts: dict[str, str | None]) -> str | None:
    """A checkpoint path as a durable location: a bucket URI as is, a local path through the durable volume
    mounted over it; None for a path on the container's own disk or on a volume that dies with the node."""
    path = path.strip().strip("\"'")
    if not path:
        return None
    if _remote(path) or "$" in path:  # a URI, or a variable the manifest cannot resolve: taken as declared
        return path
    if not path.startswith("/"):
        return None
    best = max((m for m in mounts if path == m or path.startswith(m.rstrip("/") + "/")), key=len, default=None)
    if best is None or mounts[best] is None:
        return None
    rest = path[len(best.rstrip("/")):]
    return mounts[best].rstrip("/") + rest if rest.strip("/") else mounts[best]


def _checkpoint(env: dict[str, str], text: str, mounts: dict[str, str | None]) -> str | None:
    """Where a job writes checkpoints: an env variable or an argument that names it, else a durable mount
    whose path says checkpoint."""
    candidates = [v for k, v in env.items() if CKPT_ENV.match(k) and v] + CKPT_ARG.findall(text)
    for c in candidates:
        uri = _resolve(c, mounts)
        if uri:
            return uri
    for mount_path, uri in sorted(mounts.items()):
        if uri and (CKPT_NAME.search(mount_path) or CKPT_NAME.search(uri)):
            return uri
    return None


# ---- Kubernetes ---------------------------------------------------------------------------------------------

# API groups whose other kinds run nothing (Service, ConfigMap, PVC, ...): skipped without a word.
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


def _kubernetes(doc: Document, catalog: Catalog) -> list[Job]:
    d = doc.data
    kind, api = str(d["kind"]), str(d["apiVersion"])
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    if kind == "List":
        items = _list(d.get("items"), doc, "items")
        return [j for item in items for j in _kubernetes(Document(item, doc.path, doc.line), catalog)]
    meta = _map(d.get("metadata"), doc, "metadata")
    spec = _map(d.get("spec"), doc, "spec")
    labels, annotations = _tags(meta.get("labels")), _tags(meta.get("annotations"))
    deadline = None
    platform, workload = "kubernetes", "training"
    if kind == "Pod" and group == "":
        templates = [(1, {"metadata": meta, "spec": spec})]
    elif kind == "Job" and group == "batch":
        templates = [(_int(spec.get("parallelism"), doc, "spec.parallelism") or 1, spec.get("template"))]
        deadline = _int(spec.get("activeDeadlineSeconds"), doc, "spec.activeDeadlineSeconds")
    elif kind == "CronJob" and group == "batch":
        job_template = _map(spec.get("jobTemplate"), doc, "spec.jobTemplate")
        job_spec = _map(job_template.get("spec"), doc, "spec.jobTemplate.spec")
        jt_meta = _map(job_template.get("metadata"), doc, "spec.jobTemplate.metadata")
        labels |= _tags(jt_meta.get("labels"))
        annotations |= _tags(jt_meta.get("annotations"))
        templates = [(_int(job_spec.get("parallelism"), doc, "parallelism") or 1, job_spec.get("template"))]
        deadline = _int(job_spec.get("activeDeadlineSeconds"), doc, "spec.jobTemplate.spec.activeDeadlineSeconds")
    elif kind in SERVING_KINDS and group == "apps":
        templates = [(_int(spec.get("replicas"), doc, "spec.replicas") or 1, spec.get("template"))]
        workload = "inference"
    elif kind in KUBEFLOW_REPLICAS and group == "kubeflow.org":
        platform = "kubeflow"
        replica_specs = _map(spec.get(KUBEFLOW_REPLICAS[kind]), doc, f"spec.{KUBEFLOW_REPLICAS[kind]}")
        templates = [(_int(_map(r, doc, role).get("replicas"), doc, f"{role}.replicas") or 1, r.get("template"))
                     for role, r in replica_specs.items()]
        run_policy = _map(spec.get("runPolicy"), doc, "spec.runPolicy")
        deadline = _int(run_policy.get("activeDeadlineSeconds", spec.get("activeDeadlineSeconds")), doc,
                        "runPolicy.activeDeadlineSeconds")
    elif kind == "Notebook" and group == "kubeflow.org":
        platform, workload = "kubeflow", "notebook"
        templates = [(1, spec.get("template"))]
    elif kind == "TrainJob" and group == "trainer.kubeflow.org":
        platform = "kubeflow"
        labels |= _tags(spec.get("labels"))
        annotations |= _tags(spec.get("annotations"))
        templates = [_trainjob_template(spec, doc)]
    elif kind == "Job" and group == "batch.volcano.sh":
        platform = "volcano"
        tasks = _list(spec.get("tasks"), doc, "spec.tasks")
        templates = [(_int(_map(t, doc, "task").get("replicas"), doc, "tasks[].replicas") or 1, t.get("template"))
                     for t in tasks]
    elif group in CORE_GROUPS:
        return []  # a Service, ConfigMap, PersistentVolumeClaim, ...: runs nothing
    else:
        raise doc.error(f"unknown manifest kind {kind} ({api})", UnknownKind)

    volume_claims = {c.get("metadata", {}).get("name") for c in _list(spec.get("volumeClaimTemplates"), doc,
                                                                          "spec.volumeClaimTemplates")
                     if isinstance(c, dict)}
    pods = []
    for replicas, template in templates:
        t = _map(template, doc, "template")
        t_meta = _map(t.get("metadata"), doc, "template.metadata")
        labels |= _tags(t_meta.get("labels"))
        annotations |= _tags(t_meta.get("annotations"))
        pods.append(_pod(replicas, _map(t.get("spec"), doc, "template.spec"), volume_claims, doc))
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
    provider, model, _ = _gpu_from_type(catalog, provider, instance_type)
    mig = next((p.mig for p in gpu_pods if p.mig), None)
    other = next((p.other for p in gpu_pods if p.other), None)
    accelerator = instance_type if instance_type and (model or _looks_gpu(provider, instance_type)) else None
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
        checkpoint_interval_min=_interval(labels, annotations, doc), max_runtime_s=deadline,
        tags=labels, source_file=doc.path, source_line=doc.line, workload=workload, manifest_kind=kind,
        accelerator=accelerator, mig_profile=mig, annotations=annotations | _own(labels))]


def _trainjob_template(spec: dict, doc: Document) -> tuple[int, dict]:
    """A Kubeflow Trainer TrainJob as one pod template: the trainer container with its resources per node,
    and the pod overrides (node selectors, tolerations, volumes) of the node job."""
    trainer = _map(spec.get("trainer"), doc, "spec.trainer")
    container = {"name": "node", "resources": _map(trainer.get("resourcesPerNode"), doc, "resourcesPerNode"),
                 "env": trainer.get("env"), "command": trainer.get("command"), "args": trainer.get("args")}
    pod: dict[str, Any] = {"containers": [container]}
    for override in _list(spec.get("podTemplateOverrides") or spec.get("podSpecOverrides"), doc, "overrides"):
        o = _map(override, doc, "podTemplateOverrides[]")
        o_spec = _map(o.get("spec"), doc, "podTemplateOverrides[].spec") if "spec" in o else o
        for key in ("nodeSelector", "affinity", "tolerations", "volumes"):
            if o_spec.get(key):
                pod[key] = o_spec[key]
        for c in _list(o_spec.get("containers"), doc, "containers"):
            container["volumeMounts"] = (container.get("volumeMounts") or []) + (c.get("volumeMounts") or [])
            container["env"] = (container.get("env") or []) + (c.get("env") or [])
    return _int(trainer.get("numNodes"), doc, "spec.trainer.numNodes") or 1, {"spec": pod}


def _pod(replicas: int, spec: dict, claim_templates: set, doc: Document) -> _Pod:
    gpus, mig, other = 0, None, None
    env: dict[str, str] = {}
    words: list[str] = []
    mounts: dict[str, str | None] = {}
    volumes = {v.get("name"): v for v in _list(spec.get("volumes"), doc, "volumes") if isinstance(v, dict)}
    for c in _list(spec.get("containers"), doc, "containers"):
        c = _map(c, doc, "containers[]")
        res = _map(c.get("resources"), doc, "resources")
        amounts = _map(res.get("requests"), doc, "resources.requests") | _map(res.get("limits"), doc, "limits")
        for key, value in amounts.items():
            if key == "nvidia.com/gpu":
                gpus += _int(value, doc, f"resources {key}") or 0
            elif key.startswith("nvidia.com/mig-"):
                gpus += _int(value, doc, f"resources {key}") or 0
                mig = key.removeprefix("nvidia.com/mig-")
            elif OTHER_ACCELERATORS.match(key):
                other = key
        for e in _list(c.get("env"), doc, "env"):
            if isinstance(e, dict) and e.get("name") and isinstance(e.get("value"), str | int):
                env[str(e["name"])] = str(e["value"])
        words += [str(w) for w in _list(c.get("command"), doc, "command") + _list(c.get("args"), doc, "args")]
        for m in _list(c.get("volumeMounts"), doc, "volumeMounts"):
            if isinstance(m, dict) and m.get("mountPath"):
                uri = _volume_uri(volumes.get(m.get("name")), m.get("name"), claim_templates)
                if uri and m.get("subPath"):
                    uri = uri.rstrip("/") + "/" + str(m["subPath"]).strip("/")
                mounts[str(m["mountPath"])] = uri
    nodes: dict[str, list[str]] = {str(k).lower() if str(k).lower() in SPOT_LABELS else str(k): [str(v)]
                                   for k, v in _map(spec.get("nodeSelector"), doc, "nodeSelector").items()}
    spot = False
    affinity = _map(_map(spec.get("affinity"), doc, "affinity").get("nodeAffinity"), doc, "nodeAffinity")
    required = _map(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), doc, "required")
    terms = _list(required.get("nodeSelectorTerms"), doc, "nodeSelectorTerms")
    terms += [p.get("preference") or {} for p in _list(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
                                                        doc, "preferred") if isinstance(p, dict)]
    for term in terms:
        for e in _list(_map(term, doc, "nodeSelectorTerm").get("matchExpressions"), doc, "matchExpressions"):
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
    for t in _list(spec.get("tolerations"), doc, "tolerations"):
        if isinstance(t, dict) and str(t.get("key", "")).lower() in SPOT_LABELS:
            key = str(t["key"]).lower()
            if t.get("operator") == "Exists" or str(t.get("value", "")).lower() in SPOT_LABELS[key][0]:
                spot = True
                nodes.setdefault(key, [str(t.get("value") or "*")])
    checkpoint = _checkpoint(env, " ".join(words), mounts)
    deadline = _int(spec.get("activeDeadlineSeconds"), doc, "activeDeadlineSeconds")
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


# ---- SageMaker ----------------------------------------------------------------------------------------------


def _sagemaker(doc: Document, catalog: Catalog) -> Job:
    d = doc.data
    name = str(d.get("TrainingJobName") or Path(doc.path).stem)
    rc = _map(d.get("ResourceConfig"), doc, "ResourceConfig")
    groups = [_map(g, doc, "InstanceGroups[]") for g in _list(rc.get("InstanceGroups"), doc, "InstanceGroups")]
    if groups:  # heterogeneous cluster: the GPU group (the first, if several) with every instance counted
        gpu_groups = [g for g in groups if _gpu_from_type(catalog, "aws", g.get("InstanceType"))[1]] or groups
        instance_type = gpu_groups[0].get("InstanceType")
        count = sum(_int(g.get("InstanceCount"), doc, "InstanceGroups[].InstanceCount") or 1 for g in gpu_groups)
    else:
        instance_type = rc.get("InstanceType")
        count = _int(rc.get("InstanceCount"), doc, "ResourceConfig.InstanceCount") or 1
    instance_type = str(instance_type) if instance_type else None
    _, model, gpus = _gpu_from_type(catalog, "aws", instance_type)
    stop = _map(d.get("StoppingCondition"), doc, "StoppingCondition")
    tags = {}
    for t in _list(d.get("Tags"), doc, "Tags"):
        if not isinstance(t, dict) or "Key" not in t:
            raise doc.error(f"Tags: expected items like {{Key: team, Value: vision}}, got {t!r}")
        tags[str(t["Key"])] = str(t.get("Value", ""))
    image = str(_map(d.get("AlgorithmSpecification"), doc, "AlgorithmSpecification").get("TrainingImage") or "")
    region = m.group(1) if (m := re.search(r"\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com", image)) else None
    account = m.group(1) if (m := re.match(r"arn:aws[\w-]*:iam::(\d{12}):", str(d.get("RoleArn") or ""))) else None
    ckpt = _map(d.get("CheckpointConfig"), doc, "CheckpointConfig").get("S3Uri")
    return Job(
        id=f"sagemaker:{name}", platform="sagemaker", provider="aws", account=account, region=region, name=name,
        instance_type=instance_type, instance_count=count, gpu_model=model, gpu_count=gpus,
        spot=bool(d.get("EnableManagedSpotTraining")), checkpoint_uri=str(ckpt) if ckpt else None,
        checkpoint_interval_min=_interval(tags, {}, doc),
        max_runtime_s=_int(stop.get("MaxRuntimeInSeconds"), doc, "StoppingCondition.MaxRuntimeInSeconds"),
        max_wait_s=_int(stop.get("MaxWaitTimeInSeconds"), doc, "StoppingCondition.MaxWaitTimeInSeconds"),
        tags=tags, source_file=doc.path, source_line=doc.line, workload="training",
        manifest_kind="CreateTrainingJob",
        accelerator=instance_type if instance_type and (model or _looks_gpu("aws", instance_type)) else None,
        annotations=_own(tags))


# ---- Vertex AI ----------------------------------------------------------------------------------------------


def _vertex(doc: Document, catalog: Catalog) -> Job:
    d = doc.data
    spec = _map(_k(d, "jobSpec"), doc, "jobSpec") if _k(d, "jobSpec") is not None else d
    pools = [_map(p, doc, "workerPoolSpecs[]") for p in _list(_k(spec, "workerPoolSpecs"), doc, "workerPoolSpecs")]
    machine_type = accelerator = model = None
    gpus, count, env, words = 0, 0, {}, []
    for pool in pools:
        if not pool:  # an empty pool keeps the places of the pools after it
            continue
        ms = _map(_k(pool, "machineSpec"), doc, "machineSpec")
        acc_type = _k(ms, "acceleratorType")
        acc_count = _int(_k(ms, "acceleratorCount"), doc, "machineSpec.acceleratorCount") or 0
        mt = _k(ms, "machineType")
        _, type_model, type_gpus = _gpu_from_type(catalog, "gcp", mt)
        if (acc_type and acc_type != "ACCELERATOR_TYPE_UNSPECIFIED") or type_model:
            replicas = _int(_k(pool, "replicaCount"), doc, "replicaCount") or 1
            count += replicas
            gpus = max(gpus, acc_count or type_gpus or 0)
            if machine_type is None:
                machine_type = mt
                accelerator = acc_type or mt
                model = gpu_model_named(catalog, acc_type) if acc_type else type_model
        for key in ("containerSpec", "pythonPackageSpec"):
            c = _map(_k(pool, key), doc, key)
            for e in _list(c.get("env"), doc, "env"):
                if isinstance(e, dict) and e.get("name"):
                    env[str(e["name"])] = str(e.get("value", ""))
            words += [str(w) for w in _list(c.get("command"), doc, "command") + _list(c.get("args"), doc, "args")]
    scheduling = _map(_k(spec, "scheduling"), doc, "scheduling")
    base = _map(_k(spec, "baseOutputDirectory"), doc, "baseOutputDirectory")
    base_uri = _k(base, "outputUriPrefix")
    # Vertex AI sets AIP_CHECKPOINT_DIR to <baseOutputDirectory>/checkpoints/ for the job
    checkpoint = _checkpoint(env, " ".join(words), {}) or (str(base_uri).rstrip("/") + "/checkpoints/"
                                                          if base_uri else None)
    labels = _tags(d.get("labels"))
    full = str(d.get("name") or "")
    region = m.group(1) if (m := re.search(r"/locations/([a-z0-9-]+)", full)) else None
    if region is None:
        images = " ".join(str(_k(_map(_k(p, "containerSpec"), doc, "containerSpec"), "imageUri") or "") for p in pools)
        region = m.group(1) if (m := re.search(r"\b([a-z]+-[a-z]+\d)-docker\.pkg\.dev", images)) else None
    account = m.group(1) if (m := re.match(r"projects/([^/]+)/", full)) else None
    name = str(_k(d, "displayName") or full.rsplit("/", 1)[-1] or Path(doc.path).stem)
    return Job(
        id=f"vertex:{name}", platform="vertex", provider="gcp", account=account, region=region, name=name,
        instance_type=machine_type, instance_count=count or 1, gpu_model=model, gpu_count=gpus or None,
        spot=str(scheduling.get("strategy", "")).upper() == "SPOT", checkpoint_uri=checkpoint,
        checkpoint_interval_min=_interval(labels, {}, doc),
        max_runtime_s=_seconds(scheduling.get("timeout"), doc, "scheduling.timeout"), tags=labels,
        source_file=doc.path, source_line=doc.line, workload="training", manifest_kind="CustomJob",
        accelerator=accelerator)


# ---- Azure ML -----------------------------------------------------------------------------------------------


def _azureml(doc: Document, catalog: Catalog) -> Job:
    d = doc.data
    kind = str(d.get("type") or "command")
    if kind not in ("command", "sweep"):
        raise doc.error(f"unknown manifest kind: Azure ML {kind} job (the gate reads command and sweep jobs)",
                        UnknownKind)
    trial = _map(d.get("trial"), doc, "trial") if kind == "sweep" else d
    resources = _map(d.get("resources") or trial.get("resources"), doc, "resources")
    instance_type = resources.get("instance_type")
    instance_type = str(instance_type) if instance_type else None
    count = _int(resources.get("instance_count"), doc, "resources.instance_count") or 1
    limits = _map(d.get("limits"), doc, "limits")
    timeout = _int(limits.get("timeout"), doc, "limits.timeout")
    if kind == "sweep":  # trials at once x nodes each; the sweep's own timeout, else trials x trial timeout
        concurrent = _int(limits.get("max_concurrent_trials"), doc, "limits.max_concurrent_trials") or 1
        total = _int(limits.get("max_total_trials"), doc, "limits.max_total_trials")
        trial_timeout = _int(limits.get("trial_timeout"), doc, "limits.trial_timeout")
        if timeout is None and total and trial_timeout:
            timeout = -(-total // concurrent) * trial_timeout
        count *= concurrent
    _, model, gpus = _gpu_from_type(catalog, "azure", instance_type)
    outputs = _map(d.get("outputs"), doc, "outputs")
    mounts: dict[str, str | None] = {}
    for out_name, out in outputs.items():
        out = out if isinstance(out, dict) else {"path": out}
        # an output without a path goes to the workspace's default datastore: durable too
        mounts[f"/outputs/{out_name}"] = str(out.get("path") or f"azureml://datastores/workspaceblobstore/outputs/"
                                                                f"{out_name}")
    command = re.sub(r"\$\{\{\s*outputs\.([\w-]+)\s*\}\}", r"/outputs/\1", str(trial.get("command") or ""))
    env = _tags(trial.get("environment_variables") or d.get("environment_variables"))
    checkpoint = _checkpoint(env, command, mounts)
    tags = _tags(d.get("tags"))
    locations = _list(resources.get("locations"), doc, "resources.locations")
    name = str(d.get("name") or d.get("display_name") or Path(doc.path).stem)
    return Job(
        id=f"azureml:{name}", platform="azureml", provider="azure", region=str(locations[0]) if locations else None,
        name=name, instance_type=instance_type, instance_count=count, gpu_model=model, gpu_count=gpus,
        spot=str(_map(d.get("queue_settings"), doc, "queue_settings").get("job_tier", "")).lower() == "spot",
        checkpoint_uri=checkpoint, checkpoint_interval_min=_interval(tags, {}, doc), max_runtime_s=timeout,
        tags=tags, source_file=doc.path, source_line=doc.line, workload="training", manifest_kind=kind,
        accelerator=instance_type if instance_type and (model or _looks_gpu("azure", instance_type)) else None,
        annotations=_own(tags))


# ---- SkyPilot -----------------------------------------------------------------------------------------------

SKYPILOT_KEYS = {"name", "workdir", "num_nodes", "resources", "envs", "secrets", "file_mounts", "volumes", "setup",
                 "run", "config", "service", "event_callback", "inputs", "outputs", "experimental", "pool"}
CLOUDS = {"aws": "aws", "gcp": "gcp", "azure": "azure"}


def _accelerator(value: Any, doc: Document) -> tuple[str | None, int | None]:
    """SkyPilot's accelerators: `A100:8`, `A100`, `{A100: 8}`, a list or `{A100:8, H100:8}` of candidates
    (the first is taken)."""
    if value is None:
        return None, None
    if isinstance(value, dict):
        value = [f"{k}:{v}" if v is not None else str(k) for k, v in value.items()]
    if isinstance(value, list):
        value = value[0] if value else None
        if value is None:
            return None, None
    text = str(value).strip().strip("{}").split(",")[0].strip()
    name, _, n = text.partition(":")
    if n and not re.fullmatch(r"\d+(\.\d+)?", n.strip()):
        raise doc.error(f"resources.accelerators: expected NAME:COUNT, got {value!r}")
    return name.strip(), max(1, int(float(n))) if n else 1


def _skypilot(doc: Document, catalog: Catalog) -> Job:
    d = doc.data
    res = _map(d.get("resources"), doc, "resources")
    candidates = _list(res.get("any_of") or res.get("ordered"), doc, "resources.any_of")
    if candidates:  # several placements: judge the first, as SkyPilot tries it first
        res = {k: v for k, v in res.items() if k not in ("any_of", "ordered")} | _map(candidates[0], doc, "any_of[]")
    infra = str(res.get("infra") or "").split("/")
    provider = CLOUDS.get(str(res.get("cloud") or infra[0]).lower())
    region = res.get("region") or (infra[1] if len(infra) > 1 and provider else None)
    instance_type = str(res["instance_type"]) if res.get("instance_type") else None
    acc_name, acc_count = _accelerator(res.get("accelerators"), doc)
    type_provider, type_model, type_gpus = _gpu_from_type(catalog, provider, instance_type)
    model = gpu_model_named(catalog, acc_name) if acc_name else type_model
    accelerator = (f"{acc_name}:{acc_count}" if acc_name else
                   instance_type if instance_type and (type_model or _looks_gpu(provider, instance_type)) else None)
    mounts: dict[str, str | None] = {}
    for path, m in _map(d.get("file_mounts"), doc, "file_mounts").items():
        if isinstance(m, dict):  # a bucket mounted (writes reach the bucket) or copied (they do not)
            durable = str(m.get("mode", "MOUNT")).upper() in ("MOUNT", "MOUNT_CACHED")
            src = m.get("source") or (f"{m.get('store', 'bucket')}://{m['name']}" if m.get("name") else None)
            mounts[str(path)] = str(src) if durable and src and _remote(str(src)) else None
        else:
            mounts[str(path)] = None  # `path: s3://...` copies the bucket down once, `path: ~/dir` uploads a dir
    for path, vol in _map(d.get("volumes"), doc, "volumes").items():
        name = vol.get("name") if isinstance(vol, dict) else vol
        mounts[str(path)] = f"volume://{name}"
    env = _tags(d.get("envs"))
    checkpoint = _checkpoint(env, f"{d.get('setup') or ''}\n{d.get('run') or ''}", mounts)
    labels = _tags(res.get("labels"))
    name = str(d.get("name") or Path(doc.path).stem)
    return Job(
        id=f"skypilot:{name}", platform="skypilot", provider=provider or type_provider,
        region=str(region) if region else None, name=name, instance_type=instance_type,
        instance_count=_int(d.get("num_nodes"), doc, "num_nodes") or 1, gpu_model=model,
        gpu_count=acc_count or type_gpus, spot=bool(res.get("use_spot")), checkpoint_uri=checkpoint,
        checkpoint_interval_min=_interval(labels, {}, doc), tags=labels, source_file=doc.path,
        source_line=doc.line, workload="inference" if "service" in d else "training", manifest_kind="task",
        accelerator=accelerator, annotations=_own(labels))

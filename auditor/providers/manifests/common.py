"""What the manifest parsers share: the checked readers of a document's values, the gate's own annotation keys,
GPU and instance naming against the catalog, and where a job writes its checkpoints.

What a manifest does not say stays unknown (None) rather than guessed; nothing here reaches a cloud.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from auditor.model import Job
from auditor.providers.catalog import Catalog, InstanceType, family_of
from auditor.providers.manifests.documents import Document

ANNOTATION_PREFIX = "gpu-auditor.dev/"
INTERVAL_KEY = ANNOTATION_PREFIX + "checkpoint-interval-min"
RUNTIME_KEY = ANNOTATION_PREFIX + "max-runtime-hours"  # for platforms with no runtime limit of their own
MAX_COUNT = 10**9  # no count a manifest holds (GPUs, replicas, seconds: 31 years) is larger


@dataclass
class Context:
    """What a parser may consult besides its own document: the catalog, and the objects of the other files of
    the same run that one manifest names (Trainer runtimes, disruption budgets), collected before parsing."""

    catalog: Catalog
    runtimes: dict[tuple[str, str, str], Document] = field(default_factory=dict)  # (kind, namespace, name)
    runtime_refs: set[tuple[str, str, str]] = field(default_factory=set)  # the runtimes some TrainJob names
    budgets: list[tuple[str, str, dict]] = field(default_factory=list)  # (namespace, name, selector)
    # Kueue: where a queued workload may run. ResourceFlavor name -> its pod spec (nodeSelector, tolerations);
    # ClusterQueue name -> its flavors, in order; (namespace, LocalQueue name) -> its ClusterQueue
    flavors: dict[str, dict] = field(default_factory=dict)
    cluster_queues: dict[str, list[str]] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)
    serving_runtimes: set[str] = field(default_factory=set)  # the KServe runtimes some InferenceService names


def runtime_hours(hours: str, doc: Document) -> int:
    """The gate's max-runtime-hours annotation in seconds."""
    try:
        value = float(hours)
    except ValueError:
        value = -1
    if not 0 < value <= MAX_COUNT / 3600:  # NaN and infinity too
        raise doc.error(f"{RUNTIME_KEY}: expected hours (at most {MAX_COUNT // 3600:,}), got {hours!r}")
    return round(value * 3600)


def as_map(value: Any, doc: Document, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(f"{what}: expected a mapping, got {type(value).__name__}")
    return value


def lenient_map(value: Any) -> dict:
    """The value if it is a mapping, else empty: for the passes that collect before parsing and refuse nothing."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any, doc: Document, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise doc.error(f"{what}: expected a list, got {type(value).__name__}")
    return value


def as_int(value: Any, doc: Document, what: str) -> int | None:
    """A whole number, also as text ("2", and Vertex AI's int64 strings), up to MAX_COUNT: a larger one is a typo,
    and a job's cost would be figures no bill holds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit():
        raise doc.error(f"{what}: expected a whole number, got {value!r}")
    if int(value) > MAX_COUNT:
        raise doc.error(f"{what}: {int(value)} is more than any job runs (at most {MAX_COUNT:,})")
    return int(value)


def seconds(value: Any, doc: Document, what: str) -> int | None:
    """Seconds as a number or a protobuf duration ("86400s")."""
    if isinstance(value, str) and (m := re.fullmatch(r"\s*(\d+)(?:\.\d+)?s\s*", value)):
        return as_int(m.group(1), doc, what)
    return as_int(value, doc, what)


def get(d: dict, camel: str) -> Any:
    """A key in camelCase (the REST APIs) or snake_case (the Python SDKs)."""
    if camel in d:
        return d[camel]
    return d.get(re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower())


def tags_of(value: Any) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def interval_of(tags: dict[str, str], annotations: dict[str, str], doc: Document) -> float | None:
    raw = annotations.get(INTERVAL_KEY, tags.get(INTERVAL_KEY))
    if raw is None:
        return None
    try:
        minutes = float(raw)
    except ValueError:
        minutes = math.nan
    if not 0 <= minutes <= MAX_COUNT / 60:  # NaN and infinity too
        raise doc.error(f"{INTERVAL_KEY}: expected minutes, got {raw!r}") from None
    return minutes


def own_keys(tags: dict[str, str]) -> dict[str, str]:
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


# Accelerators that are not NVIDIA GPUs, as SkyPilot, Vertex AI and the clouds name them: tpu-v5e-8, TPU_V5_LITEPOD,
# Trainium, Inferentia2, Gaudi2, MI300X -> their family (the policy's name for them; pods.py reads Kubernetes').
OTHER_NAMES = [(re.compile(r"^(?:cloud-)?tpu|^ct\d+[a-z]*-", re.I), "TPU"),
               (re.compile(r"^trainium|^trn\d", re.I), "Trainium"),
               (re.compile(r"^inferentia|^inf\d", re.I), "Inferentia"), (re.compile(r"^gaudi", re.I), "Gaudi"),
               (re.compile(r"^(?:amd[-_ ]?)?(?:instinct[-_ ]?)?mi\d", re.I), "AMD-Instinct")]


def family_named(name: str | None) -> str | None:
    """The family of an accelerator named in a manifest that is no NVIDIA GPU; None for any other name."""
    return next((f for pattern, f in OTHER_NAMES if pattern.match(name.strip())), None) if name else None


def instance_of(catalog: Catalog, provider: str | None,
                instance_type: str | None) -> tuple[InstanceType | None, str | None]:
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


def gpu_from_type(catalog: Catalog, provider: str | None,
                  instance_type: str | None) -> tuple[str | None, str | None, int | None]:
    """(provider, model, GPUs per instance) of an instance type, the model by family when the size is unknown."""
    t, provider = instance_of(catalog, provider, instance_type)
    if t:
        return provider, t.gpu_model, t.gpu_count
    return provider, catalog.gpu_model_for(provider, instance_type) if provider else None, None


def looks_gpu(provider: str | None, instance_type: str) -> bool:
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


def is_remote(uri: str) -> bool:
    m = re.match(r"^([a-z][a-z0-9+.-]*)://", uri, re.I)
    return m is not None and m.group(1).lower() not in LOCAL_SCHEMES


def resolve_path(path: str, mounts: dict[str, str | None]) -> str | None:
    """A checkpoint path as a durable location: a bucket URI as is, a local path through the durable volume
    mounted over it; None for a path on the container's own disk or on a volume that dies with the node."""
    path = path.strip().strip("\"'")
    if not path:
        return None
    if is_remote(path) or "$" in path:  # a URI, or a variable the manifest cannot resolve: taken as declared
        return path
    if not path.startswith("/"):
        return None
    best = max((m for m in mounts if path == m or path.startswith(m.rstrip("/") + "/")), key=len, default=None)
    durable = mounts[best] if best is not None else None
    if best is None or durable is None:
        return None
    rest = path[len(best.rstrip("/")):]
    return durable.rstrip("/") + rest if rest.strip("/") else durable


def checkpoint_of(env: dict[str, str], text: str, mounts: dict[str, str | None]) -> str | None:
    """Where a job writes checkpoints: an env variable or an argument that names it, else a durable mount
    whose path says checkpoint."""
    candidates = [v for k, v in env.items() if CKPT_ENV.match(k) and v] + CKPT_ARG.findall(text)
    for c in candidates:
        uri = resolve_path(c, mounts)
        if uri:
            return uri
    for mount_path, uri in sorted(mounts.items()):
        if uri and (CKPT_NAME.search(mount_path) or CKPT_NAME.search(uri)):
            return uri
    return None



# ---- sweeps (hyperparameter tuning) -------------------------------------------------------------------------


def as_sweep(trial: Job, *, max_trials: int | None, parallel: int | None, early_stopping: str | None,
             algorithm: str | None, grid_size: int | None, sweep_runtime_s: int | None = None) -> Job:
    """A tuning job from the job one trial runs: `parallel` trials at once (so their instances), and at most
    `max_trials` in all (a grid search without a cap runs every point), so it runs at most ceil(trials /
    parallel) trial runtimes, or the sweep's own limit where that is shorter."""
    total = max_trials if max_trials is not None else grid_size
    parallel = min(parallel or 1, total) if total else parallel or 1  # never more at once than in all
    runtime = None
    if total is not None and trial.max_runtime_s is not None:
        runtime = math.ceil(total / parallel) * trial.max_runtime_s
    if sweep_runtime_s is not None:
        runtime = min(runtime, sweep_runtime_s) if runtime is not None else sweep_runtime_s
    trial.kind = "sweep"
    trial.instance_count = trial.instance_count * parallel
    trial.gpu_total = trial.gpu_total * parallel if trial.gpu_total is not None else None
    trial.max_runtime_s = runtime
    trial.sweep_max_trials, trial.sweep_parallel_trials = total, parallel
    trial.sweep_early_stopping = early_stopping.lower() if early_stopping else None
    trial.sweep_algorithm = algorithm.lower() if algorithm else None
    trial.sweep_grid_size = grid_size
    return trial


def grid_points(sizes: list[int | None]) -> int | None:
    """Points of a grid from the values each parameter takes; None where one of them is continuous."""
    known = [n for n in sizes if n is not None]
    if not sizes or len(known) < len(sizes):
        return None
    return math.prod(known)


def range_points(low: Any, high: Any, step: Any) -> int | None:
    """Values of a stepped range (min, max, step as numbers or text); None without a step or a number."""
    try:
        lo, hi, st = float(low), float(high), float(step)
    except (TypeError, ValueError):
        return None
    n = (hi - lo) // st if st > 0 and hi >= lo else math.nan
    return int(n) + 1 if n < MAX_COUNT else None  # NaN, infinity and past any sweep: as a continuous range


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def go_duration(value: Any, doc: Document, what: str) -> int | None:
    """Seconds of a Go duration ("1h30m0s", as Tekton and Argo write timeouts); "0" means none."""
    if value is None:
        return None
    text = str(value).strip()
    if text == "0" or text == "0s":
        return None
    if not _DURATION.sub("", text) == "" or not text:
        raise doc.error(f"{what}: expected a duration like 2h30m, got {value!r}")
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    total = sum(float(n) * unit[u] for n, u in _DURATION.findall(text))
    if total > MAX_COUNT:
        raise doc.error(f"{what}: {value!r} is longer than any job runs (at most {MAX_COUNT:,} seconds)")
    return round(total)

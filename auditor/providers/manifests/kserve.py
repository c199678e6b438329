"""KServe: an InferenceService serves a model from its predictor (and, where set, its transformer and explainer),
each a pod of its own with minReplicas replicas; a ServingRuntime (or ClusterServingRuntime) is the container a
model's `runtime` names. A runtime some InferenceService of the run names is judged through that service; one on
its own as one replica of what it would serve."""

from __future__ import annotations

from typing import Any

from auditor.providers.manifests.common import Context, as_int, as_list, as_map, lenient_map
from auditor.providers.manifests.documents import Document
from auditor.providers.manifests.pods import Workload, gpu_request_path
from auditor.providers.manifests.registry import kinds

RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
COMPONENTS = ("predictor", "transformer", "explainer")
POD_KEYS = ("nodeSelector", "affinity", "tolerations", "volumes", "terminationGracePeriodSeconds")
# a component's keys that are not a model server: replica counts, scaling, pod settings, ...
COMPONENT_KEYS = {"minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "containerConcurrency", "timeout",
                  "canaryTrafficPercent", "logger", "batcher", "serviceAccountName", "containers", "labels",
                  "annotations", "imagePullSecrets", "initContainers", "deploymentStrategy", *POD_KEYS}


def runtimes_named(d: dict) -> set[str]:
    """The runtimes an InferenceService's models name and ask GPUs for themselves (lenient: collected before
    parsing). A runtime named by a model that asks for none still carries the GPUs, and is judged on its own."""
    spec = lenient_map(d.get("spec"))
    out = set()
    for c in COMPONENTS:
        model = (spec.get(c) or {}).get("model") if isinstance(spec.get(c), dict) else None
        if isinstance(model, dict) and model.get("runtime") and gpu_request_path(model):
            out.add(str(model["runtime"]))
    return out


@kinds("serving.kserve.io", "InferenceService")
def inference_service(doc: Document, spec: dict, ctx: Context) -> list[Workload]:
    templates: list[tuple[int, Any]] = []
    for name in COMPONENTS:
        component = as_map(spec.get(name), doc, f"spec.{name}")
        if not component:
            continue
        containers = as_list(component.get("containers"), doc, f"spec.{name}.containers")
        # the model server: `model:` (any format), or a framework key of the older form (`pytorch:`, `triton:`)
        containers += [v for k, v in component.items() if k not in COMPONENT_KEYS and isinstance(v, dict)]
        pod = {"containers": containers, **{k: component[k] for k in POD_KEYS if k in component}}
        replicas = as_int(component.get("minReplicas"), doc, f"spec.{name}.minReplicas")
        templates.append((1 if replicas is None else replicas,
                          {"metadata": {"labels": component.get("labels") or {}}, "spec": pod}))
    return [Workload(templates, platform="kserve", workload="inference", kind="server")]


@kinds("serving.kserve.io", *RUNTIME_KINDS)
def serving_runtime(doc: Document, spec: dict, ctx: Context) -> list[Workload] | None:
    meta = as_map(doc.data.get("metadata"), doc, "metadata")
    if str(meta.get("name")) in ctx.serving_runtimes:
        return None
    pod = {"containers": as_list(spec.get("containers"), doc, "spec.containers"),
           **{k: spec[k] for k in POD_KEYS if k in spec}}
    return [Workload([(1, {"spec": pod})], platform="kserve", workload="inference", kind="server")]

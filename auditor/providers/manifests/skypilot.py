"""SkyPilot task YAML."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from auditor.model import Job
from auditor.providers.catalog import Catalog
from auditor.providers.manifests.common import (
    MAX_COUNT,
    Context,
    as_int,
    as_list,
    as_map,
    checkpoint_of,
    family_named,
    gpu_from_type,
    gpu_model_named,
    interval_of,
    is_remote,
    looks_gpu,
    own_keys,
    tags_of,
)
from auditor.providers.manifests.documents import Document
from auditor.providers.manifests.registry import platform

SKYPILOT_KEYS = {"name", "workdir", "num_nodes", "resources", "envs", "secrets", "file_mounts", "volumes", "setup",
                 "run", "config", "service", "event_callback", "inputs", "outputs", "experimental", "pool"}
CLOUDS = {"aws": "aws", "gcp": "gcp", "azure": "azure"}
CANDIDATES = ("any_of", "ordered", "candidates")  # several placements, SkyPilot tries them in this order


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
    if n and float(n) > MAX_COUNT:
        raise doc.error(f"resources.accelerators: {n.strip()} is more than any job runs (at most {MAX_COUNT:,})")
    return name.strip(), max(1, int(float(n))) if n else 1


@platform("skypilot", what="SkyPilot task", rank=4, detect=lambda d: is_task(d))
def parse(doc: Document, ctx: Context, pipeline: str | None = None) -> list[Job]:
    return [_task(doc, ctx.catalog, pipeline)]


def is_task(data: object) -> bool:
    return isinstance(data, dict) and set(data) <= SKYPILOT_KEYS and ("resources" in data or "run" in data)


def pipeline_name(docs: list[Document]) -> str | None:
    """The name of a multi-task file: a pipeline (a first document that only names it, then the tasks, run one
    after another) or a job group (a header with its name and `execution: parallel`, then the tasks, run at
    once)."""
    first = docs[0].data if docs else None
    if len(docs) > 1 and isinstance(first, dict) and "name" in first and not set(first) & {"resources", "run"} \
            and all(is_task(d.data) for d in docs[1:]):
        return str(first["name"])
    return None


def _task(doc: Document, catalog: Catalog, pipeline: str | None) -> Job:
    d = doc.data
    res = as_map(d.get("resources"), doc, "resources")
    key = next((k for k in CANDIDATES if res.get(k)), "any_of")
    candidates = as_list(res.get(key), doc, f"resources.{key}")
    if candidates:  # several placements: judge the first, as SkyPilot tries it first
        res = {k: v for k, v in res.items() if k not in CANDIDATES} | as_map(candidates[0], doc, f"{key}[]")
    infra = str(res.get("infra") or "").split("/")
    provider = CLOUDS.get(str(res.get("cloud") or infra[0]).lower())
    region = res.get("region") or (infra[1] if len(infra) > 1 and provider else None)
    instance_type = str(res["instance_type"]) if res.get("instance_type") else None
    acc_name, acc_count = _accelerator(res.get("accelerators"), doc)
    type_provider, type_model, type_gpus = gpu_from_type(catalog, provider, instance_type)
    model = gpu_model_named(catalog, acc_name) if acc_name else type_model
    accelerator = (f"{acc_name}:{acc_count}" if acc_name else
                   instance_type if instance_type and (type_model or looks_gpu(provider, instance_type)) else None)
    mounts: dict[str, str | None] = {}
    for path, m in as_map(d.get("file_mounts"), doc, "file_mounts").items():
        if isinstance(m, dict):  # a bucket mounted (writes reach the bucket) or copied (they do not)
            durable = str(m.get("mode", "MOUNT")).upper() in ("MOUNT", "MOUNT_CACHED")
            src = m.get("source") or (f"{m.get('store', 'bucket')}://{m['name']}" if m.get("name") else None)
            mounts[str(path)] = str(src) if durable and src and is_remote(str(src)) else None
        else:
            mounts[str(path)] = None  # `path: s3://...` copies the bucket down once, `path: ~/dir` uploads a dir
    for path, vol in as_map(d.get("volumes"), doc, "volumes").items():
        name = vol.get("name") if isinstance(vol, dict) else vol
        mounts[str(path)] = f"volume://{name}"
    env = tags_of(d.get("envs"))
    checkpoint = checkpoint_of(env, f"{d.get('setup') or ''}\n{d.get('run') or ''}", mounts)
    labels = tags_of(res.get("labels"))
    name = str(d.get("name") or Path(doc.path).stem)
    if pipeline:
        name = f"{pipeline}/{name}"
    nodes = as_int(d.get("num_nodes"), doc, "num_nodes") or 1
    service = as_map(d.get("service"), doc, "service") if "service" in d else None
    if service is not None:  # a SkyServe service: its replicas (the least it keeps) of num_nodes each
        policy = as_map(service.get("replica_policy"), doc, "service.replica_policy")
        replicas = as_int(service.get("replicas"), doc, "service.replicas")
        replicas = as_int(policy.get("min_replicas"), doc, "replica_policy.min_replicas") if replicas is None \
            else replicas
        nodes *= 1 if replicas is None else replicas
    return Job(
        id=f"skypilot:{name}", platform="skypilot", provider=provider or type_provider,
        region=str(region) if region else None, name=name, instance_type=instance_type,
        instance_count=nodes, gpu_model=model, kind="job" if service is None else "server",
        gpu_count=acc_count or type_gpus, spot=bool(res.get("use_spot")), checkpoint_uri=checkpoint,
        checkpoint_interval_min=interval_of(labels, {}, doc), tags=labels, source_file=doc.path,
        source_line=doc.line, workload="inference" if "service" in d else "training", manifest_kind="task",
        accelerator=accelerator, annotations=own_keys(labels),
        accelerator_family=family_named(acc_name) if model is None else None)

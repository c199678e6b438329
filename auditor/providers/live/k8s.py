"""Live Kubernetes for `gpu-auditor pull` (the official `kubernetes` client; a kubeconfig, or in-cluster).

Sources, each recorded in the snapshot manifest on its own:
- `k8s:nodes`: GPU nodes (`nvidia.com/gpu` capacity) with their instance type, GPU product (GPU feature
  discovery labels) and spot label (EKS, Karpenter, GKE, AKS); a node's id is its cloud instance where the
  provider ID names one, so billing and the cloud's own inventory join to it.
- `k8s:workloads`: Jobs and bare pods that request `nvidia.com/gpu`, spot or not (node selector, affinity,
  tolerations, or the nodes their pods ran on), and their checkpoint location: a durable volume (a PVC, NFS,
  CSI) mounted at a checkpoint path, or a `*CHECKPOINT*` variable holding a URI. An emptyDir is not durable.
- `k8s:dcgm`: GPU utilisation and framebuffer memory from the DCGM exporter, through the Prometheus HTTP API
  (`/api/v1/query_range` over `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, else `DCGM_FI_DEV_GPU_UTIL`, and
  `DCGM_FI_DEV_FB_USED`), per node and per MIG slice or pod (dcgm.py).
- `k8s:job-units`: with a policy naming them (`pull --policy`), the Prometheus counters of each job's tokens and
  samples (`attribution.token_series`, `sample_series`), as the job's tags (job_units.py).

Shared GPUs (MIG, time-slicing, MPS; k8s_gpus.py): a node's `gpu_count` is its physical GPUs, its allocatable
GPU resources become `gpu_units`, and every pod on a GPU node holding any of them a `gpu_allocations` row.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from auditor.providers.live import dcgm, job_units, prometheus
from auditor.providers.live.k8s_gpus import (
    hami_devices,
    node_gpus,
    pod_gpu_share,
    pod_gpu_units,
    runai_devices,
    slices_per_gpu,
)
from auditor.providers.live.pull import Pull, gpu_model, iso, utc

PAGE = 200
PERIOD = 3600
GPU = "nvidia.com/gpu"
SPOT_LABELS = {"eks.amazonaws.com/capacityType": "SPOT", "karpenter.sh/capacity-type": "spot",
               "cloud.google.com/gke-spot": "true", "cloud.google.com/gke-preemptible": "true",
               "kubernetes.azure.com/scalesetpriority": "spot"}
CHECKPOINT = re.compile(r"(?i)checkpoint|ckpt")


def throttled(e: BaseException) -> bool:
    if isinstance(e, ApiException):
        return e.status in (429, 503)
    return prometheus.throttled(e)


def pull(p: Pull) -> None:
    try:
        api = _api_client(p)
    except (ConfigException, OSError, ValueError) as e:
        reason = f"no Kubernetes configuration: {p.redact(str(e))}"
        for name, kind in (("k8s:nodes", "inventory"), ("k8s:workloads", "jobs"), ("k8s:dcgm", "metrics")):
            p.fail(name, kind, reason)
        return
    nodes: dict[str, dict] = {}
    p.run("k8s:nodes", "inventory", lambda: _nodes(p, api, nodes))
    p.run("k8s:workloads", "jobs", lambda: _workloads(p, api, nodes))
    if p.options.prometheus:
        p.run("k8s:dcgm", "metrics", lambda: _dcgm(p, nodes))
        if p.options.unit_series:
            p.run("k8s:job-units", "metrics", lambda: job_units.read(p))
    else:
        p.fail("k8s:dcgm", "metrics", "no Prometheus URL (--prometheus): GPU utilisation was not read")
        if p.options.unit_series:
            p.fail("k8s:job-units", "metrics", "no Prometheus URL (--prometheus): the policy's token and sample "
                   "series were not read")


def _api_client(p: Pull) -> client.ApiClient:
    o = p.options
    try:
        api = config.new_client_from_config(config_file=o.kubeconfig, context=o.context)
    except (ConfigException, FileNotFoundError, TypeError):
        if o.kubeconfig or o.context:
            raise
        cfg = client.Configuration()
        config.load_incluster_config(client_configuration=cfg)
        api = client.ApiClient(cfg)
    c = api.configuration
    p.secret(*(c.api_key or {}).values(), c.password)
    for value in (c.api_key or {}).values():
        p.secret(str(value).removeprefix("Bearer ").strip())
    return api


def _list(p: Pull, call, **kwargs) -> list[dict]:
    """Every item of a list call, following `metadata.continue`, as the API's own JSON."""
    items: list[dict] = []
    token = None
    while True:
        args = {**kwargs, "limit": PAGE, "_preload_content": False}
        if token:
            args["_continue"] = token
        raw = p.retry.call(call, throttled=throttled, **args)
        page = json.loads(raw.data)
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items


def _provider_id(provider_id: str) -> tuple[str, str | None]:
    """(cloud, instance id) from a node's spec.providerID: aws:///us-east-1a/i-0abc, gce://project/zone/name,
    azure:///subscriptions/.../virtualMachines/name."""
    m = re.match(r"^(aws|gce|azure)://(.*)$", provider_id or "")
    if not m:
        return "kubernetes", None
    cloud = {"aws": "aws", "gce": "gcp", "azure": "azure"}[m.group(1)]
    rest = m.group(2).strip("/")
    return cloud, (rest.lower() if cloud == "azure" else rest.rsplit("/", 1)[-1]) or None


def _is_spot(labels: dict[str, str]) -> bool:
    return any(labels.get(k, "").lower() == v.lower() for k, v in SPOT_LABELS.items())


def _nodes(p: Pull, api: client.ApiClient, nodes: dict[str, dict]) -> dict[str, int]:
    items = _list(p, client.CoreV1Api(api).list_node)
    for n in items:
        meta, spec, status = n.get("metadata") or {}, n.get("spec") or {}, n.get("status") or {}
        labels = meta.get("labels") or {}
        if whole((status.get("capacity") or {}).get(GPU) or labels.get("nvidia.com/gpu.count") or 0) is None \
                or not meta.get("name"):
            p.unread(f"nodes whose {GPU} capacity is not a whole number" if meta.get("name")
                     else "nodes without a name")
            continue
        shared = node_gpus(labels, status.get("allocatable") or status.get("capacity") or {},
                           meta.get("annotations") or {})
        gpus = shared.physical if shared else whole(labels.get("nvidia.com/gpu.count") or 0)
        if not gpus:
            continue
        cloud, instance = _provider_id(spec.get("providerID", ""))
        mem_mib = labels.get("nvidia.com/gpu.memory")  # under MIG's single strategy, a slice's
        single = shared is not None and shared.strategy == "mig-single"
        memory_gb = int(mem_mib) / 1024 if mem_mib and mem_mib.isdigit() and not single else None
        hami = hami_devices(meta.get("annotations") or {})
        if hami:  # HAMi registers each GPU's memory
            memory_gb = max(m for _, m in hami) / 1024
        product = (shared.product if shared else None) or labels.get("nvidia.com/gpu.product") or \
            labels.get("cloud.google.com/gke-accelerator")
        ready = next((c["status"] for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        asset = {
            "id": instance or meta["name"], "provider": cloud, "account": None,
            "region": labels.get("topology.kubernetes.io/region"), "zone": labels.get("topology.kubernetes.io/zone"),
            "name": meta["name"], "kind": "node",
            "instance_type": labels.get("node.kubernetes.io/instance-type") or
            labels.get("beta.kubernetes.io/instance-type"),
            "gpu_model": gpu_model(product, memory_gb), "gpu_count": gpus,
            "gpu_memory_gb": round(memory_gb, 3) if memory_gb else None,
            "lifecycle": "spot" if _is_spot(labels) else "on_demand",
            "state": {"True": "ready", "False": "not_ready"}.get(ready or "", "unknown"),  # ready: None, no condition
            "launch_time": meta.get("creationTimestamp"),
            "tags": {k: v for k, v in labels.items() if "/" not in k},  # the users' own labels, not the system's
        }
        nodes[meta["name"]] = asset
        p.assets.append(asset)
        p.gpu_units.extend({"asset_id": asset["id"], **u} for u in (shared.units if shared else []))
    return {"nodes": len(items), "gpu_nodes": len(nodes)}


def whole(value) -> int | None:
    """A count as Kubernetes writes it (`2`, "2"), or None when it is not a whole number ("500m", "two")."""
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def _gpus(pod_spec: dict) -> int | None:
    """The GPUs a pod asks for, or None when a container's request is not a whole number."""
    total = 0
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        want = whole((res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU) or 0)
        if want is None:
            return None
        total += want
    return total


def _spot_scheduling(pod_spec: dict) -> bool:
    if _is_spot(pod_spec.get("nodeSelector") or {}):
        return True
    terms = ((((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    for term in terms:
        for e in term.get("matchExpressions") or []:
            want = SPOT_LABELS.get(e.get("key"))
            if want and e.get("operator") == "In" and want.lower() in [v.lower() for v in e.get("values") or []]:
                return True
    return False


def _checkpoint(pod_spec: dict, namespace: str) -> str | None:
    """A durable place the pod writes checkpoints to, or None."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes") or []}
    for c in pod_spec.get("containers") or []:
        for env in c.get("env") or []:
            if CHECKPOINT.search(env.get("name", "")) and "://" in str(env.get("value", "")):
                return env["value"]
        for m in c.get("volumeMounts") or []:
            if not (CHECKPOINT.search(m.get("mountPath", "")) or CHECKPOINT.search(m.get("name", ""))):
                continue
            v = volumes.get(m["name"], {})
            if "persistentVolumeClaim" in v:
                return f"pvc://{namespace}/{v['persistentVolumeClaim']['claimName']}{m.get('mountPath', '')}"
            if "nfs" in v:
                return f"nfs://{v['nfs'].get('server')}{v['nfs'].get('path')}"
            if "csi" in v:
                return f"csi://{v['csi'].get('driver')}/{m['name']}"
            # emptyDir, hostPath and ephemeral volumes die with the pod or its node: not a checkpoint
    return None


def _interrupted(pod: dict) -> bool:
    status = pod.get("status") or {}
    if status.get("reason") in ("Evicted", "Preempting", "Shutdown", "Terminated"):
        return True
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _workloads(p: Pull, api: client.ApiClient, nodes: dict[str, dict]) -> dict[str, int]:
    jobs = _list(p, client.BatchV1Api(api).list_job_for_all_namespaces)
    pods = _list(p, client.CoreV1Api(api).list_pod_for_all_namespaces)
    by_owner: dict[str, list[dict]] = {}
    bare = []
    for pod in pods:
        owners = pod["metadata"].get("ownerReferences") or []
        if not owners:
            bare.append(pod)
        for o in owners:
            if o.get("kind") == "Job":
                by_owner.setdefault(f"{pod['metadata'].get('namespace')}/{o['name']}", []).append(pod)
    for pod in pods:
        _add_allocations(p, pod, nodes)
    w = p.options.window
    found = 0
    for j in jobs:
        meta, spec = j["metadata"], j.get("spec") or {}
        template = (spec.get("template") or {}).get("spec") or {}
        key = f"{meta.get('namespace')}/{meta['name']}"
        found += _add_job(p, key, "kubernetes-job", meta, template, j.get("status") or {}, by_owner.get(key, []),
                          nodes, spec.get("parallelism") or 1, spec.get("activeDeadlineSeconds"), w)
    for pod in bare:
        meta = pod["metadata"]
        key = f"{meta.get('namespace')}/pod/{meta['name']}"
        found += _add_job(p, key, "kubernetes-pod", meta, pod.get("spec") or {}, pod.get("status") or {}, [pod],
                          nodes, 1, (pod.get("spec") or {}).get("activeDeadlineSeconds"), w)
    return {"jobs": len(jobs), "pods": len(pods), "gpu_workloads": found, "gpu_pods": len(
        {a["id"] for a in p.gpu_allocations})}


def _add_allocations(p: Pull, pod: dict, nodes: dict[str, dict]) -> None:
    """The GPU units a pod holds on a GPU node, one row per resource, with when it held them."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    node_name = spec.get("nodeName")
    node = nodes.get(node_name) if node_name is not None else None
    if node is None:
        return  # pending, or on a node without GPUs: it holds none
    ended = [c["state"]["terminated"].get("finishedAt") for c in status.get("containerStatuses") or []
             if (c.get("state") or {}).get("terminated")]
    done = status.get("phase") in ("Succeeded", "Failed") and ended
    owner = next((o["name"] for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), None)
    namespace = meta.get("namespace") or "default"
    units_of = pod_gpu_units(spec)
    if units_of is None:
        p.unread("pods whose GPU request is not a whole number")
        return
    annotations = meta.get("annotations") or {}
    memory_mib = round(node["gpu_memory_gb"] * 1024) if node.get("gpu_memory_gb") else None
    share = pod_gpu_share(spec, annotations, memory_mib)  # HAMi cores and memory, a Run:ai fraction
    if share is not None and GPU not in units_of:
        units_of[GPU] = runai_devices(annotations)  # Run:ai: a fraction of as many GPUs, none requested
    for resource, units in sorted(units_of.items()):
        p.gpu_allocations.append({
            "id": f"{namespace}/{meta['name']}", "asset_id": node["id"], "resource": resource, "units": units,
            "namespace": namespace, "pod": meta["name"], "workload": f"{namespace}/{owner}" if owner else None,
            "state": (status.get("phase") or "unknown").lower(),
            "start_time": iso(utc(status.get("startTime") or meta.get("creationTimestamp"))),
            "end_time": iso(max(utc(t) for t in ended)) if done else None,
            "share": float(share) if share is not None and resource == GPU else None,
            "tags": {k: v for k, v in (meta.get("labels") or {}).items() if "/" not in k}})


def _add_job(p: Pull, key: str, platform: str, meta: dict, spec: dict, status: dict, pods: list[dict],
             nodes: dict[str, dict], parallelism: int, deadline: int | None, window) -> int:
    gpus = _gpus(spec)
    if gpus is None:
        p.unread(f"workloads whose {GPU} request is not a whole number")
        return 0
    if not gpus:
        return 0
    start = utc(status.get("startTime") or meta.get("creationTimestamp"))
    end = utc(status.get("completionTime"))
    if (start and start >= window.end) or (end and end < window.start):
        return 0
    ran_on = [nodes[n] for n in ((pod.get("spec") or {}).get("nodeName") for pod in pods) if n in nodes]
    node = ran_on[0] if ran_on else None
    state: str | None  # the job's phase where none of these
    if status.get("succeeded"):
        state = "succeeded"
    elif status.get("active") or status.get("phase") == "Running":
        state = "running"
    else:
        state = "failed" if status.get("failed") or status.get("phase") == "Failed" else status.get("phase")
    p.jobs.append({
        "id": key, "platform": platform, "provider": node["provider"] if node else "kubernetes",
        "account": None, "region": node["region"] if node else None, "name": meta["name"],
        "state": state.lower() if state else None,
        "instance_type": node["instance_type"] if node else None, "instance_count": max(1, int(parallelism)),
        "gpu_model": node["gpu_model"] if node else None, "gpu_count": gpus,
        "spot": _spot_scheduling(spec) or any(n["lifecycle"] == "spot" for n in ran_on),
        "checkpoint_uri": _checkpoint(spec, meta.get("namespace", "default")),
        "max_runtime_s": deadline, "interruptions": sum(1 for pod in pods if _interrupted(pod)),
        "start_time": iso(start), "end_time": iso(end),
        "tags": {k: v for k, v in (meta.get("labels") or {}).items() if "/" not in k},
    })
    return 1


# ---- DCGM exporter metrics through Prometheus ----------------------------------------------------------------

QUERIES = {"active": "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[1h])",
           "util": "avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h])", "mem": "max_over_time(DCGM_FI_DEV_FB_USED[1h])"}


def _dcgm(p: Pull, nodes: dict[str, dict]) -> dict[str, int]:
    w = p.options.window
    # Timestamps are epoch seconds; the window is naive UTC.
    start, end = w.start.replace(tzinfo=UTC), min(w.end.replace(tzinfo=UTC), datetime.now(UTC))
    got = {key: _series(p, prometheus.query_range(p, query, start, end, PERIOD), nodes)
           for key, query in QUERIES.items()}
    usage = dcgm.node_usage(got["active"], got["util"], got["mem"],
                            lambda asset: slices_per_gpu(asset.get("gpu_model")), PERIOD)
    slices = dcgm.slice_usage(got["active"], got["mem"], PERIOD)
    p.gpu_usage.extend(usage)
    p.slice_usage.extend(slices)
    return {"series": sum(len(v) for v in got.values()), "gpu_usage": len(usage), "slice_usage": len(slices)}


def _series(p: Pull, results: list[dict], nodes: dict[str, dict]) -> list[dict]:
    """The series of GPU nodes the pull found, each with its node and its finite samples; the rest counted."""
    out = []
    for s in results:
        labels = s.get("metric") or {}
        node = dcgm.node_of(labels, nodes)
        if node is None:
            p.unread("DCGM series of no GPU node the pull found")
            continue
        points = []
        for pair in s.get("values") or []:
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                t, v = 0.0, math.nan
            if math.isfinite(v):
                points.append((datetime.fromtimestamp(t, UTC), v))
            else:
                p.unread("DCGM samples that are not finite numbers (NaN, Inf)")
        out.append({"metric": labels, "node": node, "points": points})
    return out

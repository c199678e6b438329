"""GPUs as Kubernetes shares them, from a node's labels and allocatable and a pod's requests (the NVIDIA device
plugin and GPU feature discovery conventions):

- MIG, mixed strategy: one resource per profile, `nvidia.com/mig-<g>g.<mem>gb`; `nvidia.com/gpu.count` counts
  the physical GPUs and `nvidia.com/gpu` the GPUs left whole.
- MIG, single strategy: every GPU cut alike; `nvidia.com/gpu` counts MIG devices and `nvidia.com/gpu.product`
  names the profile (`A100-SXM4-40GB-MIG-1g.5gb`); `nvidia.com/gpu.count` counts devices too.
- Time-slicing and MPS: `nvidia.com/gpu` (or `nvidia.com/gpu.shared` when renamed) counts `replicas` per GPU;
  `nvidia.com/gpu.replicas`, `nvidia.com/gpu.sharing-strategy`, a product ending in `-SHARED`.

A unit's share of its physical GPU is `slices / slices_per_gpu`: a MIG profile's compute slices out of the GPU's
(7; 4 on an A30), a replica 1 of `replicas`, a whole GPU 1 of 1. A slice's cost is that share of a GPU's cost.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from auditor.providers import mig
from auditor.providers.live.pull import gpu_model

GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
# `+me` (media extensions) may be spelt `.me` in a resource name; `.shared` when time-slicing renames it
MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb(?:[+.](me))?(?:\.shared)?$")
MIG_PRODUCT = re.compile(r"^(.*)-MIG-(\d+)g\.(\d+)gb(?:[+.](me))?$", re.I)


def slices_per_gpu(product: str | None) -> int:
    """Compute slices a GPU is cut into under MIG: 4 on an A30, 7 on an A100, H100, H200, B200."""
    return 4 if product and re.search(r"(?i)\bA30\b", product.replace("-", " ")) else 7


def mig_profile(resource: str) -> tuple[int, int] | None:
    """(compute slices, memory GB) of a MIG resource name, or None."""
    m = MIG_RESOURCE.match(resource)
    return (int(m.group(1)), int(m.group(2))) if m else None


def profile_name(resource: str) -> str | None:
    """The MIG profile of a resource name as NVIDIA writes it (`1g.10gb+me`), or None."""
    m = MIG_RESOURCE.match(resource)
    return f"{m.group(1)}g.{m.group(2)}gb" + ("+me" if m.group(3) else "") if m else None


def _int(value) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


@dataclass
class NodeGpus:
    physical: int  # physical GPUs on the node
    product: str | None  # the GPU product without the MIG or -SHARED suffix
    strategy: str  # none, mig-mixed, mig-single, time-slicing, mps
    units: list[dict] = field(default_factory=list)  # one per resource: the snapshot's gpu_units rows

    @property
    def capacity(self) -> int:
        """Units of every resource, the node's GPU resources as the scheduler counts them."""
        return sum(u["count"] for u in self.units)


def node_gpus(labels: dict[str, str], allocatable: dict[str, str]) -> NodeGpus | None:
    """The node's physical GPUs and the units it offers, or None for a node without NVIDIA GPUs. Time-slicing
    (or MPS) multiplies every resource by its replicas, MIG slices' too: `A100-SXM4-40GB-MIG-1g.5gb-SHARED`
    with 2 replicas offers 14 units per GPU, 2 per slice."""
    raw_product = labels.get("nvidia.com/gpu.product") or ""
    shared_product = raw_product.endswith("-SHARED")
    single = MIG_PRODUCT.match(raw_product.removesuffix("-SHARED"))
    product = single.group(1) if single else raw_product.removesuffix("-SHARED") or None
    model = gpu_model(product)
    per_gpu = slices_per_gpu(product)
    label_count = _int(labels.get("nvidia.com/gpu.count"))
    replicas = max(1, _int(labels.get("nvidia.com/gpu.replicas")) or 1)
    sharing = (labels.get("nvidia.com/gpu.sharing-strategy") or "").lower()
    if sharing not in ("time-slicing", "mps"):
        sharing = "time-slicing" if replicas > 1 or shared_product else "none"
    per = replicas if sharing != "none" else 1
    units: list[dict] = []
    for resource, value in sorted(allocatable.items()):
        count, profile = _int(value), profile_name(resource)
        if count and profile:
            g, mem = mig_profile(resource)
            units.append(_unit(resource, "mig", profile, count, g, per_gpu, mem, per))
    mig_slices = {u["profile"]: u["count"] // per for u in units}
    whole = _int(allocatable.get(GPU)) + _int(allocatable.get(SHARED))
    if single and whole:  # single strategy: nvidia.com/gpu counts MIG devices of one profile
        g, mem = int(single.group(2)), int(single.group(3))
        profile = f"{g}g.{mem}gb" + ("+me" if single.group(4) else "")
        units.append(_unit(GPU, "mig", profile, whole, g, per_gpu, mem, per))
        return NodeGpus(mig.gpus_cut(model, {profile: whole // per}), product, "mig-single", units)
    for resource in (GPU, SHARED):
        count = _int(allocatable.get(resource))
        if count:
            units.append(_unit(resource, sharing, None, count, 1, per, None, 1))
    if not units:
        return None
    shared_gpus = math.ceil(whole / per)
    physical = max(label_count, shared_gpus + (mig.gpus_cut(model, mig_slices) if mig_slices else 0))
    strategy = "mig-mixed" if mig_slices else sharing
    return NodeGpus(physical, product, strategy, units)


def _unit(resource: str, sharing: str, profile: str | None, count: int, slices: int, per_gpu: int,
          memory_gb: int | None, replicas: int) -> dict:
    return {"resource": resource, "sharing": sharing, "profile": profile, "count": count, "slices": slices,
            "slices_per_gpu": per_gpu, "memory_gb": memory_gb, "replicas": replicas}


def pod_gpu_units(pod_spec: dict) -> dict[str, int] | None:
    """GPU units a pod holds, per resource (whole, shared or MIG): its containers' limits, else requests
    (extended resources must set limits; requests equal them). None when one is not a whole number."""
    out: dict[str, int] = {}
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        wanted = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for resource, value in wanted.items():
            if resource in (GPU, SHARED) or MIG_RESOURCE.match(resource):
                if not str(value).strip().isdigit():
                    return None
                out[resource] = out.get(resource, 0) + int(str(value).strip())
    return {k: v for k, v in out.items() if v}

"""GPUs as Kubernetes shares them, from a node's labels and allocatable and a pod's requests (the NVIDIA device
plugin and GPU feature discovery conventions):

- MIG, mixed strategy: one resource per profile, `nvidia.com/mig-<g>g.<mem>gb`; `nvidia.com/gpu.count` counts
  the physical GPUs and `nvidia.com/gpu` the GPUs left whole.
- MIG, single strategy: every GPU cut alike; `nvidia.com/gpu` counts MIG devices and `nvidia.com/gpu.product`
  names the profile (`A100-SXM4-40GB-MIG-1g.5gb`); `nvidia.com/gpu.count` counts devices too.
- Time-slicing and MPS: `nvidia.com/gpu` (or `nvidia.com/gpu.shared` when renamed) counts `replicas` per GPU;
  `nvidia.com/gpu.replicas`, `nvidia.com/gpu.sharing-strategy`, a product ending in `-SHARED`.
- HAMi: the node's `hami.io/node-nvidia-register` annotation lists its physical GPUs (`uuid,split count,memory
  MiB,cores,type,...` per GPU, `:` between them) and `nvidia.com/gpu` counts the split slots; a pod asks for
  `nvidia.com/gpu` GPUs with `nvidia.com/gpucores` (percent of each GPU's cores) and `nvidia.com/gpumem` (MiB)
  or `nvidia.com/gpumem-percentage`. A pod's share of each GPU is the larger of its cores and its memory
  (memory left unset is the whole GPU's, as HAMi gives it).
- Run:ai fractions: a pod annotated `gpu-fraction` (of `gpu-fraction-num-devices` GPUs, 1 by default) or
  `gpu-memory` (MiB) asks for no `nvidia.com/gpu`; it holds that share of the node's whole GPUs.

A unit's share of its physical GPU is what the cost model counts (tables/shared_gpus.py `unit_shares`: a MIG
slice what its profile blocks, a replica 1 of `replicas`, a whole GPU 1 of 1), or, for a HAMi or Run:ai pod, the
allocation's own `share`. A slice's cost is that share of a GPU's cost.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

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


HAMI_REGISTER = "hami.io/node-nvidia-register"
HAMI_CORES, HAMI_MEM, HAMI_MEM_PCT = "nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage"
RUNAI_FRACTION, RUNAI_DEVICES, RUNAI_MEMORY = "gpu-fraction", "gpu-fraction-num-devices", "gpu-memory"


def hami_devices(annotations: dict[str, str]) -> list[tuple[int, int]]:
    """(split count, memory MiB) of each physical GPU HAMi registered on a node; [] when it registered none."""
    out = []
    for entry in (annotations.get(HAMI_REGISTER) or "").split(":"):
        fields = entry.split(",")
        if len(fields) >= 3 and fields[1].strip().isdigit() and fields[2].strip().isdigit():
            out.append((int(fields[1]), int(fields[2])))
    return out


def node_gpus(labels: dict[str, str], allocatable: dict[str, str],
              annotations: dict[str, str] | None = None) -> NodeGpus | None:
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
    hami = hami_devices(annotations or {})
    if hami and _int(allocatable.get(GPU)):  # HAMi: nvidia.com/gpu counts split slots of the GPUs it registered
        slots = _int(allocatable.get(GPU))
        return NodeGpus(len(hami), product, "hami",
                        [_unit(GPU, "hami", None, slots, 1, max(1, slots // len(hami)), None, 1)])
    units: list[dict] = []
    for resource, value in sorted(allocatable.items()):
        count, slices = _int(value), mig_profile(resource)
        if count and slices:  # a MIG resource: its (compute slices, memory GB), as its profile names them
            g, mem = slices
            units.append(_unit(resource, "mig", profile_name(resource), count, g, per_gpu, mem, per))
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


def _quantity(value) -> Fraction | None:
    try:
        return Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        return None


def pod_gpu_share(pod_spec: dict, annotations: dict[str, str], gpu_memory_mib: int | None) -> Fraction | None:
    """A HAMi or Run:ai pod's share of each GPU it holds: the larger of its cores and its memory (HAMi:
    `nvidia.com/gpucores` percent, `nvidia.com/gpumem` MiB or `nvidia.com/gpumem-percentage`; memory left unset
    is the whole GPU's), or its `gpu-fraction` (Run:ai; `gpu-memory` MiB of the GPU's memory). None for a pod
    that asks for neither: its units are whole."""
    wanted: dict[str, Fraction] = {}
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        for resource, value in {**(res.get("requests") or {}), **(res.get("limits") or {})}.items():
            q = _quantity(value)
            if resource in (HAMI_CORES, HAMI_MEM, HAMI_MEM_PCT) and q is not None:
                wanted[resource] = max(wanted.get(resource, Fraction(0)), q)
    if HAMI_CORES in wanted or HAMI_MEM in wanted or HAMI_MEM_PCT in wanted:
        cores = wanted.get(HAMI_CORES, Fraction(0)) / 100
        if HAMI_MEM_PCT in wanted:
            memory = wanted[HAMI_MEM_PCT] / 100
        elif HAMI_MEM in wanted and gpu_memory_mib:
            memory = wanted[HAMI_MEM] / gpu_memory_mib
        else:
            memory = Fraction(1)
        return min(Fraction(1), max(cores, memory))
    fraction = _quantity(annotations.get(RUNAI_FRACTION)) if annotations.get(RUNAI_FRACTION) else None
    if fraction is None and annotations.get(RUNAI_MEMORY) and gpu_memory_mib:
        mib = _quantity(annotations[RUNAI_MEMORY])
        fraction = mib / gpu_memory_mib if mib is not None else None
    return min(Fraction(1), fraction) if fraction is not None and fraction > 0 else None


def runai_devices(annotations: dict[str, str]) -> int:
    """GPUs a Run:ai fractional pod holds a fraction of each (1 unless `gpu-fraction-num-devices` says)."""
    return max(1, _int(annotations.get(RUNAI_DEVICES)) or 1)


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

from __future__ import annotations

from auditor.model import GpuSlice, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


def held(s: GpuSlice) -> str:
    """What a pod holds, in words: a MIG slice, replicas of a shared GPU, or whole GPUs."""
    gpu = s.gpu_model or "GPU"
    if s.sharing == "mig":
        part = f"{s.unit_share} of one {gpu}"
        return f"MIG slice {s.profile} ({part})" if s.units == 1 else f"{s.units} MIG slices {s.profile} ({part} each)"
    if s.share is not None and s.sharing not in ("time-slicing", "mps") and s.unit_share != 1:
        how = "HAMi" if s.sharing == "hami" else "fractional"
        return f"{how} {s.unit_share} of {'one' if s.units == 1 else s.units} {gpu}"
    if s.sharing in ("time-slicing", "mps"):
        how = "time-sliced" if s.sharing == "time-slicing" else "MPS"
        return f"{s.units} of {s.slices_per_gpu} {how} replicas of one {gpu}"
    return f"{s.units}x {gpu}"


@register
class IdleGpuSlice(Rule):
    """Kubernetes pod holding a GPU slice (MIG, time-sliced, MPS or whole) whose engine sat idle.

    ## What it does
    Flags a pod whose GPU units (a MIG slice, replicas of a time-sliced or MPS GPU, whole GPUs) show a
    mean DCGM engine activity (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, of the slice) under `max_mean_active_pct`,
    once it has at least `min_hours` of samples. `DCGM_FI_DEV_GPU_UTIL` is not used: it reads 0 on MIG
    slices. A time-sliced or MPS GPU reports one activity for all the pods that share it, so those pods
    are judged by the whole GPU's. The cost is the slice's share of the node's cost for the hours the
    pod held it (a MIG slice by what its profile blocks of the GPU: its memory slices out of 8 or its
    compute slices out of 7, whichever is more; time-slicing by replicas); the saving is that cost as a
    monthly run rate.

    ## Why it matters
    A held slice is a slice nobody else can schedule on: a notebook parked on a 3g.40gb slice keeps
    half an A100 (four of its eight memory slices) from every other team, and nothing at the node level shows it.

    ## Example
    ```yaml
    - {id: research/notebook-7, node: i-0mig, namespace: research, pod: notebook-7, sharing: mig,
       resource: nvidia.com/mig-3g.40gb, profile: 3g.40gb, slices: 3, slices_per_gpu: 7, memory_gb: 40,
       gpu_model: A100-80GB, hours: 72, usage_hours: 72, mean_active_pct: 0.4, cost: {USD: "105.87"}}
    ```

    ## How to fix
    Delete the idle pod or scale its deployment to zero; give notebooks an idle culler. Where the
    work is light but steady, move it to a smaller MIG profile or a time-sliced GPU.
    """

    id = "KUBE001"
    name = "idle-gpu-slice"
    severity = Severity.MEDIUM
    entity = GpuSlice
    clause = "shared_gpu_idle"
    options = {
        "max_mean_active_pct": Field("number", default=5, minimum=0, maximum=100,
                                     doc="mean engine activity (of the slice) below which a slice is idle"),
        "min_hours": Field("number", default=24, minimum=0, doc="hours of samples needed before judging"),
    }

    def check(self, s: GpuSlice, ctx):
        hours = s.usage_hours or 0.0
        if s.mean_active_pct is None or hours < self.opt("min_hours"):
            return
        if s.mean_active_pct >= self.opt("max_mean_active_pct"):
            return
        billed = primary(s.cost)
        currency, cost = billed if billed else ("USD", None)
        monthly = ctx.monthly(cost, s.hours) if cost is not None else None
        spent = f"; {fmt_money(cost, currency)} of the node's cost in {ctx.window.label}" if cost is not None else ""
        shared = " (the whole shared GPU's activity)" if s.sharing in ("time-slicing", "mps") else ""
        yield self.finding(
            s, ctx,
            f"pod {s.namespace}/{s.pod} holds {held(s)} on node {s.node_name or s.node}: "
            f"{s.mean_active_pct:.1f}% engine activity{shared} over {hours:,.0f} h{spent}",
            evidence={"node": s.node, "resource": s.resource, "sharing": s.sharing, "profile": s.profile,
                      "units": s.units, "gpu_share": str(round(s.gpu_share, 4)),
                      "mean_active_pct": round(s.mean_active_pct, 2), "p95_active_pct": s.p95_active_pct,
                      "usage_hours": round(hours, 1), "hours_held": s.hours,
                      "threshold_pct": self.opt("max_mean_active_pct"), "cost_basis": s.cost_basis,
                      "savings_basis": "the slice's share of the node's cost as a monthly run rate"},
            cost=cost, monthly_savings=monthly if monthly else None, currency=currency)

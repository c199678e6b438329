from __future__ import annotations

import math
from decimal import Decimal

from auditor.model import GpuSlice, Severity, fmt_money, primary
from auditor.providers import mig
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


def memory_gb(profile: str) -> int:
    """The memory GB a MIG profile's name states (`3g.40gb` -> 40): every name in mig_profiles.yaml has it."""
    m = mig.PROFILE.match(profile)
    if m is None:
        raise ValueError(f"not a MIG profile name: {profile!r}")
    return int(m.group(2))


def smaller(s: GpuSlice) -> list[tuple[int, int]]:
    """(compute slices, memory GB) of the profiles of the slice's GPU (auditor/data/mig_profiles.yaml), media
    extension profiles left out."""
    if s.profile is None:
        return []
    product = mig.product_for(s.gpu_model, [s.profile])
    if product is None or s.profile not in product.profiles:
        return []
    return [(p.compute, memory_gb(name)) for name, p in product.profiles.items() if not name.endswith("+me")]


@register
class OversizedGpuSlice(Rule):
    """MIG slice bigger than its pod's work: a smaller profile of the same GPU holds its memory and pace.

    ## What it does
    For a pod on a MIG slice with at least `min_hours` of DCGM data, takes the slice's peak memory
    (plus `memory_headroom_pct`) and the compute it used (p95 engine activity x its compute slices),
    and finds the smallest MIG profile of the same GPU that holds that memory and runs that compute at no more than
    `max_target_active_pct`. Flags the slice when that profile has fewer compute slices, and says
    what it saves: the slice's cost (its share of the node's cost) times the share of the GPU given back
    (what each profile blocks: its memory slices out of 8 or its compute slices out of 7, whichever is
    more, from NVIDIA's table for the GPU), as a monthly run rate. Slices under `min_mean_active_pct` are
    idle (KUBE001), not oversized.

    ## Why it matters
    A 7g.80gb slice is a whole H100 or A100: a service that peaks at 6 GB and 5% activity on it holds
    six sevenths of a GPU that other pods could use as 1g.10gb slices.

    ## Example
    ```yaml
    - {id: serving/embedder-0, node: i-0mig, namespace: serving, pod: embedder-0, sharing: mig,
       resource: nvidia.com/mig-7g.80gb, profile: 7g.80gb, slices: 7, slices_per_gpu: 7, memory_gb: 80,
       gpu_model: A100-80GB, hours: 720, usage_hours: 720, mean_active_pct: 6, p95_active_pct: 9,
       peak_mem_gb: 6.5, cost: {USD: "2470.23"}}
    ```

    ## How to fix
    Request the smaller profile (`nvidia.com/mig-1g.10gb` in place of `nvidia.com/mig-7g.80gb`) and
    repartition the GPU (the MIG manager's `nvidia.com/mig.config` label) so the rest serves others.
    """

    id = "KUBE002"
    name = "oversized-gpu-slice"
    severity = Severity.MEDIUM
    entity = GpuSlice
    clause = "shared_gpu_rightsizing"
    options = {
        "memory_headroom_pct": Field("number", default=20, minimum=0, maximum=500,
                                     doc="memory kept free above the observed peak"),
        "max_target_active_pct": Field("number", default=80, minimum=1, maximum=100,
                                       doc="the busiest the smaller slice may be expected to run"),
        "min_mean_active_pct": Field("number", default=5, minimum=0, maximum=100,
                                     doc="below this a slice is idle (KUBE001), not oversized"),
        "min_hours": Field("number", default=24, minimum=0, doc="hours of samples needed before judging"),
    }

    def check(self, s: GpuSlice, ctx):
        if s.sharing != "mig" or not s.profile or s.peak_mem_gb is None or s.p95_active_pct is None:
            return
        if s.mean_active_pct is None or s.mean_active_pct < self.opt("min_mean_active_pct"):
            return
        if (s.usage_hours or 0) < self.opt("min_hours"):
            return
        g, mem = (int(x) for x in s.profile.removesuffix("gb").split("g."))
        need_mem = s.peak_mem_gb * (1 + self.opt("memory_headroom_pct") / 100)
        need_slices = max(1, math.ceil(s.p95_active_pct / 100 * g / (self.opt("max_target_active_pct") / 100)
                                       - 1e-9))
        fits = [p for p in smaller(s) if p[0] < g and p[0] >= need_slices and p[1] >= need_mem]
        if not fits:
            return
        to_g, to_mem = min(fits)
        billed = primary(s.cost)
        currency, cost = billed if billed else ("USD", None)
        to = f"{to_g}g.{to_mem}gb"
        kept = mig.blocks(s.gpu_model, to) / mig.blocks(s.gpu_model, s.profile)
        given_back = 1 - Decimal(kept.numerator) / Decimal(kept.denominator)  # of the slice's cost, by what each blocks
        monthly = ctx.monthly(cost, s.hours) * given_back if cost is not None else None
        saving = f", saving about {fmt_money(monthly, currency)} a month" if monthly else ""
        yield self.finding(
            s, ctx,
            f"pod {s.namespace}/{s.pod} on MIG slice {s.profile} peaks at {s.peak_mem_gb:g} GB and "
            f"{s.p95_active_pct:g}% engine activity: {to_g}g.{to_mem}gb holds it ({to_g} of {g} compute "
            f"slices){saving}",
            evidence={"node": s.node, "profile": s.profile, "recommended_profile": f"{to_g}g.{to_mem}gb",
                      "peak_mem_gb": s.peak_mem_gb, "needed_mem_gb": round(need_mem, 2),
                      "p95_active_pct": s.p95_active_pct, "mean_active_pct": round(s.mean_active_pct, 2),
                      "needed_compute_slices": need_slices, "usage_hours": s.usage_hours,
                      "cost_basis": s.cost_basis,
                      "savings_basis": "the slice's cost as a monthly run rate x the share of the GPU given back "
                                       "(what each profile blocks)"},
            cost=cost, monthly_savings=monthly if monthly else None, currency=currency,
            wasted=cost * given_back if cost is not None and monthly else None,
            key=f"{to_g}g.{to_mem}gb")

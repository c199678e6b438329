from __future__ import annotations

from auditor.model import GpuAsset, Severity, fmt_money, primary
from auditor.rule import Rule, register
from auditor.schema import Field


@register
class OversizedGpu(Rule):
    """GPU machine bigger than its work: a cheaper GPU type holds its memory and keeps its pace.

    ## What it does
    For a GPU machine with utilisation data, takes the peak GPU memory (plus `memory_headroom_pct`)
    and the compute it used (p95 utilisation x the GPU's dense FP16 TFLOPS), and finds the cheapest
    instance type in the bundled catalog, same provider and same GPU count, whose GPUs hold that
    memory and deliver that compute at no more than `max_target_util_pct`. Flags the machine when
    that type saves at least `min_monthly_savings` a month. Machines under `min_mean_util_pct` are
    idle rather than oversized and are left to GPU001.

    ## Why it matters
    A model that fits a T4 or an L4 trained on an A100 or H100 pays several times over for
    memory and compute it never touches.

    ## Example
    ```yaml
    - {id: i-0big, provider: aws, instance_type: p4d.24xlarge, usage_hours: 2000,
       mean_util_pct: 22, p95_util_pct: 30, peak_mem_gb: 11}
    ```

    ## How to fix
    Move the workload to the recommended instance type. Where memory alone holds it on the large
    GPU, mixed precision (bf16) or gradient checkpointing usually brings it within the smaller one.
    """

    id = "GPU002"
    name = "oversized-gpu"
    severity = Severity.MEDIUM
    entity = GpuAsset
    clause = "rightsizing"
    options = {
        "memory_headroom_pct": Field("number", default=20, minimum=0, maximum=500,
                                     doc="memory kept free above the observed peak"),
        "max_target_util_pct": Field("number", default=80, minimum=1, maximum=100,
                                     doc="the busiest the smaller GPU may be expected to run"),
        "min_monthly_savings": Field("number", default=50, minimum=0,
                                     doc="smallest monthly saving worth a finding"),
        "min_mean_util_pct": Field("number", default=10, minimum=0, maximum=100,
                                   doc="below this a machine is idle (GPU001), not oversized"),
    }

    def check(self, asset: GpuAsset, ctx):
        if asset.peak_mem_gb is None or asset.p95_util_pct is None or asset.mean_util_pct is None:
            return
        if asset.mean_util_pct < self.opt("min_mean_util_pct"):
            return
        current = ctx.catalog.instance(asset.provider, asset.instance_type)
        if current is None:
            return
        gpu = ctx.catalog.gpu(asset.gpu_model or current.gpu_model)
        if gpu is None:
            return
        need_mem = asset.peak_mem_gb * (1 + self.opt("memory_headroom_pct") / 100)
        need_tflops = asset.p95_util_pct / 100 * gpu.tflops
        target = self.opt("max_target_util_pct") / 100
        fits = []
        for t in ctx.catalog.instance_types(asset.provider):
            g = ctx.catalog.gpu(t.gpu_model)
            if (t.gpu_count == current.gpu_count and t.price_per_hour < current.price_per_hour and g
                    and g.memory_gb >= need_mem and g.tflops * target >= need_tflops):
                fits.append(t)
        if not fits:
            return
        best = min(fits, key=lambda t: (t.price_per_hour, t.name))
        ratio = best.price_per_hour / current.price_per_hour
        billed = primary(asset.cost)
        if billed:
            currency, cost = billed
            monthly = ctx.monthly(cost, asset.billed_hours) * (1 - ratio)
            basis = "billed cost as a monthly run rate x the catalog price ratio"
        else:
            currency, cost = "USD", None
            monthly = (current.price_per_hour - best.price_per_hour) * 730
            basis = "catalog on-demand price difference x 730 h"
        if monthly < self.opt("min_monthly_savings"):
            return
        yield self.finding(
            asset, ctx,
            f"{asset.instance_type} {asset.name or asset.id} peaks at {asset.peak_mem_gb:g} GB of "
            f"{gpu.memory_gb:g} GB GPU memory and {asset.p95_util_pct:g}% utilisation: "
            f"{best.name} ({best.gpu_count}x {best.gpu_model}) fits, saving about "
            f"{fmt_money(monthly, currency)} a month",
            evidence={"peak_mem_gb": asset.peak_mem_gb, "gpu_memory_gb": gpu.memory_gb,
                      "p95_util_pct": asset.p95_util_pct, "mean_util_pct": round(asset.mean_util_pct, 2),
                      "needed_mem_gb": round(need_mem, 2), "needed_tflops": round(need_tflops, 1),
                      "current_type": current.name, "current_price_per_hour": str(current.price_per_hour),
                      "recommended_type": best.name, "recommended_gpu": best.gpu_model,
                      "recommended_price_per_hour": str(best.price_per_hour),
                      "prices": ctx.catalog.prices[asset.provider].source, "savings_basis": basis},
            cost=cost, monthly_savings=monthly, currency=currency, key=best.name)

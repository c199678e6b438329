from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from auditor.model import GpuAsset, Severity, fmt_money, primary
from auditor.providers.catalog import InstanceType
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class OversizedGpu(Rule):
    """GPU machine bigger than its work: a cheaper GPU type, or fewer GPUs, hold its memory and keep its pace.

    ## What it does
    For a GPU machine with utilisation data, takes the peak GPU memory (plus `memory_headroom_pct`)
    and the compute it used (p95 utilisation x the GPU's dense FP16 TFLOPS x its GPU count), and
    finds the cheapest instance type in the bundled catalog, same provider, that holds that memory
    and delivers that compute at no more than `max_target_util_pct`: any GPU model with the same
    GPU count, or the same GPU model with fewer GPUs when the load across a multi-GPU machine is
    low (then the fewer GPUs must hold the memory of all of them, whether the job replicates or
    shards its model). Flags the machine when that type saves at least `min_monthly_savings` a
    month. Machines under `min_mean_util_pct` are idle rather than oversized and are left to GPU001.
    Where a still cheaper type keeps the pace and memory alone rules it out, the finding says so;
    with `suggest_memory_reduction` such a machine is flagged even when nothing else fits.
    The catalog prices one region per provider, so the comparison is within the provider at that
    region's prices.

    ## Why it matters
    A model that fits a T4 or an L4 trained on an A100 or H100 pays several times over for
    memory and compute it never touches; eight GPUs that run at 15% do the work of two.

    ## Example
    ```yaml
    - {id: i-0big, provider: aws, instance_type: p4d.24xlarge, usage_hours: 2000,
       mean_util_pct: 22, p95_util_pct: 30, peak_mem_gb: 11}
    ```

    ## How to fix
    Move the workload to the recommended instance type (or the smaller size of the same family).
    Where memory alone holds it on the large GPU, mixed precision (bf16) or gradient checkpointing
    usually brings it within the smaller one.
    """

    id = "GPU002"
    name = "oversized-gpu"
    severity = Severity.MEDIUM
    entity = GpuAsset
    clause = "rightsizing"
    frees_capacity = True
    options = {
        "memory_headroom_pct": Field("number", default=20, minimum=0, maximum=500,
                                     doc="memory kept free above the observed peak"),
        "max_target_util_pct": Field("number", default=80, minimum=1, maximum=100,
                                     doc="the busiest the smaller GPU may be expected to run"),
        "min_monthly_savings": Field("money", default=50, minimum=0,
                                     doc="smallest monthly saving worth a finding"),
        "min_mean_util_pct": Field("number", default=10, minimum=0, maximum=100,
                                   doc="below this a machine is idle (GPU001), not oversized"),
        "suggest_memory_reduction": Field("bool", default=False,
                                          doc="flag machines that memory alone keeps on the larger GPU"),
    }

    def check(self, asset: GpuAsset, ctx):
        if asset.peak_mem_gb is None or asset.p95_util_pct is None or asset.mean_util_pct is None:
            return
        if asset.mean_util_pct < self.opt("min_mean_util_pct"):
            return
        current = ctx.catalog.instance(asset.provider, asset.instance_type)
        if current is None or current.price_per_hour is None:
            return
        gpu = ctx.catalog.gpu(asset.gpu_model or current.gpu_model)
        if gpu is None:
            return
        count = current.gpu_count
        need_mem = asset.peak_mem_gb * (1 + self.opt("memory_headroom_pct") / 100)
        # per GPU of the current machine (a fractional GPU's share of the GPU's throughput)
        need_tflops = asset.p95_util_pct / 100 * gpu.tflops * float(current.gpu_share)
        target = self.opt("max_target_util_pct") / 100
        fits, memory_bound = [], []
        for t in ctx.catalog.instance_types(asset.provider):
            g = ctx.catalog.gpu(t.gpu_model)
            same_count = t.gpu_count == count
            fewer_same_model = t.gpu_count < count and t.gpu_model == gpu.name
            if not g or t.price_per_hour >= current.price_per_hour or not (same_count or fewer_same_model):
                continue
            share = float(t.gpu_share)  # a fractional type has its share of the GPU's memory and throughput
            memory_ok = g.memory_gb * share >= need_mem and t.gpu_count * g.memory_gb * share >= need_mem * count
            compute_ok = t.gpu_count * g.tflops * share * target >= need_tflops * count
            if memory_ok and compute_ok:
                fits.append(t)
            elif compute_ok:
                memory_bound.append(t)
        best = min(fits, key=lambda t: (t.price_per_hour, t.name)) if fits else None
        cheaper_but_memory = [t for t in memory_bound if best is None or t.price_per_hour < best.price_per_hour]
        hint = min(cheaper_but_memory, key=lambda t: (t.price_per_hour, t.name)) if cheaper_but_memory else None
        if best is None:
            if hint is None or not self.opt("suggest_memory_reduction"):
                return
            target_type, memory_only = hint, True
        else:
            target_type, memory_only = best, False
        currency, cost, monthly, wasted, basis = self._saving(asset, ctx, current.price_per_hour,
                                                              target_type.price_per_hour)
        if self.short_of(monthly, currency, "min_monthly_savings", ctx):
            return
        head = (f"{asset.instance_type} {asset.name or asset.id} peaks at {asset.peak_mem_gb:g} GB of "
                f"{gpu.memory_gb:g} GB GPU memory and {asset.p95_util_pct:g}% utilisation: ")
        # target_type is the memory-bound hint when memory_only, else the best fit
        if memory_only:
            message = (f"{head}memory alone keeps it off {target_type.name} ({_gpus(target_type)}, "
                       f"{_memory(ctx, target_type):g} GB a GPU, needs {need_mem:.1f} GB "
                       f"with headroom); mixed precision "
                       f"(bf16) or gradient checkpointing would bring it within, saving about "
                       f"{fmt_money(monthly, currency)} a month")
        else:
            message = (f"{head}{target_type.name} ({_gpus(target_type)}) fits, saving about "
                       f"{fmt_money(monthly, currency)} a month")
            if target_type.gpu_count < count:
                message += f"; its load fits {target_type.gpu_count} of its {count} GPUs"
            if hint:
                message += (f"; memory alone rules out the cheaper {hint.name} "
                            f"({_memory(ctx, hint):g} GB a GPU): "
                            "mixed precision (bf16) or gradient checkpointing may bring the peak within it")
        yield self.finding(
            asset, ctx, message,
            evidence={"peak_mem_gb": asset.peak_mem_gb, "gpu_memory_gb": gpu.memory_gb,
                      "p95_util_pct": asset.p95_util_pct, "mean_util_pct": round(asset.mean_util_pct, 2),
                      "needed_mem_gb": round(need_mem, 2), "needed_tflops": round(need_tflops * count, 1),
                      "current_type": current.name, "current_gpu_count": count,
                      "current_price_per_hour": str(current.price_per_hour),
                      "recommended_type": target_type.name, "recommended_gpu": target_type.gpu_model,
                      "recommended_gpu_count": target_type.gpu_count,
                      "recommended_price_per_hour": str(target_type.price_per_hour),
                      "memory_bound_alternative": hint.name if hint else None,
                      "needs_memory_reduction": memory_only,
                      "price_region": ctx.catalog.prices[asset.provider].region,
                      "prices": "; ".join(dict.fromkeys(ctx.catalog.price_source(t) for t in (current, target_type))),
                      "savings_basis": basis},
            cost=cost, monthly_savings=monthly, currency=currency, wasted=wasted,
            key=f"memory:{target_type.name}" if memory_only else target_type.name)

    @staticmethod
    def _saving(asset: GpuAsset, ctx, current_price: Decimal, to_price: Decimal):
        """The saving of moving to a type priced `to_price` from one priced `current_price` (both priced:
        `instance_types` holds only priced types and `check` returns on an unpriced current one)."""
        ratio = to_price / current_price
        billed = primary(asset.cost)
        if billed:
            currency, cost = billed
            return (currency, cost, ctx.monthly(cost, asset.billed_hours) * (1 - ratio), cost * (1 - ratio),
                    "billed cost as a monthly run rate x the catalog price ratio")
        return ("USD", None, (current_price - to_price) * 730, None,
                "catalog on-demand price difference x 730 h")


def _memory(ctx, t: InstanceType) -> float:
    """The GPU memory a type offers a GPU: a fractional type's share of its GPU's (an eighth of an L4 is 3 GB)."""
    return ctx.catalog.gpu(t.gpu_model).memory_gb * float(t.gpu_share)


def _gpus(t: InstanceType) -> str:
    """A type's GPUs in words: `8x L4`, or a fractional type's share of one (`1/6 A10`)."""
    if t.gpu_share == 1:
        return f"{t.gpu_count}x {t.gpu_model}"
    return f"{Fraction(t.gpu_share).limit_denominator(64) * t.gpu_count} {t.gpu_model}"

from __future__ import annotations

from decimal import Decimal

from auditor.model import GpuAsset, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class IdleGpu(Rule):
    """GPU machine whose GPUs sat idle: mean utilisation under the policy's threshold.

    ## What it does
    Flags a GPU machine whose mean GPU utilisation over the audit window is below
    `max_mean_util_pct`, once it has at least `min_hours` of utilisation samples. The cost is
    what the billing export charged for the machine in the window; the saving is that cost as a
    monthly run rate (or, for a machine the export does not itemise, the catalog price).

    ## Why it matters
    An idle GPU costs the same as a busy one. A forgotten 8x H100 node runs to about $40,000 a month.

    ## Example
    ```yaml
    - {id: i-0idle, provider: aws, instance_type: p5.48xlarge, usage_hours: 720, mean_util_pct: 2.5}
    ```

    ## How to fix
    Stop or terminate the machine, or give it a scheduled shutdown (an idle timeout on notebooks,
    autoscaling to zero on node pools). Keep the data on a volume or bucket, not on the idle box.
    """

    id = "GPU001"
    name = "idle-gpu"
    severity = Severity.HIGH
    entity = GpuAsset
    clause = "idle"
    frees_capacity = True
    options = {
        "max_mean_util_pct": Field("number", default=10, minimum=0, maximum=100,
                                   doc="mean GPU utilisation below which a machine is idle"),
        "min_hours": Field("number", default=24, minimum=0,
                           doc="hours of utilisation data needed before judging"),
    }

    def check(self, asset: GpuAsset, ctx):
        hours = asset.usage_hours or 0.0
        if asset.mean_util_pct is None or hours < self.opt("min_hours"):
            return
        threshold = self.opt("max_mean_util_pct")
        if asset.mean_util_pct >= threshold:
            return
        billed = primary(asset.cost)
        t = ctx.catalog.instance(asset.provider, asset.instance_type)
        if billed:
            currency, cost = billed
            monthly, basis = ctx.monthly(cost, asset.billed_hours), "billed cost as a monthly run rate"
        elif t and t.price_per_hour is not None:
            currency, cost = "USD", None
            monthly, basis = t.price_per_hour * 730, "catalog on-demand price x 730 h"
        else:  # no saving rather than $0: the catalog says why a type has no price
            currency, cost, monthly = "USD", None, None
            basis = f"no on-demand price: {t.unpriced}" if t and t.unpriced else "no price known"
        gpus = f"{asset.gpu_count or '?'}x {asset.gpu_model or 'GPU'}"
        spent = f"; {fmt_money(cost, currency)} billed in {ctx.window.label}" if cost is not None else ""
        yield self.finding(
            asset, ctx,
            f"{asset.instance_type or asset.kind} {asset.name or asset.id} ({gpus}) averaged "
            f"{asset.mean_util_pct:.1f}% GPU utilisation over {hours:,.0f} h{spent}",
            evidence={"mean_util_pct": round(asset.mean_util_pct, 2), "p95_util_pct": asset.p95_util_pct,
                      "usage_hours": round(hours, 1), "threshold_pct": threshold,
                      "instance_type": asset.instance_type, "gpu_model": asset.gpu_model,
                      "gpu_count": asset.gpu_count, "savings_basis": basis},
            cost=cost, monthly_savings=Decimal(monthly) if monthly is not None else None, currency=currency)

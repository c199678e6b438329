from __future__ import annotations

from decimal import Decimal

from auditor.model import HOURS_PER_MONTH, Severity, SteadyGpuSpend, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class UncommittedGpuBaseline(Rule):
    """Steady on-demand GPU spend that a savings plan, reservation or committed-use discount would cover.

    ## What it does
    Reads the on-demand GPU compute of the billing (not spot, not already covered by a commitment) per
    provider, region, instance family and currency, day by day over the audit window (the billing is
    summed per UTC day). The floor is the least any day cost, as an hourly amount (a day on which the
    family did not run makes it zero): that much runs every hour, so a commitment of that size would
    always be used. Flags a floor of at least `min_floor_per_hour`. The saving is `commit_pct` of the
    floor x 730 hours x the provider's rate in `discount_pct`, the discount of the commitment you would
    buy, as your price sheet states it on `discount_as_of` (`discount_source` says where); no rate is
    looked up. Without a rate for the provider the finding states the spend a commitment would cover and
    no saving. Unused commitments are COM001's.

    ## Why it matters
    A GPU that runs every hour at on-demand prices pays 30-60% more than the same GPU under a one- or
    three-year savings plan, reservation or committed-use discount. The floor is what can be committed
    without risk: it ran every day of the window.

    ## Example
    ```yaml
    - {id: "aws:us-east-1:p4d:USD", provider: aws, region: us-east-1, family: p4d,
       instance_types: [p4d.24xlarge], gpu_model: A100, days: 92, days_billed: 92,
       floor_per_hour: "21.96", on_demand: "48487.68"}
    ```

    ## How to fix
    Buy a commitment for the floor (or `commit_pct` of it): an AWS Compute or EC2 Instance Savings Plan
    or a SageMaker Savings Plan, a GCP committed-use discount for the GPUs and machine type, an Azure
    reservation or savings plan for the VM size. Size it from a quarter like this one, and check COM001
    afterwards for what goes unused.
    """

    id = "COM004"
    name = "uncommitted-gpu-baseline"
    severity = Severity.MEDIUM
    entity = SteadyGpuSpend
    clause = "commitment_coverage"
    options = {
        "min_floor_per_hour": Field("number", default=5, minimum=0,
                                    doc="least steady on-demand spend an hour (in its currency) worth a commitment"),
        "commit_pct": Field("number", default=100, minimum=0, maximum=100,
                            doc="share of the floor to commit to, percent"),
        "discount_pct": Field("map", item=Field("number", minimum=0, maximum=100), default={},
                              doc="discount of the commitment you would buy per provider (aws, gcp, azure), "
                                  "percent, from your price sheet; none: no saving stated"),
        "discount_as_of": Field("date", doc="the date the discount rates were read"),
        "discount_source": Field("str", doc="where the discount rates come from (a pricing page, a quote)"),
    }

    def check(self, s: SteadyGpuSpend, ctx):
        if s.floor_per_hour <= 0 or s.floor_per_hour < Decimal(str(self.opt("min_floor_per_hour"))):
            return
        covered = s.floor_per_hour * Decimal(str(self.opt("commit_pct"))) / 100
        monthly = covered * HOURS_PER_MONTH
        rates = {k.lower(): v for k, v in (self.opt("discount_pct") or {}).items()}
        rate = rates.get(s.provider)
        where = f"{s.family} in {s.region or 'every region'}"
        evidence = {"instance_types": s.instance_types, "gpu_model": s.gpu_model, "days": s.days,
                    "floor_per_hour": str(s.floor_per_hour.quantize(Decimal("0.0001"))),
                    "commit_pct": str(self.opt("commit_pct")), "covered_per_month": str(money(monthly)),
                    "on_demand": str(money(s.on_demand)), "already_committed": str(money(s.committed))}
        saving = None
        text = f"{fmt_money(money(monthly), s.currency)} a month at on-demand prices a commitment would cover"
        if rate is not None:
            saving = monthly * Decimal(str(rate)) / 100
            source = ", ".join(str(x) for x in (self.opt("discount_source"), self.opt("discount_as_of")) if x)
            evidence |= {"discount_pct": str(rate), "discount_source": self.opt("discount_source"),
                         "discount_as_of": str(self.opt("discount_as_of")) if self.opt("discount_as_of") else None}
            text += (f"; at the policy's {rate}% discount{f' ({source})' if source else ''} it saves "
                     f"{fmt_money(money(saving), s.currency)} a month")
        yield self.finding(
            s, ctx, f"{s.provider} {where}: at least {fmt_money(s.floor_per_hour, s.currency)} an hour of on-demand "
            f"GPU compute every day of {ctx.window.label}: {text}",
            evidence=evidence, cost=s.on_demand, monthly_savings=saving, currency=s.currency,
            wasted=saving * ctx.window.hours / HOURS_PER_MONTH if saving is not None else None)

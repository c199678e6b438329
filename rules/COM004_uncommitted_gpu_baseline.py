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
    provider, region (where the export has one), instance family and currency, hour by hour over the
    audit window. The floor is the least any HOUR cost (an hour in which the family did not run makes it
    zero): that much runs every hour, so a commitment of that size would always be used. A machine's day
    counts in the hours it ran when its billed hours fill its span (an hourly export); a day with gaps,
    or a daily export's part day, counts in none of its hours, so the floor is never more than what ran
    in its least hour. Flags a floor of at least `min_floor_per_hour`. The saving is `commit_pct` of the
    floor x 730 hours x the provider's rate in `discount_pct`, the discount of the commitment you would
    buy for `term`, as your price sheet states it on `discount_as_of` (`discount_source` says where); no
    rate is looked up. The finding states the term and the break-even: a commitment at d% off pays for
    itself if at least (100 - d)% of its hours are used. Without a rate for the provider the finding
    states the spend a commitment would cover and no saving. Unused commitments are COM001's.

    ## Why it matters
    A GPU that runs every hour at on-demand prices pays 30-60% more than the same GPU under a one- or
    three-year savings plan, reservation or committed-use discount. The floor is what can be committed
    without risk: it ran in every hour of the window. A floor taken from the least day / 24 counts a
    machine that runs only by day as if it ran all night, and overstates the saving.

    ## Example
    ```yaml
    - {id: "aws:us-east-1:p4d:USD", provider: aws, region: us-east-1, family: p4d,
       instance_types: [p4d.24xlarge], gpu_model: A100, days: 92, days_billed: 92, hours: 2208,
       hours_billed: 2208, floor_per_hour: "21.96", on_demand: "48487.68"}
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
        "min_floor_per_hour": Field("money", default=5, minimum=0,
                                    doc="least steady on-demand spend an hour (in its currency) worth a commitment"),
        "commit_pct": Field("number", default=100, minimum=0, maximum=100,
                            doc="share of the floor to commit to, percent"),
        "discount_pct": Field("map", item=Field("number", minimum=0, maximum=100), default={},
                              keys=Field("str", choices=("aws", "gcp", "azure")),
                              doc="discount of the commitment you would buy per provider (aws, gcp, azure), "
                                  "percent, from your price sheet; none: no saving stated"),
        "term": Field("duration", default="1y", doc="the term of the commitment the discount is for (1y, 3y)"),
        "discount_as_of": Field("date", doc="the date the discount rates were read"),
        "discount_source": Field("str", doc="where the discount rates come from (a pricing page, a quote)"),
    }

    def check(self, s: SteadyGpuSpend, ctx):
        if s.floor_per_hour <= 0 or s.floor_per_hour < Decimal(str(self.opt("min_floor_per_hour"))):
            return
        covered = s.floor_per_hour * Decimal(str(self.opt("commit_pct"))) / 100
        monthly = covered * HOURS_PER_MONTH
        rates = self.opt("discount_pct") or {}  # keyed by provider: the policy refuses any other key
        rate = rates.get(s.provider)
        term = self.opt("term")
        where = f"{s.family} in {s.region or 'every region'}"
        evidence = {"instance_types": s.instance_types, "gpu_model": s.gpu_model, "days": s.days,
                    "hours": s.hours, "hours_billed": s.hours_billed,
                    "floor_per_hour": str(s.floor_per_hour.quantize(Decimal("0.0001"))),
                    "floor_at": s.floor_at.isoformat() + "Z" if s.floor_at else None,
                    "floor_basis": "the least hour of on-demand spend in the window",
                    "commit_pct": str(self.opt("commit_pct")), "covered_per_month": str(money(monthly)),
                    "term": term, "on_demand": str(money(s.on_demand)), "already_committed": str(money(s.committed))}
        saving = None
        text = f"{fmt_money(money(monthly), s.currency)} a month at on-demand prices a commitment would cover"
        if rate is not None:
            saving = monthly * Decimal(str(rate)) / 100
            break_even = 100 - Decimal(str(rate))
            source = ", ".join(str(x) for x in (self.opt("discount_source"), self.opt("discount_as_of")) if x)
            evidence |= {"discount_pct": str(rate), "discount_source": self.opt("discount_source"),
                         "discount_as_of": str(self.opt("discount_as_of")) if self.opt("discount_as_of") else None,
                         "break_even_used_pct": str(break_even)}
            text += (f"; at the policy's {rate}% discount for a {term} term{f' ({source})' if source else ''} it "
                     f"saves {fmt_money(money(saving), s.currency)} a month, and breaks even if at least "
                     f"{break_even}% of its hours are used")
        yield self.finding(
            s, ctx, f"{s.provider} {where}: at least {fmt_money(s.floor_per_hour, s.currency)} of on-demand GPU "
            f"compute in every hour of {ctx.window.label}: {text}",
            evidence=evidence, cost=s.on_demand, monthly_savings=saving, currency=s.currency,
            wasted=saving * ctx.window.hours / HOURS_PER_MONTH if saving is not None else None)

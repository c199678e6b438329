from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from auditor.model import Job, Severity, fmt_money, gpus, money
from auditor.providers import mig
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class JobCostCap(Rule):
    """Job whose projected cost exceeds the per-job cap or its team's quarterly budget.

    ## What it does
    Projects a job's cost before it runs: GPUs (instances x GPUs each; a MIG slice counts as what
    its profile blocks of its GPU: its memory slices of 8 or compute slices of 7, whichever is more)
    x the catalog's on-demand price per GPU-hour (the instance type's price over its GPUs, or the
    cheapest catalog type with that GPU model)
    x its maximum runtime (`activeDeadlineSeconds`, `StoppingCondition.MaxRuntimeInSeconds`,
    `scheduling.timeout`, `limits.timeout`, or the `gpu-auditor.dev/max-runtime-hours` label where
    the platform has none); on spot, less the provider's typical spot discount. Flags the job when
    that exceeds `max_job_cost`, or `max_share_of_team_budget_pct` of its team's
    `budget_per_quarter` (team from the attribution tags). With a cap set and `require_max_runtime`
    on, a training job with no maximum runtime is flagged too: its cost has no ceiling (services
    and notebooks run until stopped, and are not).
    The gate has no spend to date, so it holds a job against the team's whole quarterly budget,
    not what is left of it. Amounts are in USD (the catalog's currency); under a policy in
    another currency the rule does not judge.

    ## Why it matters
    A typo in a node count or a missing deadline is the difference between a $2,000 fine-tune
    and a $200,000 one, and the bill arrives a month later.

    ## Example
    ```yaml
    - {id: "sagemaker:llm-pretrain", platform: sagemaker, provider: aws, instance_type: ml.p5.48xlarge,
       instance_count: 16, gpu_count: 8, max_runtime_s: 864000, tags: {team: nlp}}
    ```

    ## How to fix
    Set a maximum runtime that matches the plan, use fewer or smaller GPUs, or run on spot with
    checkpoints; for a run that really needs the money, get a waiver from the budget owner.
    """

    id = "BUD002"
    name = "job-cost-cap"
    severity = Severity.HIGH
    entity = Job
    clause = "job_budget"
    options = {
        "max_job_cost": Field("money", minimum=0, doc="projected cost one job run may reach, USD; unset: no cap"),
        "max_share_of_team_budget_pct": Field("number", default=100, minimum=0, maximum=100,
                                              doc="share of its team's quarterly budget one job may project"),
        "require_max_runtime": Field("bool", default=True,
                                     doc="with a cap set, flag a GPU training job that sets no maximum runtime"),
    }

    def check(self, job: Job, ctx):
        if ctx.policy.currency != "USD":
            return
        gpus = gpus_held(job)
        price = gpu_hour_price(ctx.catalog, job)
        if not gpus or price is None:
            return
        per_gpu_hour, basis, model = price
        name = f"{job.platform} job {job.name or job.id}"
        what = f"{_count(gpus)}x {model}"
        cap = self.opt("max_job_cost")
        evidence = {"gpus": str(gpus), "gpu_model": model, "instance_type": job.instance_type,
                    "instance_count": job.instance_count, "spot": job.spot,
                    "price_per_gpu_hour": str(per_gpu_hour.quantize(Decimal("0.0001"))), "price_basis": basis,
                    "max_runtime_s": job.max_runtime_s, "max_job_cost": str(cap) if cap is not None else None}
        if job.max_runtime_s is None:
            if cap is not None and self.opt("require_max_runtime") and job.workload not in ("inference", "notebook"):
                yield self.finding(job, ctx, f"{name} ({what}, {fmt_money(gpus * per_gpu_hour)} an hour) sets no "
                                   f"maximum runtime, so its cost has no ceiling under the per-job cap "
                                   f"{fmt_money(cap)}", evidence=evidence, key="cap")
            return
        hours = Decimal(job.max_runtime_s) / 3600
        projected = held_cost(job, per_gpu_hour, job.max_runtime_s)
        evidence |= {"hours": str(hours.quantize(Decimal("0.01"))), "projected_cost": str(money(projected))}
        how = f"{what} x {fmt_money(per_gpu_hour)}/GPU-h{' spot' if job.spot else ''} x {hours:,.1f} h"
        if cap is not None and projected > cap:
            yield self.finding(job, ctx, f"{name} projects {fmt_money(projected)} ({how}), over the per-job cap "
                               f"{fmt_money(cap)}", evidence=evidence, key="cap")
        team, _ = ctx.attribute(job.tags)
        budget = ctx.policy.teams[team].budget_per_quarter if team in ctx.policy.teams else None
        if budget:
            share = Decimal(str(self.opt("max_share_of_team_budget_pct")))
            limit = budget * share / 100
            if projected > limit:
                yield self.finding(
                    job, ctx, f"{name} projects {fmt_money(projected)} ({how}), over {share:g}% of team {team}'s "
                    f"quarterly budget {fmt_money(budget)}",
                    evidence={**evidence, "team": team, "budget_per_quarter": str(budget),
                              "max_share_of_team_budget_pct": str(share)}, key="team-budget")


def gpus_held(job: Job) -> Decimal:
    """GPUs the job holds at once: each replica type's instances x GPUs each, a MIG slice as what its profile
    blocks of its GPU (auditor/providers/mig.py)."""
    held = _held(job)
    return Decimal(held.numerator) / held.denominator


def held_cost(job: Job, per_gpu_hour: Decimal, seconds: int) -> Decimal:
    """USD of the GPUs the job holds at once, held for `seconds`: the exact product divided once, at the end, so
    that a cost of an exact half cent rounds as one (half to even); a MIG slice's 3/7 divided first would leave it
    a hair under or over."""
    exact = _held(job) * Fraction(per_gpu_hour) * Fraction(seconds, 3600)
    return Decimal(exact.numerator) / exact.denominator


def _held(job: Job) -> Fraction:
    count = Fraction(job.gpus_in_all() or 0)
    return count * mig.blocks(job.gpu_model, job.mig_profile) if job.mig_profile else count


def _count(gpus: Decimal) -> str:
    return f"{gpus:g}" if gpus == gpus.to_integral_value() else f"{gpus:.2f}"


def gpu_hour_price(catalog, job: Job) -> tuple[Decimal, str, str] | None:
    """USD per GPU-hour on demand (less the typical discount on spot), where it comes from, and the GPU model."""
    providers = [job.provider] if job.provider in catalog.prices else list(catalog.prices)
    t = next((x for p in providers if (x := catalog.instance(p, job.instance_type))), None)
    if t is not None and t.price_per_hour is not None:
        price, basis = t.price_per_hour / t.gpus, f"{t.name} on-demand / {gpus(t.gpus)} GPUs"
    else:
        same = [x for p in providers for x in catalog.instance_types(p) if x.gpu_model == job.gpu_model]
        if not same:
            return None
        t = min(same, key=lambda x: (x.price_per_hour / x.gpus, x.name))
        price, basis = t.price_per_hour / t.gpus, f"cheapest catalog {job.gpu_model} type ({t.name}) on-demand"
    if job.spot:
        if job.provider in catalog.prices:
            discount = catalog.prices[job.provider].typical_spot_discount
            price, basis = price * (1 - discount), f"{basis}, less the typical {discount:.0%} spot discount"
        else:
            basis += " (spot discount unknown without a provider)"
    return price, f"{basis}, {catalog.prices[t.provider].source}", t.gpu_model

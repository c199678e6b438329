from __future__ import annotations

from decimal import Decimal

from auditor.model import BilledGpuMachine, Severity, fmt_money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field

LEVELS = ("low", "medium", "high")


@register
class ForgottenGpuInBilling(Rule):
    """A GPU machine the bill alone shows running with nobody behind it, or missing from the inventory.

    ## What it does
    Reads every GPU machine in the billing export, inventory or not, and flags one billed on at
    least `min_billed_days_pct` percent of the window's days with billing (and at least `min_days`
    days) that shows signs nobody looks after it:
    - no owner and no team tag (the policy's `attribution` tags) on its lines;
    - no job attributed to it: no job of the inventory or manifests on its provider, account,
      region and instance type, no pod or task the provider split its cost to (AWS split cost
      allocation, FOCUS allocated charges), and none of `job_tags` on its lines;
    - billed around the clock at a flat rate: 23 hours or more on every day but its first and
      last, on `min_billed_days_pct` percent of the weekend days, its full days' cost within
      `flat_rate_tolerance_pct` percent of each other.
    With an inventory, its utilisation counts too: a machine averaging `max_mean_util_pct` or more
    is in use and not flagged; one below it has a further sign. One sign gives a low confidence,
    two medium, three or more high; a machine is flagged at `min_confidence` or above. Where an
    inventory was read and the machine is not in it, it is flagged whatever its confidence, as a
    gap: its account or region was not pulled (or it was gone by the pull). The saving is its
    billed cost as a monthly run rate over the hours it was billed.

    ## Why it matters
    The forgotten GPU is the one nobody pulled: a g5.12xlarge billed every hour of a quarter is
    $12,500 that no inventory-based rule sees when its account was not in the pull. The bill
    alone shows its hours, its tags and whether anything ran on it.

    ## Example
    ```yaml
    - {id: i-0forgotten000001, provider: aws, account: "222222222222", region: us-east-1,
       instance_type: g5.12xlarge, gpu_model: A10G, gpu_count: 4, cost: {USD: "12523.776"},
       billed_hours: 2208, billed_days: 92, data_days: 92, weekend_days: 26, data_weekend_days: 26,
       full_days: 92, full_day_cost_min: "136.128", full_day_cost_max: "136.128"}
    ```

    ## How to fix
    Find who launched it (CloudTrail, the Activity Log, Cloud Audit Logs), tag it with its owner
    and team, and stop or delete it if nobody claims it. Add the account and region to the
    inventory pull (`gpu-auditor pull --account`, `--assume-role`) so every rule sees it.
    """

    id = "GPU006"
    name = "forgotten-gpu-in-billing"
    severity = Severity.MEDIUM
    entity = BilledGpuMachine
    clause = "forgotten_in_billing"
    frees_capacity = True
    options = {
        "min_billed_days_pct": Field("number", default=90, minimum=0, maximum=100,
                                     doc="share of the window's days with billing the machine must be billed on"),
        "min_days": Field("number", default=7, minimum=1, doc="fewest days billed before a machine is judged"),
        "job_tags": Field("list", item=Field("str"), default=["job", "job-name", "job_name", "training-job"],
                          doc="tag keys whose presence on a machine's lines says a job ran on it"),
        "flat_rate_tolerance_pct": Field("number", default=5, minimum=0, maximum=100,
                                         doc="largest spread of its full days' cost, percent, still a flat rate"),
        "max_mean_util_pct": Field("number", default=10, minimum=0, maximum=100,
                                   doc="with an inventory, mean GPU utilisation at or above which it is in use"),
        "min_confidence": Field("str", default="medium", choices=LEVELS,
                                doc="least confidence (low: one sign, medium: two, high: three) to flag"),
    }

    def check(self, m: BilledGpuMachine, ctx):
        pct = Decimal(str(self.opt("min_billed_days_pct")))
        if m.billed_days < self.opt("min_days") or not m.data_days or m.billed_days * 100 < pct * m.data_days:
            return
        cost = m.cost.get(m.currency, Decimal(0))
        if m.mean_util_pct is not None and m.mean_util_pct >= self.opt("max_mean_util_pct"):
            return
        signs: list[str] = []
        team, owner = ctx.attribute(m.tags)
        if team is None and owner is None:
            signs.append("no owner or team tag")
        job_keys = {k.strip().lower() for k in self.opt("job_tags")}
        tagged_jobs = sorted(k for k in m.tags_seen if k.strip().lower() in job_keys)
        if not m.jobs_seen and not m.split_resources and not tagged_jobs:
            signs.append("no job seen on it")
        flat = self._flat(m)
        if flat:
            signs.append(flat)
        if m.mean_util_pct is not None:
            signs.append(f"{m.mean_util_pct:.1f}% mean GPU utilisation")
        confidence = LEVELS[min(len(signs), 3) - 1] if signs else None
        gap = self._gap(m)
        wanted = LEVELS.index(self.opt("min_confidence"))
        if gap is None and (confidence is None or LEVELS.index(confidence) < wanted):
            return
        reasons = signs + ([gap] if gap else [])
        gpus = f"{m.gpu_count or '?'}x {m.gpu_model or 'GPU'}"
        yield self.finding(
            m, ctx,
            f"{m.instance_type or 'GPU machine'} {m.id} ({gpus}) billed on {m.billed_days} of {m.data_days} days: "
            f"{'; '.join(reasons)}; confidence {confidence or 'low'}; {fmt_money(cost, m.currency)} billed in "
            f"{ctx.window.label}",
            evidence={"signs": signs, "inventory_gap": gap, "confidence": confidence or "low",
                      "billed_days": m.billed_days, "data_days": m.data_days,
                      "billed_hours": str(m.billed_hours) if m.billed_hours is not None else None,
                      "full_days": m.full_days, "weekend_days": m.weekend_days,
                      "data_weekend_days": m.data_weekend_days,
                      "full_day_cost_min": str(m.full_day_cost_min) if m.full_day_cost_min is not None else None,
                      "full_day_cost_max": str(m.full_day_cost_max) if m.full_day_cost_max is not None else None,
                      "tags": m.tags, "tag_keys_seen": sorted(m.tags_seen), "job_tags_seen": tagged_jobs,
                      "jobs_seen": m.jobs_seen, "split_resources": m.split_resources[:5],
                      "in_inventory": m.in_inventory if m.inventory_loaded else None,
                      "mean_util_pct": m.mean_util_pct,
                      "first_billed_at": m.first_billed_at.isoformat() if m.first_billed_at else None,
                      "last_billed_at": m.last_billed_at.isoformat() if m.last_billed_at else None,
                      "savings_basis": "billed cost as a monthly run rate over its billed hours, if nobody claims it"},
            cost=cost, monthly_savings=ctx.monthly(cost, m.billed_hours) if cost > 0 else None, currency=m.currency)

    def _flat(self, m: BilledGpuMachine) -> str | None:
        """`around the clock ...` when it ran every night and nearly every weekend at one daily cost, else None."""
        pct = Decimal(str(self.opt("min_billed_days_pct")))
        if m.full_days < self.opt("min_days") or m.full_days < m.billed_days - 2:
            return None
        if m.data_weekend_days and m.weekend_days * 100 < pct * m.data_weekend_days:
            return None
        low, high = m.full_day_cost_min, m.full_day_cost_max
        if low is None or high is None or high <= 0:
            return None
        if (high - low) * 100 > Decimal(str(self.opt("flat_rate_tolerance_pct"))) * high:
            return None
        rate = fmt_money(high, m.currency)
        if high != low:
            rate = f"{fmt_money(low, m.currency)}-{rate}"
        return f"billed around the clock, nights and {m.weekend_days} weekend days, at a flat {rate} a day"

    @staticmethod
    def _gap(m: BilledGpuMachine) -> str | None:
        if not m.inventory_loaded or m.in_inventory:
            return None
        where = f"account {m.account or '?'}, region {m.region or '?'}"
        if m.scope_pulled:
            return f"absent from the inventory, though {where} was pulled (gone before the pull?)"
        return f"absent from the inventory: {where} was not pulled"

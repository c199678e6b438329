from __future__ import annotations

from decimal import Decimal

from auditor.evidence import LEVELS, billing_tags, stewardship
from auditor.model import BilledGpuMachine, Severity, fmt_money
from auditor.registry import register
from auditor.rule import BilledDays, Rule
from auditor.schema import Field


@register
class ForgottenGpuInBilling(Rule):
    """A GPU machine the bill shows running with nobody behind it in any source, or missing from the inventory.

    ## What it does
    Reads every GPU machine in the billing export, inventory or not, billed on at least
    `min_billed_days_pct` percent of the window's days with billing (and at least `min_days` days),
    and flags one that none of the sources the audit has shows an owner or a job ("with none of"):
    - no owner, team or project tag (the policy's `attribution`) on any of its billing
      lines, nor in its inventory tags or node labels where it is in the inventory;
    - no job: none of `job_tags` or `attribution.job_tags` on its lines, no pod or task the
      provider split its cost to (AWS split cost allocation, FOCUS allocated charges), and no job of
      the inventory or manifests on its provider, account, region and instance type;
    - where the inventory has its utilisation, a mean under `max_mean_util_pct` (at or above it,
      it is in use).
    A machine with team, owner or project tags but no job tag is owned, not forgotten. The finding
    lists the sources it checked and those it lacked, and its confidence: high when the inventory
    measured its utilisation under the threshold; medium when the inventory has it without metrics,
    or the bill alone shows it billed around the clock at a flat rate (23 hours or more on every day
    but its first and last, on `min_billed_days_pct` percent of the weekend days, its full days' cost
    within `flat_rate_tolerance_pct` percent of each other); low from the bill alone otherwise. A
    finding from the bill alone says so and is never high. A machine is flagged at `min_confidence`
    or above. Where an inventory was read and the machine is not in it, it is flagged whatever its
    confidence, as a gap: its account or region was not pulled (or it was gone by the pull); an owned
    or busy machine's gap states no saving. The saving of a forgotten machine is its billed cost as a
    monthly run rate over the hours it was billed.

    ## Why it matters
    The forgotten GPU is the one nobody pulled: a g5.12xlarge billed every hour of a quarter is
    $12,500 that no inventory-based rule sees when its account was not in the pull. The bill
    alone shows its hours, its tags and whether anything ran on it; what the bill cannot show (its
    utilisation) is why a finding from the bill alone is one to check.

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
        "job_tags": Field("list", item=Field("tag"), default=["job", "job-name", "job_name", "training-job"],
                          doc="tag keys whose presence on a machine's lines says a job ran on it"),
        "flat_rate_tolerance_pct": Field("number", default=5, minimum=0, maximum=100,
                                         doc="largest spread of its full days' cost, percent, still a flat rate"),
        "max_mean_util_pct": Field("number", default=10, minimum=0, maximum=100,
                                   doc="with an inventory, mean GPU utilisation at or above which it is in use"),
        "min_confidence": Field("str", default="medium", choices=LEVELS,
                                doc="least confidence to flag (high: utilisation measured; medium: in the inventory "
                                    "without metrics, or billed around the clock; low: the bill alone)"),
    }

    def candidates(self) -> BilledDays:
        return BilledDays(Decimal(str(self.opt("min_days"))), Decimal(str(self.opt("min_billed_days_pct"))))

    def check(self, m: BilledGpuMachine, ctx):
        pct = Decimal(str(self.opt("min_billed_days_pct")))
        if m.billed_days < self.opt("min_days") or not m.data_days or m.billed_days * 100 < pct * m.data_days:
            return
        cost = m.cost.get(m.currency, Decimal(0))
        seen = stewardship(ctx, billing_tags=billing_tags(m.tags, m.tags_seen),
                           inventory_tags=m.inventory_tags if m.in_inventory else None, kind=m.kind,
                           jobs_seen=m.jobs_seen, jobs_read=m.jobs_read, split_resources=m.split_resources,
                           mean_util_pct=m.mean_util_pct if m.usage_hours else None,
                           busy_pct=self.opt("max_mean_util_pct"), job_tags=self.opt("job_tags"))
        flat = self._flat(m)
        confidence = seen.confidence(left_running=flat is not None)
        gap = self._gap(m)
        wanted = LEVELS.index(self.opt("min_confidence"))
        accused = seen.forgotten and LEVELS.index(confidence) >= wanted
        if not accused and gap is None:
            return
        if seen.forgotten:
            signs = ["no owner, team or project tag on its billing lines" +
                     (" or in the inventory" if m.in_inventory else ""), "no job seen on it"]
            signs += [flat] if flat else []
            signs += [f"{m.mean_util_pct:.1f}% mean GPU utilisation"] if seen.measured_idle else []
            signs += ["from the bill alone"] if seen.checked == ["billing"] else []
        else:
            signs = [f"{seen.owner} ({seen.owner_source})" if seen.owner else seen.busy or
                     f"{seen.job} ({seen.job_source})"]
        reasons = signs + ([gap] if gap else [])
        saving = ctx.monthly(cost, m.billed_hours) if seen.forgotten and cost > 0 else None
        gpus = f"{m.gpu_count or '?'}x {m.gpu_model or 'GPU'}"
        yield self.finding(
            m, ctx,
            f"{m.instance_type or 'GPU machine'} {m.id} ({gpus}) billed on {m.billed_days} of {m.data_days} days: "
            f"{'; '.join(reasons)}; confidence {confidence}; {fmt_money(cost, m.currency)} billed in "
            f"{ctx.window.label}",
            evidence={**seen.as_evidence(confidence), "signs": signs, "inventory_gap": gap,
                      "forgotten": seen.forgotten,
                      "billed_days": m.billed_days, "data_days": m.data_days,
                      "billed_hours": str(m.billed_hours) if m.billed_hours is not None else None,
                      "full_days": m.full_days, "weekend_days": m.weekend_days,
                      "data_weekend_days": m.data_weekend_days,
                      "full_day_cost_min": str(m.full_day_cost_min) if m.full_day_cost_min is not None else None,
                      "full_day_cost_max": str(m.full_day_cost_max) if m.full_day_cost_max is not None else None,
                      "tags": m.tags, "tag_keys_seen": sorted(m.tags_seen),
                      "jobs_seen": m.jobs_seen, "split_resources": m.split_resources[:5],
                      "in_inventory": m.in_inventory if m.inventory_loaded else None,
                      "mean_util_pct": m.mean_util_pct,
                      "first_billed_at": m.first_billed_at.isoformat() if m.first_billed_at else None,
                      "last_billed_at": m.last_billed_at.isoformat() if m.last_billed_at else None,
                      "savings_basis": "billed cost as a monthly run rate over its billed hours, if nobody claims it"
                      if saving is not None else "none: it is owned or in use; only its absence from the "
                      "inventory is reported"},
            cost=cost, monthly_savings=saving, currency=m.currency)

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

from __future__ import annotations

from decimal import Decimal

from auditor.evidence import machine_state, stewardship
from auditor.model import GpuCapacity, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class ForgottenGpuCapacity(Rule):
    """GPU capacity nobody looks after: a running machine with no owner and no job in any source.

    ## What it does
    Flags a running GPU machine of the inventory (VM, node, notebook, cluster) that has been billed
    for at least `min_days` days in the audit window, and none of the sources the audit has shows
    an owner or a job: no owner, team or project tag (the policy's `attribution`) in its inventory
    tags or node labels nor on any of its billing lines, no job tag (`attribution.job_tags`) on its
    lines, no pod or task the provider split its cost to, no job of the inventory or manifests on
    its provider, account, region and instance type, and no measured GPU utilisation at or above
    `max_mean_util_pct` (a machine in use is looked after). A machine with an owner anywhere is
    owned, and one with a job anywhere is in use: neither is forgotten (TAG001 asks for missing
    tags, GPU001 for idle ones). A stopped machine is not judged here: one that still pays for
    compute or disks is GPU007's, whoever owns it; a terminated one is nobody's. Each finding lists
    the sources it checked and those it lacked, and its confidence: high when its utilisation was
    measured and is under the threshold, medium when it has no metrics (`has never reported GPU
    utilisation` or none for `min_days` days is then one of its reasons). With `require_owner`
    false, ownership is not judged and nothing is flagged (kept so that older policies load). The
    cost is what the machine and the disks named after it were billed in the window; the saving,
    that as a monthly run rate, since the first question is whether it is needed at all.

    ## Why it matters
    A GPU machine nobody owns and nothing runs on is one nobody will notice idling: an 8x A100 node
    costs about $16,000 a month whether anyone uses it or not. Calling an owned, busy machine forgotten costs the
    audit its readers' trust, so every source is read before it is said.

    ## Example
    ```yaml
    - {id: i-0forgotten, provider: aws, instance_type: g6.xlarge, gpu_count: 1, state: running,
       tags: {Name: scratch}, billed_hours: 2208, usage_hours: 2208, mean_util_pct: 0.4,
       first_billed_at: 2026-07-01T00:00:00Z, last_billed_at: 2026-10-01T00:00:00Z,
       cost: {USD: "1776.99"}, jobs_read: true}
    ```

    ## How to fix
    Find who launched it (CloudTrail, the Activity Log, Cloud Audit Logs), tag it with its owner and
    team, and stop or delete it if nobody claims it.
    """

    id = "GPU005"
    name = "forgotten-gpu-capacity"
    severity = Severity.MEDIUM
    entity = GpuCapacity
    clause = "forgotten_capacity"
    frees_capacity = True
    options = {
        "min_days": Field("number", default=7, minimum=0,
                          doc="days a machine must be billed, or without metrics, before it counts as forgotten"),
        "require_owner": Field("bool", default=True,
                               doc="judge ownership: a running machine with no owner and no job in any source is "
                                   "forgotten (false: nothing is flagged; a stopped machine that pays is GPU007's)"),
        "max_mean_util_pct": Field("number", default=10, minimum=0, maximum=100,
                                   doc="measured mean GPU utilisation at or above which a machine is in use"),
    }

    def check(self, a: GpuCapacity, ctx):
        days = Decimal(str(self.opt("min_days")))
        if machine_state(a.state, a.provider) != "running":  # a stopped machine that still pays is GPU007's
            return
        billed = primary(a.cost)
        storage = primary(a.storage_cost)
        currency = billed[0] if billed else (storage[0] if storage else "USD")
        compute_cost = a.cost.get(currency, Decimal(0))
        storage_cost = a.storage_cost.get(currency, Decimal(0))
        billed_days = Decimal(str(a.billed_hours or 0)) / 24
        if not self.opt("require_owner") or billed_days < days or not billed or billed[1] <= 0:
            return
        seen = stewardship(ctx, billing_tags=a.billing_tags, inventory_tags=a.tags, kind=a.kind,
                           jobs_seen=a.jobs_seen, jobs_read=a.jobs_read, split_resources=a.split_resources,
                           mean_util_pct=a.mean_util_pct if a.usage_hours else None,
                           busy_pct=self.opt("max_mean_util_pct"))
        if not seen.forgotten:
            return
        reasons = ["has no owner, team or project tag in its inventory tags or on its billing lines",
                   "no job seen on it" if a.jobs_read else "no job tag or cost split on its billing lines"]
        dark = self._days_without_metrics(a)
        if dark is not None and dark >= days:
            reasons.append("has never reported GPU utilisation" if a.last_usage_at is None else
                           f"has reported no GPU utilisation for {dark:.0f} days")
        elif a.mean_util_pct is not None and a.usage_hours:
            reasons.append(f"{a.mean_util_pct:.1f}% mean GPU utilisation")
        confidence = seen.confidence()
        monthly = ctx.monthly(compute_cost, a.billed_hours) + ctx.monthly(storage_cost)
        basis = "billed cost as a monthly run rate, if nobody claims it"
        evidence = seen.as_evidence(confidence)
        total = compute_cost + storage_cost
        gpus = f"{a.gpu_count or '?'}x {a.gpu_model or 'GPU'}"
        yield self.finding(
            a, ctx,
            f"{a.instance_type or a.kind} {a.name or a.id} ({gpus}) {'; '.join(reasons)}; confidence {confidence}; "
            f"{fmt_money(total, currency)} billed in {ctx.window.label}",
            evidence={**evidence, "state": a.state, "kind": a.kind, "reasons": reasons,
                      "billed_hours": a.billed_hours,
                      "first_billed_at": a.first_billed_at.isoformat() if a.first_billed_at else None,
                      "last_billed_at": a.last_billed_at.isoformat() if a.last_billed_at else None,
                      "last_usage_at": a.last_usage_at.isoformat() if a.last_usage_at else None,
                      "storage_resources": a.storage_resources, "jobs_seen": a.jobs_seen,
                      "min_days": self.opt("min_days"), "savings_basis": basis},
            cost=total, monthly_savings=monthly if monthly > 0 else None, currency=currency)

    @staticmethod
    def _days_without_metrics(a: GpuCapacity) -> Decimal | None:
        """Days the machine was billed with no utilisation data: all of them, or those after its last sample."""
        if a.last_usage_at is None:
            return None if a.usage_hours else Decimal(str(a.billed_hours or 0)) / 24
        if a.last_billed_at is None:
            return None
        return Decimal(str(max((a.last_billed_at - a.last_usage_at).total_seconds(), 0) / 86400))

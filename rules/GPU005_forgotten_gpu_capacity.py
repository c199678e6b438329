from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from auditor.model import GpuCapacity, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field

STOPPED = ("stop", "dealloc", "suspend", "hibernat")  # stopped, stopping, deallocated, suspended, hibernated
GONE = ("terminat", "delet")


@register
class ForgottenGpuCapacity(Rule):
    """GPU capacity nobody looks after: running without an owner, metrics or jobs, or stopped and still billed.

    ## What it does
    Flags a GPU machine (VM, node, notebook, cluster) that has been billed for at least `min_days`
    days in the audit window and
    - has no owner tag (the policy's `attribution.owner_tags`; off with `require_owner` false), or
    - has had no utilisation data for `min_days` days while it was billed (none at all, or none
      since its metrics stopped), or
    - is a node or cluster on whose provider, account, region and instance type no job ran, or
    - is stopped (stopped, deallocated, suspended) and still pays: for compute billed up to the
      end of the billing (an Azure VM stopped but not deallocated, a reservation or capacity
      block), or for the disks named after it (Azure and GCP name a machine's disks after it).
    The cost is what the machine and its disks were billed in the window. The saving, for a stopped
    machine, is what it still pays as a monthly run rate; for a running one nobody can vouch for,
    its billed cost as a monthly run rate, since the first question is whether it is needed at all.

    ## Why it matters
    A GPU machine without an owner or metrics is one nobody will notice idling: an 8x A100 node
    costs about $16,000 a month whether anyone uses it or not. Stopping a VM does not stop its
    disks or its reservation from billing.

    ## Example
    ```yaml
    - {id: i-0nometrics, provider: aws, instance_type: g6.xlarge, gpu_count: 1, state: running,
       tags: {team: nlp, owner: kenji@example.com}, billed_hours: 2208,
       first_billed_at: 2026-07-01T00:00:00Z, last_billed_at: 2026-10-01T00:00:00Z,
       cost: {USD: "1776.99"}}
    ```

    ## How to fix
    Find the owner, tag the machine, and install the metrics agent (CloudWatch agent, DCGM exporter,
    Azure Monitor); stop or delete what nobody claims. Delete or snapshot the disks of a stopped
    machine, and deallocate (not just stop) an Azure VM.
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
        "require_owner": Field("bool", default=True, doc="a running GPU machine without an owner tag is forgotten"),
    }

    def check(self, a: GpuCapacity, ctx):
        days = Decimal(str(self.opt("min_days")))
        state = (a.state or "running").lower()
        if any(s in state for s in GONE):
            return
        billed = primary(a.cost)
        storage = primary(a.storage_cost)
        currency = billed[0] if billed else (storage[0] if storage else "USD")
        compute_cost = a.cost.get(currency, Decimal(0))
        storage_cost = a.storage_cost.get(currency, Decimal(0))
        reasons: list[str] = []
        if any(s in state for s in STOPPED):
            still_billed = a.last_billed_at is not None and self._end(a, ctx) - a.last_billed_at <= timedelta(days=1)
            if still_billed:
                reasons.append(f"is {state} but its compute is still billed to the end of the billing")
            if storage_cost > 0:
                disks = ", ".join(r.rsplit("/", 1)[-1] for r in a.storage_resources[:3])
                reasons.append(f"is {state} but its disks ({disks}) still bill")
            if not reasons:
                return
            monthly = ctx.monthly(storage_cost) + (ctx.monthly(compute_cost, a.billed_hours) if still_billed else 0)
            basis = "what it still pays (disks, and compute billed while stopped) as a monthly run rate"
        else:
            billed_days = Decimal(str(a.billed_hours or 0)) / 24
            if billed_days < days or not billed or billed[1] <= 0:
                return
            _, owner = ctx.attribute(a.tags)
            if owner is None and self.opt("require_owner"):
                reasons.append("has no owner tag")
            dark = self._days_without_metrics(a)
            if dark is not None and dark >= days:
                reasons.append("has never reported GPU utilisation" if a.last_usage_at is None else
                               f"has reported no GPU utilisation for {dark:.0f} days")
            if a.kind in ("node", "cluster") and a.jobs_seen == 0:
                reasons.append("ran no job")
            if not reasons:
                return
            monthly = ctx.monthly(compute_cost, a.billed_hours) + ctx.monthly(storage_cost)
            basis = "billed cost as a monthly run rate, if nobody claims it"
        total = compute_cost + storage_cost
        gpus = f"{a.gpu_count or '?'}x {a.gpu_model or 'GPU'}"
        yield self.finding(
            a, ctx,
            f"{a.instance_type or a.kind} {a.name or a.id} ({gpus}) {'; '.join(reasons)}; "
            f"{fmt_money(total, currency)} billed in {ctx.window.label}",
            evidence={"state": a.state, "kind": a.kind, "reasons": reasons,
                      "billed_hours": a.billed_hours,
                      "first_billed_at": a.first_billed_at.isoformat() if a.first_billed_at else None,
                      "last_billed_at": a.last_billed_at.isoformat() if a.last_billed_at else None,
                      "last_usage_at": a.last_usage_at.isoformat() if a.last_usage_at else None,
                      "storage_resources": a.storage_resources, "jobs_seen": a.jobs_seen,
                      "min_days": self.opt("min_days"), "savings_basis": basis},
            cost=total, monthly_savings=monthly if monthly > 0 else None, currency=currency)

    @staticmethod
    def _end(a: GpuCapacity, ctx):
        return min(a.data_end or ctx.window.end, ctx.window.end)

    @staticmethod
    def _days_without_metrics(a: GpuCapacity) -> Decimal | None:
        """Days the machine was billed with no utilisation data: all of them, or those after its last sample."""
        if a.last_usage_at is None:
            return None if a.usage_hours else Decimal(str(a.billed_hours or 0)) / 24
        if a.last_billed_at is None:
            return None
        return Decimal(str(max((a.last_billed_at - a.last_usage_at).total_seconds(), 0) / 86400))

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from auditor.evidence import STOPPED, machine_state
from auditor.model import GpuCapacity, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class StoppedGpuStillBilled(Rule):
    """A stopped GPU machine that still pays: compute billed while stopped, or its disks billing on.

    ## What it does
    Flags a GPU machine of the inventory (VM, node, notebook, cluster) whose state is stopped
    (stopped, stopping, deallocated, suspended, hibernated; GCP's TERMINATED, the state of a stopped
    instance whose disks remain), whoever owns it, that still pays:
    - for compute billed up to the end of the billing (its last compute line ends within a day of the
      end of the billing: an Azure VM stopped but not deallocated, a reservation or capacity block),
      flagged however long ago it stopped; or
    - for the disks named after it (Azure and GCP name a machine's disks after it), once its compute
      has not been billed for at least `min_stopped_days` days before the end of the billing (a
      machine with no compute line in the window has been stopped all of it), or at once while its
      compute still bills: one parked for a few days may be started again.
    What it still pays (the disks, and the compute billed while stopped) as a monthly run rate must
    reach `min_monthly_cost` (in the policy's currency: an amount in another is converted at the
    policy's rates, and without a rate not judged). A terminated or deleted machine is not judged.
    Being stopped is a fact of the inventory and the bill: confidence high. The owner is not judged here (a machine with
    no owner anywhere that runs is GPU005's); the finding names the machine's state, what still
    bills and for how many days its compute has been stopped. The cost is what the machine and its
    disks were billed in the window; the saving is what it still pays, as a monthly run rate.

    ## Why it matters
    Stopping a VM does not stop its disks or its reservation from billing: a parked A100 VM with a
    premium data disk pays about $120 a month for nothing, every month, until someone deletes or
    snapshots the disk. An Azure VM stopped from inside the guest, not deallocated, is billed for
    its GPUs in full.

    ## Example
    ```yaml
    - {id: vm-parked, provider: azure, instance_type: Standard_NC24ads_A100_v4, gpu_model: A100-80GB,
       gpu_count: 1, state: deallocated, tags: {owner: kenji@example.com},
       last_billed_at: 2026-06-30T00:00:00Z, storage_cost: {USD: "371.61"},
       storage_resources: [/subscriptions/0000/resourcegroups/rg/providers/microsoft.compute/disks/vm-parked-data]}
    ```

    ## How to fix
    Delete the disks of a machine that will not run again, or snapshot them to cheaper storage and
    delete them; release the reservation or capacity block it holds. Deallocate (not just stop) an
    Azure VM: stopped from inside the guest, it is billed as if it ran.
    """

    id = "GPU007"
    name = "stopped-gpu-still-billed"
    severity = Severity.MEDIUM
    entity = GpuCapacity
    clause = "stopped_capacity"
    frees_capacity = True
    options = {
        "min_stopped_days": Field("number", default=7, minimum=0,
                                  doc="days a machine's compute must have been unbilled before the disks it still "
                                      "pays for count (compute billed while stopped counts at once)"),
        "min_monthly_cost": Field("money", default=1, minimum=0,
                                  doc="what a stopped machine still pays a month, at least, to be flagged"),
    }

    def check(self, a: GpuCapacity, ctx):
        if a.state is None or machine_state(a.state, a.provider) != "stopped":
            return
        state = a.state.lower() if any(w in a.state.lower() for w in STOPPED) else f"stopped ({a.state})"
        billed, stored = primary(a.cost), primary(a.storage_cost)
        currency = billed[0] if billed else (stored[0] if stored else "USD")
        compute_cost = a.cost.get(currency, Decimal(0))
        storage_cost = a.storage_cost.get(currency, Decimal(0))
        end = min(a.data_end or ctx.window.end, ctx.window.end)
        stopped_since = a.last_billed_at or ctx.window.start
        stopped_days = Decimal(str(max((end - stopped_since).total_seconds(), 0) / 86400))
        compute_billed = a.last_billed_at is not None and end - a.last_billed_at <= timedelta(days=1)
        disks_count = storage_cost > 0 and (compute_billed or
                                            stopped_days >= Decimal(str(self.opt("min_stopped_days"))))
        reasons: list[str] = []
        monthly = Decimal(0)
        if compute_billed and compute_cost > 0:
            reasons.append(f"is {state} but its compute is still billed to the end of the billing")
            monthly += ctx.monthly(compute_cost, a.billed_hours)
        if disks_count:
            disks = ", ".join(r.rsplit("/", 1)[-1] for r in a.storage_resources[:3])
            reasons.append(f"is {state} but its disks ({disks}) still bill"
                           + ("" if compute_billed else f", {int(stopped_days)} days after its compute stopped"))
            monthly += ctx.monthly(storage_cost)
        if not reasons or self.short_of(monthly, currency, "min_monthly_cost", ctx):
            return
        total = compute_cost + storage_cost
        gpus = f"{a.gpu_count or '?'}x {a.gpu_model or 'GPU'}"
        yield self.finding(
            a, ctx,
            f"{a.instance_type or a.kind} {a.name or a.id} ({gpus}) {'; '.join(reasons)}; confidence high; "
            f"{fmt_money(total, currency)} billed in {ctx.window.label}",
            evidence={"confidence": "high", "sources_checked": ["billing", "inventory"], "sources_lacked": [],
                      "bill_alone": False, "state": a.state, "kind": a.kind, "reasons": reasons,
                      "stopped_days": None if compute_billed else f"{stopped_days:.1f}",
                      "compute_billed_while_stopped": compute_billed, "billed_hours": a.billed_hours,
                      "last_billed_at": a.last_billed_at.isoformat() if a.last_billed_at else None,
                      "storage_resources": a.storage_resources,
                      "savings_basis": "what it still pays (disks, and compute billed while stopped) as a monthly "
                                       "run rate"},
            cost=total, monthly_savings=monthly, currency=currency)

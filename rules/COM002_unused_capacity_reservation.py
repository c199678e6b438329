from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from auditor.model import CapacityReservation, Severity, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class UnusedCapacityReservation(Rule):
    """Reserved GPU capacity paid for hours that ran nothing.

    ## What it does
    Reads the capacity reservation lines of the billing: FOCUS `CapacityReservationId` and
    `CapacityReservationStatus` (`Used`, `Unused`); the AWS CUR's On-Demand Capacity Reservations
    and Capacity Blocks for ML (CUR 2.0's `capacity_reservation_*` columns, or the reservation's ARN
    as the resource id with its unused hours billed as `UnusedBox:<type>`); GCP reservations (the
    `compute.googleapis.com/is_unused_reservation` system label); Azure capacity reservations
    (their unused instances billed to the reservation's own resource id). Per reservation, the
    unused cost is what the reserved hours nothing ran in cost in the audit window. Flags a
    reservation whose unused share of its cost exceeds `max_unused_pct` and whose unused cost
    reaches `min_unused_cost`; with `gpu_only` (the default), only reservations of GPU instance
    types. The owner is the team and owner tags of the reservation itself. The saving is the
    unused cost as a monthly run rate, for a reservation still billed at the end of the billing.

    ## Why it matters
    A capacity reservation is paid at the on-demand rate whether an instance runs in it or not: a
    p4d.24xlarge reserved and left empty costs $786 a day. Reservations are made for a launch or a
    training run and outlive it; nobody sees them in an inventory of running machines.

    ## Example
    ```yaml
    - {id: "arn:aws:ec2:us-east-1:222222222222:capacity-reservation/cr-0a1000000000000001",
       provider: aws, account: "222222222222", kind: On-Demand Capacity Reservation,
       instance_type: p4d.24xlarge, gpu_model: A100, gpu_count: 8, unused: "23596.272",
       unused_hours: 720, first_seen: 2026-07-01T00:00:00Z, last_seen: 2026-07-31T00:00:00Z,
       data_end: 2026-10-01T00:00:00Z, tags: {team: research}}
    ```

    ## How to fix
    Cancel the reservation (or lower its instance count) once the launch it was made for is done;
    make it open rather than targeted so matching instances use it; end a Capacity Block's work
    early only if the block is shared with other jobs. Reserve for measured peaks, not for hopes.
    """

    id = "COM002"
    name = "unused-capacity-reservation"
    severity = Severity.HIGH
    entity = CapacityReservation
    clause = "capacity_reservations"
    options = {
        "max_unused_pct": Field("number", default=10, minimum=0, maximum=100,
                                doc="largest unused share of a capacity reservation's cost, percent"),
        "min_unused_cost": Field("money", default=50, minimum=0,
                                 doc="unused cost in the window below which a reservation is not flagged"),
        "gpu_only": Field("bool", default=True, doc="judge only reservations of GPU instance types"),
    }

    def check(self, r: CapacityReservation, ctx):
        if self.opt("gpu_only") and not r.gpu_model:
            return
        paid = r.used + r.unused
        if r.unused <= 0 or paid <= 0:
            return
        share = r.unused / paid * 100
        if share <= Decimal(str(self.opt("max_unused_pct"))) or \
                self.short_of(r.unused, r.currency, "min_unused_cost", ctx):
            return
        gpu_hours = r.unused_hours * r.gpu_count if r.gpu_count else None
        hours = f"{r.unused_hours:,.0f} reserved instance-hours" + (f" ({gpu_hours:,.0f} GPU-hours)" if gpu_hours
                                                                     else "")
        covers = f" for {r.instance_type}" if r.instance_type else ""
        gpus = f" ({r.gpu_count}x {r.gpu_model})" if r.gpu_count and r.gpu_model else ""
        # Still billed at the end of the billing: the waste goes on; else it ended, and there is nothing to save.
        ongoing = r.last_seen is not None and r.data_end is not None and r.data_end - r.last_seen <= timedelta(days=1)
        span = None
        if r.first_seen and r.last_seen and r.last_seen > r.first_seen:
            span = Decimal(str((r.last_seen - r.first_seen).total_seconds() / 3600))
        yield self.finding(
            r, ctx,
            f"{r.kind or 'capacity reservation'} {r.id.rsplit('/', 1)[-1]}{covers}{gpus}: {hours} ran nothing, "
            f"{fmt_money(r.unused, r.currency)} ({share:.0f}% of its cost) in {ctx.window.label}"
            + ("" if ongoing else f"; last billed {r.last_seen:%Y-%m-%d}" if r.last_seen else ""),
            evidence={"kind": r.kind, "instance_type": r.instance_type, "gpu_model": r.gpu_model,
                      "gpu_count": r.gpu_count, "used": str(money(r.used)), "unused": str(money(r.unused)),
                      "unused_pct": str(round(share, 1)), "used_hours": str(r.used_hours),
                      "unused_hours": str(r.unused_hours),
                      "unused_gpu_hours": str(gpu_hours) if gpu_hours is not None else None,
                      "first_seen": r.first_seen.isoformat() if r.first_seen else None,
                      "last_seen": r.last_seen.isoformat() if r.last_seen else None, "still_billed": ongoing,
                      "savings_basis": "unused cost as a monthly run rate over the hours it was billed, while it is "
                                       "still billed"},
            cost=r.unused, monthly_savings=ctx.monthly(r.unused, span) if ongoing else None, currency=r.currency)

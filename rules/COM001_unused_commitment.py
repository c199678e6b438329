from __future__ import annotations

from decimal import Decimal

from auditor.model import Commitment, Severity, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class UnusedCommitment(Rule):
    """Reserved or committed capacity paid for and left unused.

    ## What it does
    Reads the commitment lines of the billing: FOCUS `CommitmentDiscountStatus` (`Used`, `Unused`),
    the AWS CUR's reservation and savings plan fees (the unused part of an `RIFee` or
    `SavingsPlanRecurringFee` line, as its amortised cost) and Azure's `UnusedReservation` charges.
    Per commitment, the unused cost is the amortised cost of the capacity nobody used in the audit
    window, and its unused share is that over its whole amortised cost in the window (used + unused);
    amortised throughout, never the billed fee lines (an All Upfront reservation is billed nothing in
    the window, a partial upfront one only its recurring part). Flags a commitment whose unused share
    exceeds `max_unused_pct` and whose unused cost reaches `min_unused_cost`; with `gpu_only` (the
    default), only commitments for GPU instance types. The saving is the unused cost as a monthly run rate.

    ## Why it matters
    A reservation is paid every hour whether anything runs on it or not. An unused one-year
    reservation for one A100 VM wastes about $1,600 a month, and GPU reservations cannot be
    cancelled, only exchanged or sold.

    ## Example
    ```yaml
    - {id: /providers/microsoft.capacity/reservationorders/1111/reservations/2222, provider: azure,
       kind: Reservation, instance_type: Standard_NC24ads_A100_v4, gpu_model: A100-80GB,
       used: "0", unused: "3229.00"}
    ```

    ## How to fix
    Move matching workloads onto the reservation (right region, instance family and scope; shared
    scope rather than one subscription), exchange it for the type you run (Azure, AWS convertible
    RIs), or sell it on the Reserved Instance Marketplace; buy the next one for a measured baseline.
    """

    id = "COM001"
    name = "unused-commitment"
    severity = Severity.HIGH
    entity = Commitment
    clause = "commitments"
    options = {
        "max_unused_pct": Field("number", default=10, minimum=0, maximum=100,
                                doc="largest unused share of a commitment's cost, percent"),
        "min_unused_cost": Field("money", default=50, minimum=0,
                                 doc="unused cost in the window below which a commitment is not flagged"),
        "gpu_only": Field("bool", default=True, doc="judge only commitments for GPU instance types"),
    }

    def check(self, c: Commitment, ctx):
        if self.opt("gpu_only") and not c.gpu_model:
            return
        paid = c.used + c.unused
        if c.unused <= 0 or paid <= 0:
            return
        share = c.unused / paid * 100
        if share <= Decimal(str(self.opt("max_unused_pct"))) or \
                self.short_of(c.unused, c.currency, "min_unused_cost", ctx):
            return
        span = None
        if c.first_seen and c.last_seen and c.last_seen > c.first_seen:
            span = Decimal(str((c.last_seen - c.first_seen).total_seconds() / 3600))
        covers = c.instance_type or c.gpu_model
        what = f"{c.kind or 'commitment'} for {covers}" if covers else (c.kind or "commitment")
        # the export's own commitment quantity (FOCUS CommitmentDiscountQuantity, in CommitmentDiscountUnit)
        quantity = f", {c.unused_quantity:,.0f} {c.quantity_unit} of it" if c.unused_quantity and c.quantity_unit \
            else ""
        contract = f"; contract {', '.join(c.contracts)}" if c.contracts else ""
        yield self.finding(
            c, ctx,
            f"{what} {c.name or c.id.rsplit('/', 1)[-1]}: {share:.0f}% unused in {ctx.window.label}, "
            f"{fmt_money(c.unused, c.currency)} paid for capacity nothing ran on{quantity} "
            f"(used {fmt_money(c.used, c.currency)}){contract}",
            evidence={"kind": c.kind, "instance_type": c.instance_type, "gpu_model": c.gpu_model,
                      "used": str(money(c.used)), "unused": str(money(c.unused)), "unused_pct": str(round(share, 1)),
                      "used_quantity": str(c.used_quantity) if c.used_quantity is not None else None,
                      "unused_quantity": str(c.unused_quantity) if c.unused_quantity is not None else None,
                      "quantity_unit": c.quantity_unit, "contracts": c.contracts,
                      "first_seen": c.first_seen.isoformat() if c.first_seen else None,
                      "last_seen": c.last_seen.isoformat() if c.last_seen else None,
                      "savings_basis": "unused amortised cost as a monthly run rate over the hours it was billed"},
            cost=c.unused, monthly_savings=ctx.monthly(c.unused, span), currency=c.currency)

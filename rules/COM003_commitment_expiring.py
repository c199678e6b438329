from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from auditor.model import Commitment, Severity, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class CommitmentExpiring(Rule):
    """A GPU reservation or savings plan that ends soon, with the spend it covers.

    ## What it does
    Reads the commitments of the billing with the end of their term (the AWS CUR's `reservation/EndTime`
    and `savingsPlan/EndTime`; FOCUS, Azure and GCP exports do not carry it, so their commitments are not
    judged). Flags a commitment that ends from the end of the audit window (included) to `within_days`
    days after it (excluded: the next quarter by default) and covered at least `min_covered_per_month`
    of usage a month in the window (its used, amortised cost over the hours from its first line's start
    to its last line's end, scaled to 730 hours): when it
    ends, that usage is billed at on-demand prices. With `gpu_only` (the default), only commitments for
    GPU instance types. The finding states what the commitment covered (its used, amortised cost) as a
    monthly run rate; it states no saving, since renewing keeps the price as it is.

    ## Why it matters
    A reservation that lapses unnoticed turns a steady GPU bill into an on-demand one overnight, often
    30-60% higher, and GPU capacity for a new reservation may not be there when it is needed.

    ## Example
    ```yaml
    - {id: "arn:aws:ec2:us-east-1:111122223333:reserved-instances/p4d-1", provider: aws, kind: Reservation,
       instance_type: p4d.24xlarge, gpu_model: A100, used: "48487.68", unused: "0",
       first_seen: 2026-07-01T00:00:00Z, last_seen: 2026-10-01T00:00:00Z, ends: 2026-11-15T00:00:00Z}
    ```

    ## How to fix
    Decide before it ends: renew or replace it (an AWS savings plan can be queued to start when the old
    one ends), sized from COM004's steady floor rather than from the old term, or plan the move of that
    usage to spot or another commitment.
    """

    id = "COM003"
    name = "commitment-expiring"
    severity = Severity.MEDIUM
    entity = Commitment
    clause = "commitment_renewal"
    options = {
        "within_days": Field("int", default=92, minimum=1, doc="days after the audit window to look ahead"),
        "min_covered_per_month": Field("money", default=100, minimum=0,
                                       doc="usage a month a commitment must cover to be listed"),
        "gpu_only": Field("bool", default=True, doc="judge only commitments for GPU instance types"),
    }

    def check(self, c: Commitment, ctx):
        if c.ends is None or (self.opt("gpu_only") and not c.gpu_model):
            return
        end = ctx.window.end
        if not end <= c.ends < end + timedelta(days=self.opt("within_days")):
            return
        span = None
        if c.first_seen and c.last_seen and c.last_seen > c.first_seen:
            span = Decimal(str((c.last_seen - c.first_seen).total_seconds() / 3600))
        monthly = ctx.monthly(c.used, span)
        if c.used <= 0 or self.short_of(monthly, c.currency, "min_covered_per_month", ctx):
            return
        covers = c.instance_type or c.gpu_model
        what = f"{c.kind or 'commitment'} for {covers}" if covers else (c.kind or "commitment")
        days = (c.ends - end).days
        yield self.finding(
            c, ctx,
            f"{what} {c.name or c.id.rsplit('/', 1)[-1]} ends on {c.ends.date().isoformat()}, {days} days after "
            f"{ctx.window.label}: it covered {fmt_money(c.used, c.currency)} of usage in the window "
            f"({fmt_money(money(monthly), c.currency)} a month), billed on demand once it ends",
            evidence={"kind": c.kind, "instance_type": c.instance_type, "gpu_model": c.gpu_model,
                      "ends": c.ends.isoformat(), "days_after_window": days, "used": str(money(c.used)),
                      "covered_per_month": str(money(monthly))},
            cost=c.used, currency=c.currency)

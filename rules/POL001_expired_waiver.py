from __future__ import annotations

from auditor.model import Severity, WaiverStatus, fmt_money, money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class ExpiredWaiver(Rule):
    """Waiver in the policy past its expiry date: it no longer waives, and someone must renew or drop it.

    ## What it does
    Flags each waiver of the policy whose `expires` date is before the audit's as-of date (today,
    or `--as-of`) by more than `grace_days` days. An expired waiver waives nothing: the findings it
    named are open again, and this finding says how many and what they cost in the audit window.
    It points at the waiver's line in the policy file.

    ## Why it matters
    A waiver is a decision with a reason and an owner, made for a while. Once it lapses, the
    exception is either still needed (and should be renewed, with a fresh reason) or it is not
    (and the waste it excused is back on the team's bill).

    ## Example
    ```yaml
    - {id: "waiver:GPU001:i-0a1f3c5e7b9d24680", rule: GPU001, resource: i-0a1f3c5e7b9d24680,
       reason: kept warm for a launch, owner: lead-vision@example.com, expires: 2026-08-31,
       as_of: 2026-10-15, status: expired, matched: 1, matched_cost: {USD: "121528.32"}}
    ```

    ## How to fix
    Renew the waiver with a new `expires` date and a current reason, or delete it and act on the
    findings it covered.
    """

    id = "POL001"
    name = "expired-waiver"
    severity = Severity.LOW
    entity = WaiverStatus
    clause = "waiver_expiry"
    options = {
        "grace_days": Field("int", default=0, minimum=0, doc="days past expiry before the waiver is reported"),
    }
    policy_keys = ("waivers[].expires", "waivers[].rule", "waivers[].resource", "waivers[].owner")

    def check(self, w: WaiverStatus, ctx):
        if w.expires is None or w.as_of is None:
            return
        days = (w.as_of - w.expires).days
        if days <= self.opt("grace_days"):
            return
        billed = primary(w.matched_cost)
        currency, cost = billed if billed else ("USD", None)
        named = (f"; the {w.matched} finding(s) it named are open again ({fmt_money(cost, currency)} billed in "
                 f"{ctx.window.label})" if w.matched and cost is not None else
                 f"; the {w.matched} finding(s) it named are open again" if w.matched else
                 "; it matches no finding now")
        yield self.finding(
            w, ctx,
            f"waiver for {w.rule} on {w.resource} (owner {w.owner}) expired on {w.expires.isoformat()}, "
            f"{days} day(s) before {w.as_of.isoformat()}; it no longer waives{named}",
            evidence={"rule": w.rule, "resource": w.resource, "reason": w.reason, "owner": w.owner,
                      "expires": w.expires.isoformat(), "as_of": w.as_of.isoformat(), "days_expired": days,
                      "matched": w.matched, "matched_cost": str(money(cost)) if cost is not None else None,
                      "line": w.source_line},
            currency=currency)  # no cost of its own: the findings it named carry theirs

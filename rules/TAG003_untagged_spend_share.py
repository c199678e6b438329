from __future__ import annotations

from decimal import Decimal

from auditor.model import Severity, UnattributedSpend, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class UntaggedSpendShare(Rule):
    """Share of GPU spend that no team owns, above the policy's target.

    ## What it does
    Sums the spend in the audit window that cannot be attributed to a team (no team tag, and no
    project tag that the policy maps to a team: the same attribution as the report's team view),
    per currency, and flags it when it is more than `max_unattributed_pct` of the total. `scope`
    chooses what is measured: `gpu` (GPU compute lines, the default) or `all` (every line but tax,
    which is no team's to own and is left out of both sides). Spend under `min_cost` is not worth a
    finding. The finding names the largest unowned resources.

    ## Why it matters
    Spend that lands on no team's budget is spend nobody is asked to cut. FinOps practice aims at
    attributing 95% or more; every point below that is money that escapes every review.

    ## Example
    ```yaml
    - {id: "org:gpu:USD", scope: gpu, currency: USD, total: "260748.65", unattributed: "20107.78",
       top_resources: [[i-0e5a7c9b1d3f57924, "1126.05"]]}
    ```

    ## How to fix
    Tag the named resources (and the templates that create them) with a team tag, or map their
    project tag to a team under `teams.<team>.projects`; activate the tags as cost-allocation
    tags in the billing console so the export carries them.
    """

    id = "TAG003"
    name = "untagged-spend-share"
    severity = Severity.MEDIUM
    entity = UnattributedSpend
    clause = "attribution_target"
    options = {
        "max_unattributed_pct": Field("number", default=5, minimum=0, maximum=100,
                                      doc="largest share of the spend that may belong to no team, percent"),
        "scope": Field("str", default="gpu", choices=("gpu", "all"),
                       doc="gpu: GPU compute spend; all: every billing line but tax"),
        "min_cost": Field("money", default=100, minimum=0, doc="unattributed spend below this is not flagged"),
    }
    policy_keys = ("attribution.team_tags", "attribution.project_tags", "teams.<team>.projects")

    def check(self, s: UnattributedSpend, ctx):
        if s.scope != self.opt("scope") or s.total <= 0:
            return
        share = s.unattributed / s.total * 100
        limit = Decimal(str(self.opt("max_unattributed_pct")))
        if share <= limit or self.short_of(s.unattributed, s.currency, "min_cost", ctx):
            return
        what = "GPU compute spend" if s.scope == "gpu" else "spend"
        top = ", ".join(f"{r.rsplit('/', 1)[-1]} ({fmt_money(c, s.currency)})" for r, c in s.top_resources[:3])
        yield self.finding(
            s, ctx,
            f"{share:.1f}% of {what} in {ctx.window.label} ({fmt_money(s.unattributed, s.currency)} of "
            f"{fmt_money(s.total, s.currency)}) belongs to no team; the policy's target is at most {limit:g}%"
            + (f"; largest: {top}" if top else ""),
            evidence={"scope": s.scope, "share_pct": str(round(share, 2)), "target_pct": str(limit),
                      "unattributed": str(money(s.unattributed)), "total": str(money(s.total)), "lines": s.lines,
                      "top_resources": [[r, str(money(c))] for r, c in s.top_resources]},
            cost=s.unattributed, currency=s.currency, key=s.currency)

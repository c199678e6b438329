from __future__ import annotations

from decimal import Decimal

from auditor.model import Severity, TeamSpend, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class TeamOverBudget(Rule):
    """Team over its quarterly budget, or on course to be by the quarter's end, in dollars or GPU-hours.

    ## What it does
    For each team in the policy with a `budget_per_quarter` (dollars, in the policy's currency) or
    a `gpu_hours_per_quarter`, takes what the billing charged the team in the quarter so far (by
    the same team attribution as the report: team tag, else project tag mapped to a team; spend in
    another currency converted at the policy's `rates`, or without one left out and listed in the
    evidence as `left_out`; tax is no team's) and a
    linear forecast to the quarter's end: spend to date x quarter hours / hours billed so far.
    Flags a team whose spend is over budget, or whose forecast reaches `forecast_alert_pct` of it
    once at least `min_elapsed_pct` of the quarter is billed (a forecast from a few days is noise).
    The cost is the overrun so far, or the forecast overrun, in dollars (GPU-hours over budget at the
    team's own average price of a GPU-hour, an estimate); the evidence says which.

    ## Why it matters
    A budget read at the quarter's end is a post-mortem. A linear run rate halfway through the
    quarter says whether the team has to cut now, while cutting still helps.

    ## Example
    ```yaml
    - {id: nlp, team: nlp, lead: lead-nlp@example.com, budget: "60000", spent: "64078.74",
       gpu_hours: "4000", quarter: 2026-Q3, quarter_start: 2026-07-01T00:00:00Z,
       quarter_end: 2026-10-01T00:00:00Z, data_end: 2026-10-01T00:00:00Z}
    ```

    ## How to fix
    Act on the team's open findings first (they carry the savings), then raise the budget in the
    policy if the work needs it, or move work to the next quarter.
    """

    id = "BUD001"
    name = "team-over-budget"
    severity = Severity.HIGH
    entity = TeamSpend
    clause = "budget"
    options = {
        "forecast_alert_pct": Field("number", default=100, minimum=1, maximum=1000,
                                    doc="forecast share of the budget that raises a finding"),
        "min_elapsed_pct": Field("number", default=25, minimum=0, maximum=100,
                                 doc="share of the quarter billed before a forecast is judged"),
    }
    policy_keys = ("teams.<team>.budget_per_quarter", "teams.<team>.gpu_hours_per_quarter", "currency",
                   "attribution.team_tags", "attribution.project_tags", "teams.<team>.projects")

    def check(self, t: TeamSpend, ctx):
        if t.budget is None and t.gpu_hours_budget is None:
            return
        if t.quarter_start is None or t.quarter_end is None or t.data_end is None:
            return
        quarter_h = Decimal(str((t.quarter_end - t.quarter_start).total_seconds() / 3600))
        elapsed_h = Decimal(str(max((t.data_end - t.quarter_start).total_seconds(), 0) / 3600))
        if not elapsed_h or not quarter_h:
            return
        elapsed_pct = elapsed_h / quarter_h * 100
        scale = quarter_h / elapsed_h
        alert = Decimal(str(self.opt("forecast_alert_pct"))) / 100
        over: list[str] = []
        forecast_over: list[str] = []
        evidence: dict = {"quarter": t.quarter, "elapsed_pct": str(round(elapsed_pct, 1)),
                          "data_end": t.data_end.isoformat()}
        if t.left_out:  # spend in a currency the policy gives no rate for: not in `spent`
            evidence["left_out"] = {cur: str(money(amount)) for cur, amount in sorted(t.left_out.items())}
        cost = None
        if t.budget is not None:
            forecast = t.spent * scale
            evidence.update(budget=str(money(t.budget)), spent=str(money(t.spent)), forecast=str(money(forecast)),
                            gpu_spent=str(money(t.gpu_spent)))
            text = (f"{fmt_money(t.spent, t.currency)} spent of {fmt_money(t.budget, t.currency)} "
                    f"({self._pct(t.spent, t.budget)}), forecast {fmt_money(forecast, t.currency)} by the "
                    f"end of {t.quarter}")
            if t.spent > t.budget:
                over.append(text)
                cost = t.spent - t.budget
            elif elapsed_pct >= self.opt("min_elapsed_pct") and forecast >= t.budget * alert:
                forecast_over.append(text)
                cost = max(forecast - t.budget, Decimal(0))
        if t.gpu_hours_budget is not None:
            forecast_h = t.gpu_hours * scale
            # hours over budget in dollars, at the team's own average price of a GPU-hour (an estimate)
            per_hour = t.gpu_spent / t.gpu_hours if t.gpu_hours else Decimal(0)
            evidence.update(gpu_hours_budget=str(t.gpu_hours_budget), gpu_hours=str(round(t.gpu_hours, 1)),
                            gpu_hours_forecast=str(round(forecast_h, 1)))
            text = (f"{t.gpu_hours:,.0f} GPU-hours used of {t.gpu_hours_budget:,.0f} "
                    f"({self._pct(t.gpu_hours, t.gpu_hours_budget)}), forecast {forecast_h:,.0f}")
            bucket: list[str] | None = None  # over or forecast_over; None: neither
            extra = Decimal(0)  # the GPU-hours over budget (or forecast over), where bucket is set
            if t.gpu_hours > t.gpu_hours_budget:
                bucket, extra = over, t.gpu_hours - t.gpu_hours_budget
            elif elapsed_pct >= self.opt("min_elapsed_pct") and forecast_h >= t.gpu_hours_budget * alert:
                bucket, extra = forecast_over, max(forecast_h - t.gpu_hours_budget, Decimal(0))
            if bucket is not None:
                if per_hour:
                    text += f", about {fmt_money(extra * per_hour, t.currency)} at {fmt_money(per_hour, t.currency)} " \
                            "a GPU-hour"
                    evidence["gpu_hours_overrun_cost"] = str(money(extra * per_hour))
                    cost = max(cost or Decimal(0), extra * per_hour)
                bucket.append(text)
        if not over and not forecast_over:
            return
        state = "is over its budget" if over else "is on course to exceed its budget"
        evidence["state"] = "over" if over else "forecast over"
        yield self.finding(t, ctx, f"team {t.team} {state}: {'; '.join(over + forecast_over)}",
                           evidence=evidence, cost=cost, currency=t.currency, key=t.quarter)

    @staticmethod
    def _pct(part: Decimal, whole: Decimal) -> str:
        return f"{part / whole * 100:.0f}%" if whole else "no budget"

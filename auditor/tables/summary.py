"""The audit's summary: spend and its breakdowns, team budgets, the GPU fleet, coverage and the forecast, each
computed once from the tables and the findings."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from auditor.context import Context
from auditor.figures import savings_total, sum_money
from auditor.model import Finding, GpuAsset, Severity
from auditor.policy import Policy
from auditor.tables import breakdown, fleet, split, stats
from auditor.tables.entities import build
from auditor.tables.sql import tag_sql, team_sql
from auditor.tables.store import Store
from auditor.window import Window


def summarize(store: Store, policy: Policy, window: Window, findings: list[Finding]) -> dict[str, Any]:
    figures = stats.window_stats(store.con, window)
    active = [f for f in findings if not f.waived]
    savings = savings_total(active)
    team_key, project_key = team_sql(policy), tag_sql(policy.project_tags)
    per_team = breakdown.team_spend(store, window, team_key, project_key)
    assets = build(store, window, policy, GpuAsset)
    machines = fleet.machines(assets, findings, policy.currency, Context(store.catalog, policy, window).attribute)
    util = fleet.utilisation(store, window, {a.id: a.gpu_count for a in assets}, {m["id"]: m["team"] for m in machines})
    for team, bands in util.items():  # a team may have machines with metrics and no billing lines in the window
        per_team.setdefault(team, {"by_category": {}, "by_provider": {}, "by_project": {},
                                   "gpu_hours_by_pricing": {p: "0.0" for p in breakdown.PRICING},
                                   "by_model": {}})["utilisation"] = bands
    coverage = breakdown.coverage(store, window)
    jobs = store.con.execute("SELECT count(*) FROM jobs").fetchone()[0]
    if not assets and not jobs:
        coverage["missing"].append("no GPU inventory: the idle, rightsizing and spot checks had nothing to read")
    unmeasured = sum(1 for a in assets if a.mean_util_pct is None)
    if unmeasured:
        coverage["missing"].append(f"{unmeasured} GPU machine{'s' if unmeasured > 1 else ''} without utilisation "
                                   "metrics in the window: idle and rightsizing could not judge them")
    by_severity = {s.label: sum(1 for f in active if f.severity == s) for s in reversed(Severity)}
    by_team = stats.spend_by(store.con, window, team_sql(policy))
    # Where the export carries the provider's own split of shared nodes, team spend follows it (tables/split.py).
    allocation = split.provider_split(store, window, team_sql(policy))
    if allocation:
        split.apply(by_team, allocation["moves"])
    budgets = {}
    for name, team in policy.teams.items():
        spent = by_team.get(name, {}).get(policy.currency, Decimal(0))
        budgets[name] = {"lead": team.lead, "budget": team.budget_per_quarter, "spent": spent,
                         "share_of_budget": (round(float(spent / team.budget_per_quarter) * 100, 1)
                                             if team.budget_per_quarter else None)}
    return {
        **figures,
        "by_team": by_team,
        "teams": budgets,
        "findings": {"total": len(active), "waived": len(findings) - len(active), "by_severity": by_severity},
        "monthly_savings": savings,
        "quarterly_savings": {cur: amount * 3 for cur, amount in savings.items()},  # 3 months of 730 hours
        "findings_cost": sum_money(active, "cost"),
        "breakdown": breakdown.spend_breakdown(store, window, policy.currency, team_key, project_key),
        "gpu_hours_by_pricing": breakdown.gpu_hours_by_pricing(per_team),
        "team_spend": per_team,
        "fleet": {"by_model": breakdown.gpu_by_model(per_team), "utilisation": fleet.total_bands(util),
                  "machines": machines[:fleet.MACHINES], "machines_total": len(machines)},
        "forecast": breakdown.forecast(store, window, team_key, savings),
        "previous_window": breakdown.previous_spend(store, window),
        "coverage": coverage,
        "allocation": allocation,
    }

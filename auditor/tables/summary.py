"""The audit's summary: spend and its breakdowns, team budgets, the GPU fleet, coverage and the forecast, each
computed once from the tables and the findings.

Every breakdown is rounded here, once, so that its parts add up to the total as shown (largest remainder,
figures.apportion): categories, providers and the org's breakdowns to the total; a team's categories, providers
and projects to the team's spend; GPU compute columns to the GPU compute shown above them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from auditor.audit_model import Summary
from auditor.context import Context
from auditor.figures import action_totals, action_totals_by, apportion_amounts, sum_money
from auditor.model import UNATTRIBUTED, Finding, GpuAsset, GpuSlice, NodeGpuAllocation, Severity, TeamSpend, money
from auditor.policy import Policy
from auditor.tables import breakdown, fleet, shared_gpus, split, stats, weekly
from auditor.tables.entities import build
from auditor.tables.sql import spend_team_sql, tag_sql, team_sql
from auditor.tables.store import Store
from auditor.window import Window

READS = (GpuAsset, TeamSpend, NodeGpuAllocation, GpuSlice)  # the entity types `summarize` builds (or reuses)


def summarize(store: Store, policy: Policy, window: Window, findings: list[Finding],
              acts: list[dict[str, Any]]) -> Summary:
    """`acts`: the open findings' actions (figures.actions), whose savings are the headline."""
    figures = stats.window_stats(store.con, window)
    active = [f for f in findings if not f.waived]
    savings = action_totals(acts, "saving")
    team_key, project_key = spend_team_sql(policy), tag_sql(policy.project_tags)
    per_team = breakdown.team_spend(store, window, team_key, project_key)
    assets = build(store, window, policy, GpuAsset)
    ctx = Context(store.catalog, policy, window)
    machines = fleet.machines(assets, findings, policy.currency, ctx.attribute)
    util = fleet.utilisation(store, window, {a.id: a.gpu_count for a in assets}, {m["id"]: m["team"] for m in machines})
    for team, bands in util.items():  # a team may have machines with metrics and no billing lines in the window
        per_team.setdefault(team, {"by_category": {}, "by_provider": {}, "by_project": {}, "gpu_by_provider": {},
                                   "gpu_by_project": {},
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
    by_team = breakdown.spend_by_team(store, window, team_key, project_key)
    # Where the export carries the provider's own split of shared nodes, team spend follows it (tables/split.py).
    allocation = split.provider_split(store, window, team_sql(policy))
    if allocation:
        split.apply(by_team, allocation["moves"])
    budgets = {t.team: {"lead": t.lead, "quarter": t.quarter, "budget": t.budget, "spent": t.spent,
                        "share_of_budget": _pct(t.spent, t.budget), "left_out": t.left_out,
                        "gpu_hours": breakdown.hours_text(t.gpu_hours),
                        "gpu_hours_budget": None if t.gpu_hours_budget is None else str(t.gpu_hours_budget),
                        "gpu_hours_share": _pct(t.gpu_hours, t.gpu_hours_budget)}
               for t in build(store, window, policy, TeamSpend)}  # the figures BUD001 judges
    out: Summary = {
        **figures,
        "by_team": by_team,
        "teams": budgets,
        "findings": {"total": len(active), "waived": len(findings) - len(active), "by_severity": by_severity},
        "monthly_savings": savings,
        "quarterly_savings": breakdown.over_next(window, savings),  # the forecast's: the next window's hours
        "savings_to_check": action_totals(acts, "to_check"),
        "wasted": action_totals(acts, "wasted"),
        "actions": acts,
        "savings_by_team": action_totals_by(acts, "saving", lambda a: a["team"] or UNATTRIBUTED),
        "findings_cost": sum_money(active, "cost"),
        "breakdown": breakdown.spend_breakdown(store, window, policy.currency, team_key, project_key),
        "gpu_hours_by_pricing": breakdown.gpu_hours_by_pricing(per_team),
        "team_spend": per_team,
        "fleet": {"by_model": breakdown.gpu_by_model(per_team), "utilisation": fleet.total_bands(util),
                  "machines": machines[:fleet.MACHINES], "machines_total": len(machines)},
        "forecast": breakdown.forecast(store, window, team_key, savings),
        "baseline_left_out": sorted(store.freed),  # machines to stop or shrink: no commitment sized on them
        "previous_window": breakdown.previous_spend(store, window),
        "coverage": coverage,
        "kubernetes_gpus": shared_gpus.summary(build(store, window, policy, NodeGpuAllocation),
                                               build(store, window, policy, GpuSlice),
                                               lambda tags: ctx.attribute(tags)[0]),
        "allocation": allocation,
        "weekly": weekly.weekly(store, window, team_key, project_key, figures["gpu_cost"],
                                {a.id: a.gpu_count for a in assets}, {m["id"]: m["team"] for m in machines}),
        "sparklines": weekly.sparklines(store, window, acts),
    }
    _round_breakdowns(out)
    return out


def _pct(part: Decimal, whole: Decimal | None) -> float | None:
    return round(float(part / whole) * 100, 1) if whole else None


def _round_breakdowns(s: Summary) -> None:
    """Round every breakdown once, so that its parts add up to the figure it breaks down as that is shown."""
    total = {c: money(v) for c, v in s["billed_cost"].items()}
    gpu = {"gpu_compute": {c: money(v) for c, v in s["gpu_cost"].items()}}
    s["by_category"] = apportion_amounts(s["by_category"], total, gpu)
    s["by_provider"] = apportion_amounts(s["by_provider"], total)
    s["by_team"] = apportion_amounts(s["by_team"], total)
    for items in s["breakdown"].values():
        for field in ("billed_cost", "gpu_cost"):
            shares = apportion_amounts({i["key"]: i[field] for i in items}, s[field])
            for i in items:
                i[field] = shares[i["key"]]
    team_gpu = {i["key"]: i["gpu_cost"] for i in s["breakdown"]["team"] if not i.get("rest")}
    for team, detail in s["team_spend"].items():
        spent = s["by_team"].get(team, {})
        # the team's GPU compute is the one the org's "by team" table shows for it
        cats = detail["by_category"]
        pinned = {"gpu_compute": team_gpu[team]} if team in team_gpu and "gpu_compute" in cats else None
        detail["by_category"] = apportion_amounts(cats, spent, pinned)
        gpu_of_team = detail["by_category"].get("gpu_compute", {})
        for part in ("by_provider", "by_project"):
            detail[part] = apportion_amounts(detail[part], spent)
            detail["gpu_" + part] = apportion_amounts(detail["gpu_" + part], gpu_of_team)
        models = apportion_amounts({m: v["billed_cost"] for m, v in detail["by_model"].items()}, gpu_of_team)
        for m, v in detail["by_model"].items():
            v["billed_cost"] = models[m]
    models = apportion_amounts({m["model"]: m["billed_cost"] for m in s["fleet"]["by_model"]}, s["gpu_cost"])
    for m in s["fleet"]["by_model"]:
        m["billed_cost"] = models[m["model"]]

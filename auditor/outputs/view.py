"""The view-model every report template renders: `build_view` turns the audit.json dict, as every output shows it
(`audit_doc`: secrets masked as the policy says), into the rows, bars and sections of the HTML and Markdown reports
and the e-mails, for the whole audit or one team; `shown_findings` is what a view lists of one rule's findings."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict, cast

from auditor.audit_model import Amount, AuditDoc, CoverageMonth, Hours, PerCurrency, Summary, Tool, WindowText
from auditor.evidence import HOW_JUDGED
from auditor.figures import TOP_ACTIONS, finding_team
from auditor.model import HOURS_PER_MONTH, UNATTRIBUTED
from auditor.outputs import anomalies, charts
from auditor.outputs.evidence_text import evidence_items, value_text
from auditor.outputs.jobs import jobs_view
from auditor.secret_patterns import mask_deep

if TYPE_CHECKING:
    from auditor.audit import Audit


EXPIRING_DAYS = 30  # a waiver that ends within this many days of the as-of date is listed as expiring


class _Shown(dict):
    """An audit document made ready to show (masked as the policy says): the formats of one run mask it once."""


def fmt_num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{float(value):,.{digits}f}"


def audit_doc(audit: Audit | AuditDoc | dict[str, Any]) -> AuditDoc:
    """The JSON-able audit, as every output shows it: an Audit's to_dict(), or a dict read back from
    audit.json, with secrets masked (secret_patterns.py) unless the policy said `mask_secrets: false` (then
    recorded in audit.json's policy section, so `gpu-auditor report` keeps to it)."""
    if isinstance(audit, _Shown):
        return _shown(audit)
    if not isinstance(audit, dict):
        masked = getattr(audit.policy, "mask_secrets", True)
        doc = audit.to_dict(masked=masked)  # masked as it is encoded: one walk
        if not masked:
            doc["policy"]["mask_secrets"] = False
        return _shown(_Shown(doc))
    if (audit.get("policy") or {}).get("mask_secrets", True) is False:
        return _shown(_Shown(audit))
    return _shown(_Shown(mask_deep(audit)))


def _shown(doc: _Shown) -> AuditDoc:
    """The shown audit as the AuditDoc it holds: an Audit's to_dict(), or an audit.json that read_audit checked
    against audit.schema.json (a dict a test builds is taken as one)."""
    return cast(AuditDoc, doc)


CATEGORIES = {"gpu_compute": "GPU compute", "other_compute": "Other compute", "storage": "Storage",
              "transfer": "Data transfer", "tax": "Tax", "other": "Other"}
DIMENSIONS = {"provider": "provider", "account": "account", "region": "region", "team": "team",
              "project": "project"}
PRICING = {"on_demand": "On-demand", "spot": "Spot", "committed": "Committed (reserved, savings plans)"}
BANDS = charts.BAND_LABELS
SAVINGS_DEFINITION = ("Savings found: what acting on the open findings would save a month (730 hours) from now on: "
                      "one action per resource, with its largest saving, counted once; only for what still runs "
                      "at the window's end (billed in its last day, or running in the inventory) and only where "
                      "the finding's confidence is high (the rest: to check). A quarter is the next quarter's "
                      "hours of them, as in the forecast. Wasted: what the window spent on the waste found, "
                      "whether or not it still runs.")
MACHINES_SHOWN = 25


def _d(value: Any) -> Decimal:
    return Decimal(str(value)) if value not in (None, "") else Decimal(0)


def team_of(f: dict[str, Any]) -> str:
    return f.get("team") or UNATTRIBUTED


def _bar(part: Any, total: Any) -> int:
    """A bar's width in percent of the largest (or the total): whole numbers, at least 1 for anything above 0."""
    part, total = _d(part), _d(total)
    if total <= 0 or part <= 0:
        return 0
    return max(1, min(100, int(part * 100 / total)))


def _share(part: Any, total: Any) -> float | None:
    part, total = _d(part), _d(total)
    return round(float(part * 100 / total), 1) if total > 0 else None


def _add(into: dict[str, Decimal], amounts: PerCurrency | None) -> dict[str, Decimal]:
    for cur, amount in (amounts or {}).items():
        into[cur] = into.get(cur, Decimal(0)) + _d(amount)
    return into


def _savings(findings: list[dict[str, Any]]) -> dict[str, Decimal]:
    """Monthly savings per currency of some open findings, as the audit counted them: the savings not marked
    `counted_under` another finding (figures.mark_overlaps)."""
    return _money_sum([f for f in findings if not f.get("counted_under")], "monthly_savings")


def _team_savings(s: Summary, team: str, findings: list[dict[str, Any]]) -> PerCurrency:
    """A team's savings as the audit counted them (summary.savings_by_team); summed from its findings for an
    audit.json written before the summary had them."""
    return s["savings_by_team"].get(team, {}) if "savings_by_team" in s else _savings(findings)


def _rule_savings(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """A rule's open findings' savings: those it counts, and those another rule counts on the same resource
    ({rule: {currency: amount}}), so that the rules' savings add up to the total without counting one twice;
    and those to check (confidence below high), which the total leaves out."""
    counted: dict[str, Decimal] = {}
    to_check: dict[str, Decimal] = {}
    overlaps: dict[str, dict[str, Decimal]] = {}
    for f in findings:
        if f.get("monthly_savings") is None:
            continue
        into = (overlaps.setdefault(f["counted_under"], {}) if f.get("counted_under")
                else counted if f.get("confidence", "high") == "high" else to_check)
        into[f["currency"]] = into.get(f["currency"], Decimal(0)) + _d(f["monthly_savings"])
    return {"savings": counted, "overlaps": overlaps, "to_check": to_check}


def _left_out(machines: list[str]) -> str:
    """What the commitment baseline left out (summary.baseline_left_out), said where the forecast is."""
    if not machines:
        return ""
    shown = ", ".join(machines[:5]) + (f" and {len(machines) - 5} more" if len(machines) > 5 else "")
    return (f" Commitments (COM004) are sized without the {len(machines)} machine{'s' if len(machines) > 1 else ''}"
            f" that findings say to stop or shrink ({shown}): no commitment is advised on them.")


def _old_actions(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The actions of an audit.json written before the summary had them: per resource, the finding that counts
    its saving (not `counted_under` another), largest saving first; every saving counted as the headline did."""
    by_resource: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in findings:
        by_resource.setdefault((f["resource"], f["currency"]), []).append(f)
    out = []
    for group in by_resource.values():
        take = next((f for f in group if f.get("monthly_savings") is not None and not f.get("counted_under")),
                    group[0])
        out.append({**take, "saving": take.get("monthly_savings"), "to_check": None, "wasted": None,
                    "reasons": group})
    return sorted(out, key=lambda a: (-_d(a["saving"]), -_d(a.get("cost")), a["resource"]))


def actions_view(s: Summary, team: str | tuple[str, ...] | None) -> dict[str, Any]:
    """The audit's actions (summary.actions: one per resource, ranked), for the organisation or one team (or
    several): the first TOP_ACTIONS ready to show, and the totals of them all, whose savings are the headline."""
    teams = (team,) if isinstance(team, str) else team
    acts = [a for a in s.get("actions", []) if teams is None or (a.get("team") or UNATTRIBUTED) in teams]
    top = [{**a, "team_label": a.get("team") or UNATTRIBUTED, "spark": charts.sparkline(s, a["resource"]),
            "also": [r for r in a["reasons"] if r["rule"] != a["rule"]]} for a in acts[:TOP_ACTIONS]]
    rest = acts[TOP_ACTIONS:]
    return {"top": top, "count": len(acts), "rest": len(rest), "rest_saving": _money_sum(rest, "saving"),
            "rest_to_check": _money_sum(rest, "to_check"), "saving": _money_sum(acts, "saving"),
            "to_check": _money_sum(acts, "to_check"), "wasted": _money_sum(acts, "wasted")}


def _resource_cost(findings: list[dict[str, Any]]) -> dict[str, Decimal]:
    """The cost in the window of the resources the findings are on, each resource once (two findings on one
    machine are one machine's cost), per currency."""
    most: dict[tuple[str, str], Decimal] = {}
    for f in findings:
        if f.get("cost") is not None:
            key = (f["resource"], f["currency"])
            most[key] = max(most.get(key, Decimal(0)), _d(f["cost"]))
    out: dict[str, Decimal] = {}
    for (_, cur), amount in most.items():
        out[cur] = out.get(cur, Decimal(0)) + amount
    return out


def _money_sum(findings: list[dict[str, Any]], key: str) -> dict[str, Decimal]:
    # The amounts gathered per currency, then summed in their order: a call and a zero less per finding (a rule
    # can have a hundred thousand).
    amounts: dict[str, list[Any]] = {}
    for f in findings:
        if (v := f.get(key)) is not None:
            amounts.setdefault(f["currency"], []).append(v)
    return {cur: sum(map(_d, values), Decimal(0)) for cur, values in amounts.items()}


SHOWN_PER_RULE = 50  # findings of one rule listed in the HTML, Markdown and e-mail; the rest summed up


def _rank(f: dict[str, Any]) -> tuple[Any, ...]:
    """The order findings are shown in: open first, then the largest saving, the largest cost."""
    return f.get("waived", False), -_d(f.get("monthly_savings")), -_d(f.get("cost")), f["resource"]


def shown_findings(findings: list[dict[str, Any]], limit: int = SHOWN_PER_RULE, ranked: bool = False
                   ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """A rule's findings for display: all of them if there are at most `limit`, else the `limit` worth the most
    (saving, then cost; `ranked`: they are in that order already) and the rest summed: how many (and how many
    waived), their cost and saving, and per team, most first. findings.csv and audit.json keep every finding."""
    if len(findings) <= limit:
        return findings, None
    order = findings if ranked else sorted(findings, key=_rank)
    rest = order[limit:]
    teams: dict[str, list[dict[str, Any]]] = {}
    for f in rest:
        teams.setdefault(team_of(f), []).append(f)
    per_team: list[Row] = [{"team": t, "count": len(fs), "cost": _money_sum(fs, "cost")} for t, fs in teams.items()]
    per_team.sort(key=lambda t: (-t["count"], t["team"]))
    return order[:limit], {"count": len(rest), "waived": sum(1 for f in rest if f.get("waived")),
                            "cost": _money_sum(rest, "cost"), "savings": _savings(rest), "teams": per_team}


def _changes(change: dict[str, Any] | None) -> list[dict[str, Any]]:
    """trend.py's per-currency change as rows: previous, current, the difference and percent."""
    if not change:
        return []
    return [{"currency": cur, "previous": change["previous"].get(cur), "current": change["current"].get(cur),
             "delta": _d(delta), "pct": change["change_pct"].get(cur)} for cur, delta in change["change"].items()]


def _finding(f: dict[str, Any]) -> dict[str, Any]:
    return {**f, "team_label": team_of(f), "counted_under": None if f["waived"] else f.get("counted_under"),
            "evidence_items": evidence_items(f.get("evidence"), f.get("currency"))}


def _rows(items: dict[str, dict[str, Any]], cur: str, total: Any = None) -> list[dict[str, Any]]:
    """{key: {currency: amount}} as rows, largest first in `cur`, with a bar against the total (or the largest)."""
    rows: list[Row] = [{"key": k, "amounts": v} for k, v in items.items()]
    rows.sort(key=lambda r: (-_d(r["amounts"].get(cur)), str(r["key"])))
    top = total if total is not None else max((_d(r["amounts"].get(cur)) for r in rows), default=0)
    for r in rows:
        r["bar"] = _bar(r["amounts"].get(cur), top)
        r["pct"] = _share(r["amounts"].get(cur), total) if total is not None else None
    return rows


def _hours_rows(hours: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    total = sum((_d(h) for h in hours.values()), Decimal(0))
    return [{"key": k, "label": labels.get(k, k), "hours": hours.get(k, "0.0"), "bar": _bar(hours.get(k), total),
             "pct": _share(hours.get(k), total)} for k in labels if k in hours]


def _window_text(start: str | None, end: str | None) -> str:
    if not start or not end:
        return ""
    return f"{start[:10]} to {end[:10]}"


# ---- the view, section by section: each builder makes the names of one part of the report ----------------------

Row = dict[str, Any]  # one row of a table the templates loop over


@dataclass(frozen=True)
class Scope:
    """What every section of one view starts from: the shown audit, the team (None: the organisation), and the
    findings and spend in scope."""
    doc: AuditDoc
    s: Summary
    team: str | None
    cur: str
    every: list[Row]  # the audit's own finding dicts in scope; those shown are made ready to show (_finding)
    open_: list[Row]
    team_spend: Mapping[str, Any]  # TeamDetail, {} for the organisation (and what an older audit.json lacks)
    spend: PerCurrency
    gpu: PerCurrency
    savings: PerCurrency
    as_of: date

    @property
    def total(self) -> Amount | None:
        return self.spend.get(self.cur)


def _scope(audit: Audit | AuditDoc | dict[str, Any], team: str | None) -> Scope:
    doc = audit_doc(audit)
    s = doc["summary"]
    every = [f for f in doc["findings"] if team is None or team_of(f) == team]
    open_ = [f for f in every if not f["waived"]]
    team_spend: Mapping[str, Any] = (s.get("team_spend") or {}).get(team, {}) if team else {}
    if team is None:
        spend, gpu, savings = s["billed_cost"], s["gpu_cost"], s["monthly_savings"]
    else:
        spend = (s.get("by_team") or {}).get(team, {})
        gpu, savings = team_spend.get("by_category", {}).get("gpu_compute", {}), _team_savings(s, team, open_)
    return Scope(doc, s, team, doc["policy"].get("currency") or "USD", every, open_, team_spend, spend, gpu, savings,
                 date.fromisoformat(doc.get("as_of") or doc["generated_at"][:10]))


class HeadView(TypedDict):
    doc: AuditDoc
    team: str | None
    cur: str
    policy: dict[str, Any]
    window: WindowText
    window_text: str
    generated_at: str
    as_of: str
    tool: Tool
    partial: bool
    team_lead: str | None
    spend: PerCurrency
    gpu: PerCurrency
    gpu_share: float | None
    effective: PerCurrency | None
    rows: int | None
    savings_definition: str
    savings: PerCurrency
    savings_quarter: PerCurrency
    findings_count: dict[str, Any]


def _head(c: Scope) -> HeadView:
    """The title block and the headline figures: spend, GPU compute, savings a month and a quarter, findings."""
    doc, s, team = c.doc, c.s, c.team
    fc = s.get("forecast")
    budget = (s.get("teams") or {}).get(team) if team else None
    quarter_hours = _d(fc["next"]["hours"]) if fc else 3 * HOURS_PER_MONTH
    return {
        "doc": doc, "team": team, "cur": c.cur, "policy": doc["policy"], "window": doc["window"],
        "window_text": _window_text(doc["window"]["start"], doc["window"]["end"]),
        "generated_at": doc["generated_at"][:16].replace("T", " ") + " UTC", "as_of": c.as_of.isoformat(),
        "tool": doc.get("tool") or {}, "partial": doc.get("partial", False),
        "team_lead": budget.get("lead") if budget else None,
        "spend": c.spend, "gpu": c.gpu, "gpu_share": _share(c.gpu.get(c.cur), c.total),
        "effective": s.get("effective_cost", {}) if team is None else None, "rows": s.get("rows"),
        "savings_definition": SAVINGS_DEFINITION, "savings": c.savings,
        "savings_quarter": (s.get("quarterly_savings") if team is None else None)
        or {k: _d(v) * quarter_hours / HOURS_PER_MONTH for k, v in c.savings.items()},
        "findings_count": {"open": len(c.open_), "waived": len(c.every) - len(c.open_),
                           "by_severity": {sev: sum(1 for f in c.open_ if f["severity"] == sev)
                                           for sev in ("critical", "high", "medium", "low", "info")}},
    }


class ComplianceView(TypedDict):
    compliance: dict[str, int]
    clauses: list[Row]


def _compliance(c: Scope) -> ComplianceView:
    """The policy, clause by clause: a clause is broken where any of its rules has open findings (for a team: the
    team's), disabled where all its rules are, else met."""
    open_by_rule: dict[str, list[Row]] = {}
    for f in c.open_:
        open_by_rule.setdefault(f["rule"], []).append(f)
    groups: dict[str, Row] = {}
    for cl in c.doc.get("clauses", []):
        g = groups.setdefault(cl["clause"], {"clause": cl["clause"], "rules": [], "texts": [], "options_text": [],
                                             "in_policy": cl.get("in_policy", True), "states": []})
        g["rules"].append({"rule": cl["rule"], "name": cl["name"]})
        if cl["text"] not in g["texts"]:
            g["texts"].append(cl["text"])
        g["options_text"] += [(k, value_text(k, v, c.cur)) for k, v in (cl.get("options") or {}).items()
                              if k not in dict(g["options_text"])]
        g["states"].append(cl["status"] if cl["status"] in ("disabled", "not checked") else
                           "broken" if cl["rule"] in open_by_rule else "met")
    for g in groups.values():
        mine = [f for r in dict.fromkeys(r["rule"] for r in g["rules"]) for f in open_by_rule.get(r, [])]
        state = next(st for st in ("broken", "met", "not checked", "disabled") if st in g["states"])
        g.update(status=state + (" (defaults)" if state in ("met", "broken") and not g["in_policy"] else ""),
                 text=" ".join(g["texts"]), findings=len(mine), savings=_savings(mine),
                 rule=", ".join(r["rule"] for r in g["rules"]))
    clauses = list(groups.values())
    return {"compliance": {k.replace(" ", "_"): sum(1 for cl in clauses if cl["status"].startswith(k))
                           for k in ("met", "broken", "not checked", "disabled")},
            "clauses": clauses}


class SpendView(TypedDict):
    categories: list[Row]
    breakdowns: dict[str, list[Row]]
    pricing: list[Row]
    gpu_hours: Hours | None
    transfer_gb_out: dict[str, str]


def _spend(c: Scope) -> SpendView:
    """Where the money went: by category, by each breakdown dimension (a team's: provider and project), and the
    GPU-hours by pricing."""
    s, team, cur, total = c.s, c.team, c.cur, c.total
    by_category = s.get("by_category", {}) if team is None else c.team_spend.get("by_category", {})
    categories: dict[str, dict[str, Decimal]] = {}
    for key, amounts in by_category.items():
        label = CATEGORIES.get(key if key not in ("None", "") else "other", key)
        categories[label] = _add(categories.get(label, {}), amounts)
    order = list(CATEGORIES.values())
    category_rows = sorted(_rows(categories, cur, total),
                           key=lambda r: order.index(r["key"]) if r["key"] in order else len(order))
    if team is None:
        breakdowns = {dim: [{**item, "amounts": item["billed_cost"],
                             "bar": _bar(item["billed_cost"].get(cur), total),
                             "pct": _share(item["billed_cost"].get(cur), total)}
                            for item in (s.get("breakdown") or {}).get(dim, [])] for dim in DIMENSIONS}
        pricing = s.get("gpu_hours_by_pricing") or {}
    else:
        breakdowns = {dim: [{"key": r["key"], "amounts": r["amounts"], "billed_cost": r["amounts"],
                             "gpu_cost": (c.team_spend.get(f"gpu_by_{dim}") or {}).get(r["key"], {}),
                             "bar": r["bar"], "pct": r["pct"]}
                            for r in _rows(c.team_spend.get(f"by_{dim}", {}), cur, total)]
                      for dim in ("provider", "project")}
        pricing = c.team_spend.get("gpu_hours_by_pricing") or {}
    return {"categories": category_rows, "breakdowns": breakdowns, "pricing": _hours_rows(pricing, PRICING),
            "gpu_hours": s.get("gpu_hours") if team is None else None,
            "transfer_gb_out": s.get("transfer_gb_out", {}) if team is None else {}}


class BudgetsView(TypedDict):
    budgets: list[Row]
    budget_hours: bool
    budget_quarter: str | None
    budget_left_out: list[Row]


def _budgets(c: Scope) -> BudgetsView:
    """The teams' budgets: for the organisation every team of the policy, with or without spend; for a team its
    own. The shares are those the budget rule judged (summary.teams), quarter to date."""
    s, cur = c.s, c.cur
    teams = s.get("teams") or {}
    if c.team is None:
        per_team = {**{t: {} for t in teams}, **(s.get("by_team") or {})}
    else:
        per_team = {c.team: c.spend}
    budgets = []
    for t, spent in per_team.items():
        b: Mapping[str, Any] = teams.get(t) or {}
        hours = b.get("gpu_hours")
        if hours is None and t in (s.get("team_spend") or {}):  # an audit.json from before summary.teams had it
            hours = sum((_d(h) for h in s["team_spend"][t].get("gpu_hours_by_pricing", {}).values()), Decimal(0))
        row: Row = {"team": t, "lead": b.get("lead"), "spent": spent, "budget": b.get("budget"),
               "used_pct": b.get("share_of_budget", _share(spent.get(cur), b.get("budget"))
                                 if b.get("budget") else None),
               "gpu_hours": hours, "gpu_hours_budget": b.get("gpu_hours_budget"),
               "gpu_hours_pct": b.get("gpu_hours_share", _share(hours, b.get("gpu_hours_budget"))
                                      if b.get("gpu_hours_budget") else None),
               "left_out": b.get("left_out") or {}}
        # the bar shows the unit furthest into its budget: the one a budget finding speaks of
        worst = max((p for p in (row["used_pct"], row["gpu_hours_pct"]) if p is not None), default=None)
        row.update(worst_pct=worst, bar=min(100, max(1, int(worst))) if worst else 0)
        budgets.append(row)
    budgets.sort(key=lambda r: (-_d(r["spent"].get(cur)), r["team"]))
    return {"budgets": budgets, "budget_hours": any(r["gpu_hours_budget"] is not None for r in budgets),
            "budget_quarter": next((b["quarter"] for b in teams.values() if b.get("quarter")), None),
            "budget_left_out": [b for b in budgets if b["left_out"]]}


class FleetView(TypedDict):
    models: list[Row]
    bands: list[Row]
    machines: list[Row]
    machines_total: int
    idle_oversized: list[Row]
    idle_rest: Row | None
    k8s_namespaces: list[Row]


def _fleet(c: Scope) -> FleetView:
    """The GPU fleet: hours and spend by model, hours by utilisation band, the machines, the idle and oversized
    ones' findings, and Kubernetes' shared GPUs by namespace."""
    s, team = c.s, c.team
    fleet = s.get("fleet") or {}
    if team is None:
        by_model: list[Row] = [dict(m) for m in fleet.get("by_model") or []]
        bands = fleet.get("utilisation") or {}
    else:
        by_model = [{"model": m, **v} for m, v in (c.team_spend.get("by_model") or {}).items()]
        by_model.sort(key=lambda m: (-_d(m["gpu_hours"]), m["model"]))
        bands = c.team_spend.get("utilisation") or {}
    top_hours = max((_d(m["gpu_hours"]) for m in by_model), default=Decimal(0))
    machines = [m for m in fleet.get("machines") or [] if team is None or m.get("team") == team]
    idle_all = [f for f in c.every if f.get("clause") in ("idle", "rightsizing")]
    idle_shown, idle_rest = shown_findings(idle_all)
    if idle_rest:  # the most worth it, in the order of the whole list
        keep = {id(f) for f in idle_shown}
        idle_shown = [f for f in idle_all if id(f) in keep]
    return {"models": [{**m, "bar": _bar(m["gpu_hours"], top_hours)} for m in by_model],
            "bands": _hours_rows(bands, BANDS), "machines": machines[:MACHINES_SHOWN],
            "machines_total": len(machines) if team else fleet.get("machines_total", len(machines)),
            "idle_oversized": [_finding(f) for f in idle_shown], "idle_rest": idle_rest,
            "k8s_namespaces": [{**r, "held": {r["currency"]: r["allocated"]}, "idle": {r["currency"]: r["idle_share"]},
                                "cost": {r["currency"]: r["total"]}}
                               for r in (s.get("kubernetes_gpus") or {}).get("namespaces", [])
                               if team is None or r.get("team") == team]}


class FindingsView(TypedDict):
    by_rule: list[Row]
    by_team: list[Row]
    confidence_note: str | None
    anomalies: list[Row]


def _by_rule(every: list[Row]) -> list[Row]:
    """Findings by rule: counts, cost and savings of the open ones, the costliest shown and the rest summed."""
    by_rule: dict[str, Row] = {}
    for f in sorted(every, key=lambda f: f["rule"]):
        g = by_rule.setdefault(f["rule"], {"rule": f["rule"], "name": f["name"], "clause": f.get("clause"),
                                           "remediation": f.get("remediation") or "", "findings": []})
        g["findings"].append(f)
    for g in by_rule.values():
        mine = [f for f in g["findings"] if not f["waived"]]
        g.update(open=len(mine), waived=len(g["findings"]) - len(mine), cost=_money_sum(mine, "cost"),
                 **_rule_savings(mine))
        g["findings"].sort(key=_rank)
        shown, g["rest"] = shown_findings(g["findings"], ranked=True)  # thousands: the costliest, the rest summed
        g["findings"] = [_finding(f) for f in shown]
    return list(by_rule.values())


def _findings(c: Scope) -> FindingsView:
    """Findings by rule and by team (the organisation's findings, a family's baseline or unowned spend, apart
    from the unattributed), and the anomalies' charts."""
    by_team: dict[str, Row] = {}
    for f in c.every:
        key = finding_team(f["entity_type"], f.get("team")) or UNATTRIBUTED
        by_team.setdefault(key, {"team": key, "findings": []})["findings"].append(f)
    for t in by_team.values():
        mine = [f for f in t["findings"] if not f["waived"]]
        b: Mapping[str, Any] = (c.s.get("teams") or {}).get(t["team"]) or {}
        t.update(lead=b.get("lead"), open=len(mine), waived=len(t["findings"]) - len(mine),
                 savings=_team_savings(c.s, t["team"], mine), cost=_resource_cost(mine),
                 rules=sorted({f["rule"] for f in mine}))
    return {"by_rule": _by_rule(c.every),
            "by_team": sorted(by_team.values(), key=lambda t: (-_d(t["savings"].get(c.cur)), -t["open"], t["team"])),
            "confidence_note": HOW_JUDGED if any("confidence" in (f.get("evidence") or {}) for f in c.every)
            else None,
            "anomalies": anomalies.charts(c.every)}


class ActionsView(TypedDict):
    top: list[Row]
    actions: Row
    wasted: PerCurrency
    to_check: PerCurrency
    weekly: Any
    band_keys: Any


def _actions(c: Scope) -> ActionsView:
    """The actions to take, first the top ones, what they would save and what the window wasted; the weekly
    charts."""
    s = c.s
    whole: Summary = s if "actions" in s else {**s, "actions": _old_actions(c.open_)}
    acts = actions_view(whole, c.team)
    return {"top": acts["top"], "actions": acts,
            "wasted": s.get("wasted", {}) if c.team is None else acts["wasted"],
            "to_check": s.get("savings_to_check", {}) if c.team is None else acts["to_check"],
            "weekly": charts.weekly(s, c.cur, c.team), "band_keys": charts.band_keys()}


class WaiversView(TypedDict):
    waivers: list[Row]
    expiring: list[Row]
    expiring_days: int


def _waivers(c: Scope) -> WaiversView:
    """The waivers (a team's: those on its findings), and those that end within EXPIRING_DAYS of the as-of
    date."""
    waivers = []
    for w in c.doc.get("waivers", []):
        if c.team is not None and not any(f["rule"] == w["rule"] and fnmatch.fnmatchcase(f["resource"], w["resource"])
                                          for f in c.every):
            continue
        waivers.append({**w, "days_left": (date.fromisoformat(w["expires"]) - c.as_of).days})
    return {"waivers": waivers, "expiring_days": EXPIRING_DAYS,
            "expiring": [w for w in waivers if w["status"] != "expired" and 0 <= w["days_left"] <= EXPIRING_DAYS]}


class ForecastView(TypedDict):
    forecast: Row | None


def _forecast(c: Scope) -> ForecastView:
    """Next window at the run rate, and less the savings found over its hours (a team's: its own)."""
    fc, s, team = c.s.get("forecast"), c.s, c.team
    if not fc:
        return {"forecast": None}
    hours = _d(fc["next"]["hours"])
    run_rate = fc["billed_cost"] if team is None else (fc.get("by_team") or {}).get(team, {})
    next_savings = ({k: _d(v) for k, v in fc["savings"].items()} if team is None
                    else {k: _d(v) * hours / HOURS_PER_MONTH for k, v in c.savings.items()})
    left_out = [m for m in s.get("baseline_left_out") or []
                if team is None or m in {f["resource"].lower() for f in c.every}]
    return {"forecast": {
        "basis": fc["basis"], "next": fc["next"], "run_rate": run_rate,
        "definition": (f"Forecast savings over {fc['next']['label']}: the savings found a month, over its "
                       f"{fmt_num(hours)} hours in {HOURS_PER_MONTH}-hour months, taken off the run rate."
                       + _left_out(left_out)),
        "gpu": fc.get("gpu_cost") if team is None else None, "savings": next_savings,
        "with_savings": {k: max(_d(v) - next_savings.get(k, Decimal(0)), Decimal(0)) for k, v in run_rate.items()}}}


class TrendView(TypedDict):
    change: Row | None
    trend: Row | None


def _trend(c: Scope) -> TrendView:
    """Quarter over quarter: last quarter's audit (--previous), else the window before, when the billing has it."""
    trend, team = c.doc.get("trend"), c.team
    if trend:
        spend_change = trend["billed_cost"] if team is None else (trend.get("by_team") or {}).get(team)
        change = {"label": trend["previous"]["label"], "source": "audit", "billed": _changes(spend_change),
                  "gpu": _changes(trend["gpu_cost"]) if team is None else [],
                  "savings": _changes(trend["monthly_savings"]) if team is None else []}
        mine = {k: [f for f in trend["findings"][k] if team is None or team_of(f) == team]
                for k in ("new", "still_open", "resolved")}
        return {"change": change, "trend": {
            **trend, "findings": mine, "counts": {k: len(v) for k, v in mine.items()},
            "clause_changes": [cl for cl in trend.get("clauses", []) if cl["previous"] != cl["current"]]}}
    pw = c.s.get("previous_window")
    if pw and team is None:
        from auditor.trend import change_of

        return {"change": {"label": pw["label"], "source": "billing",
                           "billed": _changes(change_of(pw["billed_cost"], c.spend)),
                           "gpu": _changes(change_of(pw["gpu_cost"], c.gpu)), "savings": []},  # no findings then
                "trend": trend}
    return {"change": None, "trend": trend}


class InputsView(TypedDict):
    sources: list[Row]
    inventory: str | None
    allocation: Row | None
    previous_input: Row | None
    coverage: list[CoverageMonth]
    coverage_providers: list[str]
    missing: list[str]
    warnings: list[str]
    rates: Row
    other_currency: list[Row]


def _inputs(c: Scope) -> InputsView:
    """What the audit read: the billing files (and those in another currency than the policy's: held to its
    thresholds only at a rate the user gave), the inventory, coverage by month, the warnings."""
    coverage = c.s.get("coverage") or {}
    inputs = c.doc.get("inputs") or {}
    rates = c.doc["policy"].get("rates") or {}
    other_currency = [{"path": b["path"], "amounts": {k: v for k, v in b["billed_cost"].items() if k != c.cur},
                       "rated": all(k in (rates.get("rates") or {}) for k in b["billed_cost"] if k != c.cur)}
                      for b in inputs.get("billing", []) if set(b.get("billed_cost") or {}) - {c.cur}]
    return {"sources": [{"duplicate_of": None, "period_start": None, "period_end": None, "billed_cost": {}, **b}
                        for b in inputs.get("billing", [])],
            "inventory": inputs.get("inventory"), "allocation": c.s.get("allocation") if c.team is None else None,
            "previous_input": inputs.get("previous"), "coverage": coverage.get("months", []),
            "coverage_providers": sorted({p for m in coverage.get("months", []) for p in m["lines"]}),
            "missing": coverage.get("missing", []), "warnings": c.doc.get("warnings", []), "rates": rates,
            "other_currency": other_currency}


class ReportView(HeadView, ComplianceView, SpendView, BudgetsView, FleetView, FindingsView, ActionsView,
                 WaiversView, ForecastView, TrendView, InputsView):
    """Every name the report templates (reports/report.*.j2) see; `jobs`: the Jobs section (outputs/jobs.py)."""
    jobs: Row


def build_view(audit: Audit | AuditDoc | dict[str, Any], team: str | None = None) -> ReportView:
    """The names the templates see, from the audit.json dict alone, one section at a time. With `team`, the view
    is that team's: its findings, spend, machines, forecast and trend; the policy and the inputs stay the
    organisation's."""
    c = _scope(audit, team)
    return {**_head(c), **_compliance(c), **_spend(c), **_budgets(c), **_fleet(c), **_findings(c), **_actions(c),
            **_waivers(c), **_forecast(c), **_trend(c), **_inputs(c), "jobs": jobs_view(c.doc, team)}

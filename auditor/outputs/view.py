"""The view-model every report template renders: `build_view` turns the audit.json dict, as every output shows it
(`audit_doc`: secrets masked as the policy says), into the rows, bars and sections of the HTML and Markdown reports
and the e-mails, for the whole audit or one team; `shown_findings` is what a view lists of one rule's findings."""

from __future__ import annotations

import fnmatch
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from auditor.evidence import HOW_JUDGED
from auditor.figures import TOP_ACTIONS, finding_team
from auditor.model import HOURS_PER_MONTH
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


def audit_doc(audit: Audit | dict[str, Any]) -> dict[str, Any]:
    """The JSON-able audit, as every output shows it: an Audit's to_dict(), or a dict read back from
    audit.json, with secrets masked (secret_patterns.py) unless the policy said `mask_secrets: false` (then
    recorded in audit.json's policy section, so `gpu-auditor report` keeps to it)."""
    if isinstance(audit, _Shown):
        return audit
    if not isinstance(audit, dict):
        masked = getattr(audit.policy, "mask_secrets", True)
        doc = audit.to_dict(masked=masked)  # masked as it is encoded: one walk
        if not masked:
            doc["policy"]["mask_secrets"] = False
        return _Shown(doc)
    if (audit.get("policy") or {}).get("mask_secrets", True) is False:
        return _Shown(audit)
    return _Shown(mask_deep(audit))


CATEGORIES = {"gpu_compute": "GPU compute", "other_compute": "Other compute", "storage": "Storage",
              "transfer": "Data transfer", "tax": "Tax", "other": "Other"}
DIMENSIONS = {"provider": "provider", "account": "account", "region": "region", "team": "team",
              "project": "project"}
PRICING = {"on_demand": "On-demand", "spot": "Spot", "committed": "Committed (reserved, savings plans)"}
BANDS = charts.BAND_LABELS
UNATTRIBUTED = "(unattributed)"
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


def _add(into: dict[str, Decimal], amounts: dict[str, Any] | None) -> dict[str, Decimal]:
    for cur, amount in (amounts or {}).items():
        into[cur] = into.get(cur, Decimal(0)) + _d(amount)
    return into


def _savings(findings: list[dict[str, Any]]) -> dict[str, Decimal]:
    """Monthly savings per currency of some open findings, as the audit counted them: the savings not marked
    `counted_under` another finding (figures.mark_overlaps)."""
    return _money_sum([f for f in findings if not f.get("counted_under")], "monthly_savings")


def _team_savings(s: dict[str, Any], team: str, findings: list[dict[str, Any]]) -> dict[str, Any]:
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


def actions_view(s: dict[str, Any], team: str | tuple[str, ...] | None) -> dict[str, Any]:
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
    out: dict[str, Decimal] = {}
    for f in findings:
        if f.get(key) is not None:
            out[f["currency"]] = out.get(f["currency"], Decimal(0)) + _d(f[key])
    return out


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
    per_team = [{"team": t, "count": len(fs), "cost": _money_sum(fs, "cost")} for t, fs in teams.items()]
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
    rows = [{"key": k, "amounts": v} for k, v in items.items()]
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


def build_view(audit: Audit | dict[str, Any], team: str | None = None) -> dict[str, Any]:
    """The names the templates see, from the audit.json dict alone. With `team`, the view is that team's: its
    findings, spend, machines, forecast and trend; the policy and the inputs stay the organisation's."""
    doc = audit_doc(audit)
    s = doc["summary"]
    policy = doc["policy"]
    cur = policy.get("currency") or "USD"
    team_spend = (s.get("team_spend") or {}).get(team, {}) if team else {}
    # the audit's own finding dicts; those shown are made ready to show (_finding), the rest only counted
    every = [f for f in doc["findings"] if team is None or team_of(f) == team]
    open_ = [f for f in every if not f["waived"]]

    if team is None:
        spend, by_category, savings = s["billed_cost"], s.get("by_category", {}), s["monthly_savings"]
        gpu = s["gpu_cost"]
        per_team = {t: {"billed_cost": v} for t, v in (s.get("by_team") or {}).items()}
    else:
        spend = (s.get("by_team") or {}).get(team, {})
        by_category = team_spend.get("by_category", {})
        gpu, savings = by_category.get("gpu_compute", {}), _team_savings(s, team, open_)
        per_team = {team: {"billed_cost": spend}}
    total = spend.get(cur)

    # compliance, clause by clause: a clause is broken where any of its rules has open findings (for a team:
    # the team's), disabled where all its rules are, else met
    open_by_rule: dict[str, list[dict[str, Any]]] = {}
    for f in open_:
        open_by_rule.setdefault(f["rule"], []).append(f)
    clauses: dict[str, dict[str, Any]] = {}
    for c in doc.get("clauses", []):
        g = clauses.setdefault(c["clause"], {"clause": c["clause"], "rules": [], "texts": [], "options_text": [],
                                             "in_policy": c.get("in_policy", True), "states": []})
        g["rules"].append({"rule": c["rule"], "name": c["name"]})
        if c["text"] not in g["texts"]:
            g["texts"].append(c["text"])
        g["options_text"] += [(k, value_text(k, v, cur)) for k, v in (c.get("options") or {}).items()
                              if k not in dict(g["options_text"])]
        g["states"].append(c["status"] if c["status"] in ("disabled", "not checked") else
                           "broken" if c["rule"] in open_by_rule else "met")
    for g in clauses.values():
        mine = [f for r in dict.fromkeys(r["rule"] for r in g["rules"]) for f in open_by_rule.get(r, [])]
        state = next(s for s in ("broken", "met", "not checked", "disabled") if s in g["states"])
        g.update(status=state + (" (defaults)" if state in ("met", "broken") and not g["in_policy"] else ""),
                 text=" ".join(g["texts"]), findings=len(mine), savings=_savings(mine),
                 rule=", ".join(r["rule"] for r in g["rules"]))
    clauses = list(clauses.values())
    compliance = {k.replace(" ", "_"): sum(1 for c in clauses if c["status"].startswith(k))
                  for k in ("met", "broken", "not checked", "disabled")}

    # where the money went
    categories = {}
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
                             "gpu_cost": (team_spend.get(f"gpu_by_{dim}") or {}).get(r["key"], {}),
                             "bar": r["bar"], "pct": r["pct"]}
                            for r in _rows(team_spend.get(f"by_{dim}", {}), cur, total)]
                      for dim in ("provider", "project")}
        pricing = team_spend.get("gpu_hours_by_pricing") or {}
    if team is None:  # every team of the policy, with or without spend
        per_team = {**{t: {"billed_cost": {}} for t in s.get("teams") or {}}, **per_team}
    budgets = []
    for t, v in per_team.items():
        b = (s.get("teams") or {}).get(t) or {}
        spent = v["billed_cost"].get(cur)
        hours = b.get("gpu_hours")
        if hours is None and t in (s.get("team_spend") or {}):  # an audit.json from before summary.teams had it
            hours = sum((_d(h) for h in s["team_spend"][t].get("gpu_hours_by_pricing", {}).values()), Decimal(0))
        # the shares of the budgets are those the budget rule judged (summary.teams), quarter to date
        row = {"team": t, "lead": b.get("lead"), "spent": v["billed_cost"], "budget": b.get("budget"),
               "used_pct": b.get("share_of_budget", _share(spent, b.get("budget")) if b.get("budget") else None),
               "gpu_hours": hours, "gpu_hours_budget": b.get("gpu_hours_budget"),
               "gpu_hours_pct": b.get("gpu_hours_share", _share(hours, b.get("gpu_hours_budget"))
                                      if b.get("gpu_hours_budget") else None),
               "left_out": b.get("left_out") or {}}
        # the bar shows the unit furthest into its budget: the one a budget finding speaks of
        worst = max((p for p in (row["used_pct"], row["gpu_hours_pct"]) if p is not None), default=None)
        row.update(worst_pct=worst, bar=min(100, max(1, int(worst))) if worst else 0)
        budgets.append(row)
    budgets.sort(key=lambda r: (-_d(r["spent"].get(cur)), r["team"]))
    budget_hours = any(r["gpu_hours_budget"] is not None for r in budgets)

    # the GPU fleet
    fleet = s.get("fleet") or {}
    if team is None:
        by_model = fleet.get("by_model") or []
        bands = fleet.get("utilisation") or {}
    else:
        by_model = [{"model": m, **v} for m, v in (team_spend.get("by_model") or {}).items()]
        by_model.sort(key=lambda m: (-_d(m["gpu_hours"]), m["model"]))
        bands = team_spend.get("utilisation") or {}
    top_hours = max((_d(m["gpu_hours"]) for m in by_model), default=0)
    model_rows = [{**m, "bar": _bar(m["gpu_hours"], top_hours)} for m in by_model]
    machines = [m for m in fleet.get("machines") or [] if team is None or m.get("team") == team]
    idle_all = [f for f in every if f.get("clause") in ("idle", "rightsizing")]
    idle_shown, idle_rest = shown_findings(idle_all)
    if idle_rest:  # the most worth it, in the order of the whole list
        keep = {id(f) for f in idle_shown}
        idle_shown = [f for f in idle_all if id(f) in keep]
    idle_oversized = [_finding(f) for f in idle_shown]

    # findings, by rule and by team
    by_rule: dict[str, dict[str, Any]] = {}
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
    by_team: dict[str, dict[str, Any]] = {}
    for f in every:  # the organisation's findings (a family's baseline, unowned spend) apart from unattributed
        key = finding_team(f["entity_type"], f.get("team")) or UNATTRIBUTED
        t = by_team.setdefault(key, {"team": key, "findings": []})
        t["findings"].append(f)
    for t in by_team.values():
        mine = [f for f in t["findings"] if not f["waived"]]
        b = (s.get("teams") or {}).get(t["team"]) or {}
        t.update(lead=b.get("lead"), open=len(mine), waived=len(t["findings"]) - len(mine),
                 savings=_team_savings(s, t["team"], mine), cost=_resource_cost(mine),
                 rules=sorted({f["rule"] for f in mine}))
    team_rows = sorted(by_team.values(), key=lambda t: (-_d(t["savings"].get(cur)), -t["open"], t["team"]))
    actions = actions_view(s if "actions" in s else {**s, "actions": _old_actions(open_)}, team)

    # waivers, and those that end within EXPIRING_DAYS of the as-of date
    as_of = date.fromisoformat(doc.get("as_of") or doc["generated_at"][:10])
    waivers = []
    for w in doc.get("waivers", []):
        if team is not None and not any(f["rule"] == w["rule"] and fnmatch.fnmatchcase(f["resource"], w["resource"])
                                        for f in every):
            continue
        days = (date.fromisoformat(w["expires"]) - as_of).days
        waivers.append({**w, "days_left": days})
    expiring = [w for w in waivers if w["status"] != "expired" and 0 <= w["days_left"] <= EXPIRING_DAYS]

    # the forecast
    fc = s.get("forecast")
    forecast = None
    if fc:
        hours = _d(fc["next"]["hours"])
        run_rate = fc["billed_cost"] if team is None else (fc.get("by_team") or {}).get(team, {})
        next_savings = ({c: _d(v) for c, v in fc["savings"].items()} if team is None
                        else {c: _d(v) * hours / HOURS_PER_MONTH for c, v in savings.items()})
        forecast = {"basis": fc["basis"], "next": fc["next"], "run_rate": run_rate, "definition": (
                        f"Forecast savings over {fc['next']['label']}: the savings found a month, over its "
                        f"{fmt_num(hours)} hours in 730-hour months, taken off the run rate."
                        + _left_out([m for m in s.get("baseline_left_out") or []
                                     if team is None or m in {f["resource"].lower() for f in every}])),
                    "gpu": fc.get("gpu_cost") if team is None else None, "savings": next_savings,
                    "with_savings": {c: max(_d(v) - next_savings.get(c, Decimal(0)), Decimal(0))
                                     for c, v in run_rate.items()}}

    # quarter over quarter: last quarter's audit (--previous), else the window before, when the billing has it
    trend = doc.get("trend")
    change = None
    if trend:
        spend_change = trend["billed_cost"] if team is None else (trend.get("by_team") or {}).get(team)
        change = {"label": trend["previous"]["label"], "source": "audit", "billed": _changes(spend_change),
                  "gpu": _changes(trend["gpu_cost"]) if team is None else [],
                  "savings": _changes(trend["monthly_savings"]) if team is None else []}
        keep = (lambda f: True) if team is None else (lambda f: (f.get("team") or UNATTRIBUTED) == team)  # noqa: E731
        trend = {**trend, "findings": {k: [f for f in trend["findings"][k] if keep(f)]
                                       for k in ("new", "still_open", "resolved")},
                 "clause_changes": [c for c in trend.get("clauses", []) if c["previous"] != c["current"]]}
        trend["counts"] = {k: len(v) for k, v in trend["findings"].items()}
    elif s.get("previous_window") and team is None:
        pw = s["previous_window"]
        from auditor.trend import change_of

        change = {"label": pw["label"], "source": "billing",
                  "billed": _changes(change_of(pw["billed_cost"], spend)),
                  "gpu": _changes(change_of(pw["gpu_cost"], gpu)), "savings": []}  # no findings then: no savings

    coverage = s.get("coverage") or {}
    inputs = doc.get("inputs") or {}
    rates = policy.get("rates") or {}
    # billing in another currency than the policy's: held to the policy's thresholds only at a rate the user gave
    other_currency = [{"path": b["path"], "amounts": {c: v for c, v in b["billed_cost"].items() if c != cur},
                       "rated": all(c in (rates.get("rates") or {}) for c in b["billed_cost"] if c != cur)}
                      for b in inputs.get("billing", []) if set(b.get("billed_cost") or {}) - {cur}]
    providers = sorted({p for m in coverage.get("months", []) for p in m["lines"]})
    return {
        "doc": doc, "team": team, "cur": cur, "policy": policy, "window": doc["window"],
        "window_text": _window_text(doc["window"]["start"], doc["window"]["end"]),
        "generated_at": doc["generated_at"][:16].replace("T", " ") + " UTC", "as_of": as_of.isoformat(),
        "tool": doc.get("tool") or {}, "partial": doc.get("partial", False),
        "team_lead": ((s.get("teams") or {}).get(team) or {}).get("lead") if team else None,
        "spend": spend, "gpu": gpu, "gpu_share": _share(gpu.get(cur), total),
        "effective": s.get("effective_cost", {}) if team is None else None, "rows": s.get("rows"),
        "savings_definition": SAVINGS_DEFINITION,
        "savings": savings, "savings_quarter": (s.get("quarterly_savings") if team is None else None)
        or {c: _d(v) * (_d(fc["next"]["hours"]) if fc else 3 * HOURS_PER_MONTH) / HOURS_PER_MONTH
            for c, v in savings.items()},
        "findings_count": {"open": len(open_), "waived": len(every) - len(open_),
                           "by_severity": {sev: sum(1 for f in open_ if f["severity"] == sev)
                                           for sev in ("critical", "high", "medium", "low", "info")}},
        "compliance": compliance, "clauses": clauses, "change": change,
        "top": actions["top"], "actions": actions,
        "wasted": s.get("wasted", {}) if team is None else actions["wasted"],
        "to_check": s.get("savings_to_check", {}) if team is None else actions["to_check"],
        "weekly": charts.weekly(s, cur, team),
        "anomalies": anomalies.charts(every),
        "band_keys": charts.band_keys(),
        "categories": category_rows, "breakdowns": breakdowns, "budgets": budgets, "budget_hours": budget_hours,
        "budget_quarter": next((b["quarter"] for b in (s.get("teams") or {}).values() if b.get("quarter")), None),
        "budget_left_out": [b for b in budgets if b["left_out"]],
        "pricing": _hours_rows(pricing, PRICING), "gpu_hours": s.get("gpu_hours") if team is None else None,
        "transfer_gb_out": s.get("transfer_gb_out", {}) if team is None else {},
        "models": model_rows, "bands": _hours_rows(bands, BANDS),
        "machines": machines[:MACHINES_SHOWN], "machines_total": len(machines) if team else fleet.get(
            "machines_total", len(machines)), "idle_oversized": idle_oversized, "idle_rest": idle_rest,
        "by_rule": list(by_rule.values()), "by_team": team_rows,
        "confidence_note": HOW_JUDGED if any("confidence" in (f.get("evidence") or {}) for f in every) else None,
        "waivers": waivers, "expiring": expiring, "expiring_days": EXPIRING_DAYS,
        "forecast": forecast, "trend": trend,
        "sources": [{"duplicate_of": None, "period_start": None, "period_end": None, "billed_cost": {}, **b}
                    for b in inputs.get("billing", [])],
        "inventory": inputs.get("inventory"), "allocation": s.get("allocation") if team is None else None,
        "previous_input": inputs.get("previous"), "coverage": coverage.get("months", []),
        "coverage_providers": providers, "missing": coverage.get("missing", []),
        "warnings": doc.get("warnings", []), "rates": rates, "other_currency": other_currency,
        "k8s_namespaces": [{**r, "held": {r["currency"]: r["allocated"]}, "idle": {r["currency"]: r["idle_share"]},
                            "cost": {r["currency"]: r["total"]}}
                           for r in (s.get("kubernetes_gpus") or {}).get("namespaces", [])
                           if team is None or r.get("team") == team],
        "jobs": jobs_view(doc, team),
    }

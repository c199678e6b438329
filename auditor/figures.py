"""Figures over findings and breakdowns, each computed here once and rendered by every view.

- One action per resource: two findings on one resource are alternatives (stop the machine, or downsize it)
  or one flow seen by two rules (cross-region egress, training far from its data), so the resource's action
  lists them all and counts its largest saving once, under the rule that found it; the other findings' savings
  are shown as already counted there. The savings headline is the sum of the actions' savings of high
  confidence; the others' are "to check".
- A breakdown's parts are rounded so that they add up to the total rounded once (largest remainder).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from decimal import ROUND_FLOOR, Decimal
from typing import Any, TypeVar

from auditor.model import CENT, Finding, money

K = TypeVar("K", bound=Hashable)
TOP_ACTIONS = 5  # the actions a report lists first (and their sparklines)
ORGANISATION = "(organisation)"
# entities that are the organisation's, not a resource of one team: a family's commitment baseline, the share
# of spend no team owns, a waiver of the policy. Their findings are the organisation's, never "unattributed".
ORG_WIDE = frozenset({"SteadyGpuSpend", "UnattributedSpend", "WaiverStatus"})
# entities that are a team's when they have one, else the organisation's: a GPU spend series (ANOM001) of a team
# is that team's; one of an account, an instance family or the spend no team owns spans teams
TEAM_OR_ORG = frozenset({"GpuSpendSeries"})


def finding_team(entity_type: str, team: str | None) -> str | None:
    """The team a finding is counted under: its resource's (attributed as its spend is), or the organisation."""
    if entity_type in ORG_WIDE or (entity_type in TEAM_OR_ORG and team is None):
        return ORGANISATION
    return team


def sum_money(findings: list[Finding], attr: str) -> dict[str, Decimal]:
    """An amount attribute of the findings (`cost`, `monthly_savings`) summed per currency."""
    out: dict[str, Decimal] = {}
    for f in findings:
        amount = getattr(f, attr)
        if amount is not None:
            out[f.currency] = out.get(f.currency, Decimal(0)) + amount
    return out


def counts(f: Finding) -> bool:
    """Whether a finding's saving, were it the one its action takes, counts in the headline: high confidence.
    The others' are shown apart, "to check"."""
    return f.confidence == "high"


def _choice(f: Finding) -> tuple:
    """The finding an action takes: a saving that counts before one to check, the largest, the first rule."""
    return (f.monthly_savings is None, not counts(f), -(f.monthly_savings or 0), -f.severity, f.rule)


def _rank(a: dict[str, Any]) -> tuple:
    """Actions by severity, then dollars (the saving, the saving to check, the cost): a finding without a
    saving (a team over budget, a job that never checkpoints) ranks beside those with one."""
    return (-a["severity"], -(a["saving"] or 0), -(a["to_check"] or 0), -(a["cost"] or 0), a["resource"],
            a["currency"])


def actions(findings: list[Finding]) -> list[dict[str, Any]]:
    """One action per resource (a machine, a job, a reservation, a team's budget): every open finding on it
    folded into one, the reasons listed, the finding that saves most taken (see _choice) and its saving counted
    once, in the headline when its confidence is high, else "to check". Ranked by severity, then dollars.
    Sets each finding's `counted_under` (the rule whose finding counts its saving, None where it counts its own
    or has none): every view reads the mark from audit.json."""
    by_resource: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        by_resource.setdefault((f.resource, f.currency), []).append(f)
    out: list[dict[str, Any]] = []
    for (resource, currency), group in by_resource.items():
        group.sort(key=_choice)
        take = group[0]
        for f in group:
            f.counted_under = take.rule if f is not take and f.monthly_savings is not None else None
        saving = take.monthly_savings
        waste = [f.wasted for f in group if f.wasted is not None]
        cost = [f.cost for f in group if f.cost is not None]
        out.append({
            "resource": resource, "currency": currency, "rule": take.rule, "name": take.name,
            "message": take.message, "severity": max(f.severity for f in group),
            "team": finding_team(take.entity_type, next((f.team for f in group if f.team), None)),
            "owner": next((f.owner for f in group if f.owner), None),
            "saving": saving if counts(take) else None, "to_check": None if counts(take) else saving,
            "confidence": take.confidence, "wasted": max(waste) if waste and counts(take) else None,
            "wasted_to_check": max(waste) if waste and not counts(take) else None,
            "cost": max(cost) if cost else None, "still_running": take.still_running,
            "reasons": [{"rule": f.rule, "name": f.name, "severity": f.severity.label, "message": f.message,
                         "monthly_savings": f.monthly_savings, "confidence": f.confidence,
                         "fingerprint": f.fingerprint} for f in group]})
    out.sort(key=_rank)
    for a in out:
        a["severity"] = a["severity"].label
    return out


def action_totals(acts: list[dict[str, Any]], field: str) -> dict[str, Decimal]:
    """An amount of the actions (`saving`, `to_check`, `wasted`) summed per currency: `saving` is the headline."""
    return action_totals_by(acts, field, lambda a: None).get(None, {})


def action_totals_by(acts: list[dict[str, Any]], field: str, key: Callable[[dict[str, Any]], K]
                     ) -> dict[K, dict[str, Decimal]]:
    """An amount of the actions summed per `key` (their team) and currency: the groups add up to the total."""
    out: dict[K, dict[str, Decimal]] = {}
    for a in acts:
        if a[field] is not None:
            into = out.setdefault(key(a), {})
            into[a["currency"]] = into.get(a["currency"], Decimal(0)) + a[field]
    return out


def savings_by(findings: list[Finding], key: Callable[[Finding], K]) -> dict[K, dict[str, Decimal]]:
    """The savings that count (the actions' taken findings of high confidence; `counted_under` set by
    actions()), per `key` (team, rule) and currency: the groups add up to the headline, whatever the grouping."""
    out: dict[K, dict[str, Decimal]] = {}
    for f in findings:
        if f.monthly_savings is not None and f.counted_under is None and counts(f):
            into = out.setdefault(key(f), {})
            into[f.currency] = into.get(f.currency, Decimal(0)) + f.monthly_savings
    return out


def apportion(parts: Mapping[K, Decimal], target: Decimal | None = None) -> dict[K, Decimal]:
    """Each part rounded to the cent so that the parts add up to `target` (by default their sum, rounded once):
    every part is rounded down, and the cents left go to the parts with the largest remainders (ties: by key).
    A target a cent off the parts' own sum (a team's total, itself apportioned) moves one cent more or less."""
    target = money(sum(parts.values(), Decimal(0)) if target is None else target)
    down = {k: Decimal(v).quantize(CENT, rounding=ROUND_FLOOR) for k, v in parts.items()}
    left = int((target - sum(down.values(), Decimal(0))) / CENT)
    order = sorted(parts, key=lambda k: (-(Decimal(parts[k]) - down[k]), str(k)))
    if left < 0:
        order.reverse()
    for i in range(abs(left) if order else 0):
        down[order[i % len(order)]] += CENT if left > 0 else -CENT
    return down


def apportion_amounts(items: Mapping[K, Mapping[str, Decimal]], targets: Mapping[str, Decimal] | None = None,
                      pinned: Mapping[K, Mapping[str, Decimal]] | None = None) -> dict[K, dict[str, Decimal]]:
    """{key: {currency: amount}} with each currency's parts apportioned (see apportion) to their own rounded sum,
    or to `targets[currency]` where given. `pinned` parts are figures already shown elsewhere (GPU compute in
    the headline): they keep their value and the other parts make up the rest of the target."""
    pinned = {k: v for k, v in (pinned or {}).items() if k in items}
    out: dict[K, dict[str, Decimal]] = {k: dict(pinned.get(k, {})) for k in items}
    for cur in sorted({c for k, v in items.items() if k not in pinned for c in v}):
        target = targets.get(cur) if targets is not None else None
        if target is not None:
            target = money(target) - sum((v.get(cur, Decimal(0)) for v in pinned.values()), Decimal(0))
        shares = apportion({k: v[cur] for k, v in items.items() if cur in v and k not in pinned}, target)
        for k, amount in shares.items():
            out[k][cur] = amount
    return out

"""Who gets what: each team's lead a message about their team(s), the policy owner the whole picture
(every team, what no team owns, and tax), so that every finding and every dollar lands in some message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from auditor.audit_model import AuditDoc, Summary
from auditor.errors import InputError
from auditor.model import UNATTRIBUTED
from auditor.policy import Policy, address_problem
from auditor.text import one_line

TAX = "(tax)"  # and for tax, no team's: the owner's summary counts it in the total
ORGANISATION = "(organisation)"  # summary.savings_by_team's key for findings on the whole organisation (figures)


def mail_address(value: Any, what: str) -> str:
    """An address from the policy or --from, checked: one addr-spec, nothing else (policy.address_problem)."""
    text = "" if value is None else str(value).strip()
    problem = address_problem(text)
    if problem:
        raise InputError(f"{what} '{one_line(text)}' {problem}")
    return text


def amounts(value: Mapping[str, Any] | None) -> dict[str, Decimal]:
    return {c: Decimal(str(v)) for c, v in (value or {}).items()}


def added(a: dict[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(a)
    for c, v in b.items():
        out[c] = out.get(c, Decimal(0)) + v
    return out


def savings_of(summary: Summary, team: str, findings: list[dict[str, Any]]) -> dict[str, Decimal]:
    """A team's monthly savings per currency as the audit counted them (summary.savings_by_team: each resource
    once); for an audit.json written before the summary had them, the open findings' savings not marked as
    counted under another finding."""
    if "savings_by_team" in summary:
        return amounts(summary["savings_by_team"].get(team))
    out: dict[str, Decimal] = {}
    for f in findings:
        if f.get("monthly_savings") is not None and not f.get("counted_under"):
            out = added(out, {f["currency"]: Decimal(f["monthly_savings"])})
    return out


def clean(value: Any) -> Any:
    """Every string (keys too) made single-line (see one_line), for display."""
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


@dataclass
class Section:
    """One team's part of a message; `team` None is the spend and findings with no team at all. Its findings
    are display copies (single-line strings); routing and sums use the raw values."""

    team: str | None
    lead: str | None
    in_policy: bool
    spend: dict[str, Decimal]
    savings: dict[str, Decimal]
    findings: list[dict[str, Any]]  # open (not waived)
    waived: list[dict[str, Any]]
    budget: Decimal | None = None
    used: float | None = None  # percent of the budget, from summary.teams

    @property
    def name(self) -> str:
        return one_line(self.team) if self.team is not None else "no team"

    def share(self, currency: str) -> float | None:
        """The share of the budget used, as the audit judged it (summary.teams); from the spend shown for an
        audit.json written before."""
        if not self.budget:
            return None
        if self.used is not None:
            return self.used
        return round(float(self.spend.get(currency, Decimal(0)) / self.budget) * 100, 1)


@dataclass
class Letter:
    """One message: to a team lead about their team(s), or to the policy owner with the whole picture."""

    recipient: str
    sections: list[Section]  # the recipient's own teams
    is_owner: bool = False
    overview: list[Section] = field(default_factory=list)  # for the owner: every team, no team, and tax
    unowned: list[Section] = field(default_factory=list)  # for the owner: what no lead in the policy owns


def route(audit: AuditDoc, policy: Policy) -> list[Letter]:
    """Who gets what. Every finding and every dollar of spend lands in at least one message: its team's lead
    when the policy names the team, otherwise the policy owner."""
    by_team = audit["summary"]["by_team"]
    findings = audit["findings"]
    owner = mail_address(policy.owner, "the policy owner")

    def section(team: str | None, lead: str | None, in_policy: bool, budget=None) -> Section:
        mine = [f for f in findings if f.get("team") == team]
        active = [f for f in mine if not f["waived"]]
        key = UNATTRIBUTED if team is None else team
        spend = amounts(by_team.get(key))
        judged = (audit["summary"].get("teams") or {}).get(key)
        used = judged.get("share_of_budget") if judged else None
        savings = savings_of(audit["summary"], key, active)
        if team is None:  # the findings on no team's resource: unattributed ones and the organisation's
            savings = added(savings, amounts((audit["summary"].get("savings_by_team") or {}).get(ORGANISATION)))
        return Section(team, lead, in_policy, spend, savings, clean(active),
                       clean([f for f in mine if f["waived"]]), budget, used)

    teams = [section(name, mail_address(t.lead, f"the lead of team {one_line(name)!r}"), True,
                     t.budget_per_quarter) for name, t in policy.teams.items()]
    others = sorted(({t for f in findings if (t := f.get("team")) is not None} |
                     {k for k in by_team if k not in (UNATTRIBUTED, TAX)}) - set(policy.teams))
    unowned = [section(None, None, False)] + [section(name, None, False) for name in sorted(others)]
    unowned = [s for s in unowned if s.spend or s.findings or s.waived]

    letters: dict[str, Letter] = {}
    for s in teams:
        assert s.lead is not None  # every team of the policy has its lead
        letters.setdefault(s.lead.lower(), Letter(s.lead, [])).sections.append(s)
    mine = letters.pop(owner.lower(), Letter(owner, []))
    tax = [section(TAX, None, False)] if TAX in by_team else []  # a row of the overview, so that it adds up
    mine.is_owner, mine.overview, mine.unowned = True, teams + unowned + tax, unowned
    return list(letters.values()) + [mine]

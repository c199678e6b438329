"""Runs the rule pack under the policy over the normalized tables, and assembles the audit result."""

from __future__ import annotations

import calendar
import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from auditor import __version__
from auditor.catalog import Catalog, load_catalog
from auditor.errors import InputError
from auditor.model import Finding, GpuAsset, Job, ResourceSpend, Severity, TransferFlow, money
from auditor.policy import Policy
from auditor.providers.columns import lit
from auditor.providers.snapshot import load_snapshot
from auditor.rule import Rule, all_rules
from auditor.store import SourceFile, Store, Window

AUDIT_SCHEMA = "gpu-auditor/audit@1"


@dataclass
class Context:
    """What a rule may consult besides its entity: the catalog, the policy and the audit window."""

    catalog: Catalog
    policy: Policy
    window: Window

    def tag(self, tags: dict[str, str], keys: Iterable[str]) -> str | None:
        """A tag's value by any of the given keys, ignoring case and stray spaces in the key."""
        wanted = [k.strip().lower() for k in keys]
        norm = {k.strip().lower(): v for k, v in tags.items() if v is not None and str(v).strip()}
        for k in wanted:
            if k in norm:
                return norm[k]
        return None

    def attribute(self, tags: dict[str, str]) -> tuple[str | None, str | None]:
        """(team, owner) from cost-allocation tags; a project tag maps to its team through the policy."""
        team = self.tag(tags, self.policy.team_tags)
        if team is None:
            project = self.tag(tags, self.policy.project_tags)
            team = self.policy.team_of_project(project) if project else None
        return team, self.tag(tags, self.policy.owner_tags)

    def monthly(self, amount: Decimal, hours: Decimal | float | None = None) -> Decimal:
        """An amount seen over `hours` (the whole window by default), scaled to a 730-hour month."""
        span = Decimal(str(hours)) if hours else self.window.hours
        return amount * Decimal(730) / span if span else Decimal(0)


ENTITY_BUILDERS: dict[type, Callable[[Store, Window], list]] = {
    GpuAsset: Store.gpu_assets, Job: Store.jobs, ResourceSpend: Store.resource_spend,
    TransferFlow: Store.transfer_flows,
}


def configured_rules(policy: Policy, select: Iterable[str] | None = None) -> list[Rule]:
    """Every rule of the pack, with its options and severity from its policy clause; a clause with
    `enabled: false` turns its rules off, and `select` keeps only the named rules."""
    chosen = None
    if select:
        from auditor.rule import get_rule

        chosen = set()
        for key in select:
            try:
                chosen.add(get_rule(key).id)
            except KeyError:
                known = [r.id for r in all_rules()] + [r.name for r in all_rules()]
                near = difflib.get_close_matches(key, known, n=1)
                hint = f"; did you mean {near[0]}?" if near else f"; known rules: {', '.join(known[:len(known) // 2])}"
                raise InputError(f"--rule {key!r}: no such rule{hint}") from None
    out = []
    for cls in all_rules():
        if chosen is not None and cls.id not in chosen:
            continue
        clause = policy.clause(cls.clause)
        if clause and not clause.enabled:
            continue
        opts = {k: v for k, v in (clause.options if clause else {}).items() if k in cls.options and v is not None}
        out.append(cls(opts, clause.severity if clause else None))
    return out


def run_rules(rules: list[Rule], entities: dict[type, list], ctx: Context) -> list[Finding]:
    findings = []
    for rule in rules:
        for entity in entities.get(rule.entity, []):
            findings.extend(rule.check(entity, ctx))
    findings.sort(key=lambda f: (-f.severity, -(f.monthly_savings or 0), f.rule, f.resource))
    return findings


def apply_waivers(findings: list[Finding], policy: Policy, today: date) -> list[dict[str, Any]]:
    """Mark waived findings; an expired waiver waives nothing and is reported as expired."""
    status = []
    for w in policy.waivers:
        expired = w.expired(today)
        matched = 0
        for f in findings:
            if w.matches(f.rule, f.resource):
                matched += 1
                if not expired and f.waiver is None:
                    f.waiver = {"reason": w.reason, "owner": w.owner, "expires": w.expires.isoformat()}
        state = "expired" if expired else ("active" if matched else "unused")
        status.append({"rule": w.rule, "resource": w.resource, "reason": w.reason, "owner": w.owner,
                       "expires": w.expires.isoformat(), "status": state, "matched": matched, "line": w.line})
    return status


def parse_quarter(text: str) -> Window:
    m = re.fullmatch(r"(\d{4})-?Q([1-4])", text.strip(), re.IGNORECASE)
    if not m:
        raise InputError(f"--quarter {text!r}: use the form 2026-Q3")
    year, q = int(m.group(1)), int(m.group(2))
    start = datetime(year, 3 * q - 2, 1)
    end = datetime(year + 1, 1, 1) if q == 4 else datetime(year, 3 * q + 1, 1)
    return Window(start, end, f"{year}-Q{q}")


def label_for(start: datetime, end: datetime) -> str:
    """`2026-Q3` for a calendar quarter, else the dates."""
    if start.day == 1 and start.month in (1, 4, 7, 10) and start.time() == datetime.min.time():
        q = parse_quarter(f"{start.year}-Q{(start.month + 2) // 3}")
        if q.end == end:
            return q.label
    last = end.date() if end.time() != datetime.min.time() else \
        date.fromordinal(end.date().toordinal() - 1)
    return f"{start.date().isoformat()} to {last.isoformat()}"


def month_end(d: datetime) -> datetime:
    return d.replace(day=calendar.monthrange(d.year, d.month)[1])


@dataclass
class Audit:
    """One audit's result; every output format is a view of it."""

    window: Window
    policy: Policy
    findings: list[Finding]
    sources: list[SourceFile]
    summary: dict[str, Any]
    clauses: list[dict[str, Any]]
    waivers: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    inventory: str | None = None
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC).replace(tzinfo=None))
    partial: bool = False

    def active(self) -> list[Finding]:
        return [f for f in self.findings if not f.waived]

    def worst(self) -> Severity | None:
        active = self.active()
        return max((f.severity for f in active), default=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": AUDIT_SCHEMA,
            "tool": {"name": "gpu-auditor", "version": __version__},
            "generated_at": self.generated_at.isoformat() + "Z",
            "window": {"start": self.window.start.isoformat() + "Z", "end": self.window.end.isoformat() + "Z",
                       "label": self.window.label},
            "policy": {"name": self.policy.name, "version": self.policy.version, "owner": self.policy.owner,
                       "path": self.policy.path},
            "partial": self.partial,
            "inputs": {"billing": [_source_dict(s) for s in self.sources], "inventory": self.inventory},
            "summary": _jsonable(self.summary),
            "clauses": _jsonable(self.clauses),
            "findings": [f.to_dict() for f in self.findings],
            "waivers": self.waivers,
            "warnings": self.warnings,
        }


def _source_dict(s: SourceFile) -> dict[str, Any]:
    d = {"path": s.path, "format": s.format, "sha256": s.sha256, "rows": s.rows}
    if s.duplicate_of:
        d["duplicate_of"] = s.duplicate_of
    for k in ("period_start", "period_end", "billed_cost", "effective_cost"):
        if k in s.stats:
            d[k] = _jsonable(s.stats[k])
    return d


def _jsonable(v: Any) -> Any:
    """Money as strings rounded once to the cent; times as UTC ISO-8601."""
    if isinstance(v, Decimal):
        return str(money(v))
    if isinstance(v, datetime):
        return v.isoformat() + "Z"
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


def team_sql(policy: Policy) -> str:
    """The team of a billing line, in SQL, by the same attribution rules as Context.attribute."""

    def tag(keys: list[str]) -> str:
        names = ", ".join(lit(k.strip().lower()) for k in keys)
        return (f"NULLIF(list_filter(map_entries(Tags), lambda e: lower(trim(e.key)) IN ({names}))[1].value, '')")

    projects = {p: t.name for t in policy.teams.values() for p in t.projects}
    whens = " ".join(f"WHEN {lit(p)} THEN {lit(t)}" for p, t in projects.items())
    by_project = f"CASE {tag(policy.project_tags)} {whens} END" if whens else "NULL"
    return f"COALESCE({tag(policy.team_tags)}, {by_project})"


def clause_status(policy: Policy, rules: list[Rule], findings: list[Finding]) -> list[dict[str, Any]]:
    out = []
    configured = {r.id for r in rules}
    for cls in all_rules():
        clause = policy.clause(cls.clause)
        active = [f for f in findings if f.rule == cls.id and not f.waived]
        if cls.id not in configured:
            state = "disabled"
        elif clause is None:
            state = "met (defaults)" if not active else "broken (defaults)"
        else:
            state = "broken" if active else "met"
        opts = {k: v.default for k, v in cls.options.items()}
        if clause:
            opts.update({k: v for k, v in clause.options.items() if v is not None and k in cls.options})
        out.append({"clause": cls.clause, "rule": cls.id, "name": cls.name,
                    "text": clause.text if clause else cls.summary(), "options": opts,
                    "in_policy": clause is not None, "status": state, "findings": len(active),
                    "cost": _sum_money(active, "cost"), "monthly_savings": savings_total(active)})
    return out


def _sum_money(findings: list[Finding], attr: str) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for f in findings:
        amount = getattr(f, attr)
        if amount is not None:
            out[f.currency] = out.get(f.currency, Decimal(0)) + amount
    return out


def savings_total(findings: list[Finding]) -> dict[str, Decimal]:
    """Monthly savings per currency. Two findings on one resource are alternatives (shut it down, or
    downsize it), not savings to add: each resource counts with its largest."""
    best: dict[tuple[str, str], Decimal] = {}
    for f in findings:
        if f.monthly_savings is not None:
            key = (f.resource, f.currency)
            best[key] = max(best.get(key, f.monthly_savings), f.monthly_savings)
    out: dict[str, Decimal] = {}
    for (_, currency), amount in best.items():
        out[currency] = out.get(currency, Decimal(0)) + amount
    return out


def run_audit(policy: Policy, billing: list[Path], inventory: Path | None = None,
              window: Window | None = None, today: date | None = None,
              select: Iterable[str] | None = None,
              progress: Callable[[str], None] | None = None) -> Audit:
    catalog = load_catalog()
    store = Store(catalog)
    store.load_billing(billing, progress)
    if inventory is not None:
        if progress:
            progress(f"reading inventory {inventory}")
        store.load_snapshot(load_snapshot(inventory))
    if window is None:
        data = store.data_window()
        if data is None:
            raise InputError("no billing lines to audit")
        window = Window(data.start, data.end, label_for(data.start, data.end))
    ctx = Context(catalog, policy, window)
    if progress:
        progress(f"running the rules over {window.label}")
    entities = {t: build(store, window) for t, build in ENTITY_BUILDERS.items()}
    rules = configured_rules(policy, select)
    findings = run_rules(rules, entities, ctx)
    waivers = apply_waivers(findings, policy, today or date.today())
    summary = summarize(store, policy, window, findings)
    warnings = list(store.warnings)
    if summary["rows"] == 0:
        warnings.append(f"no billing lines fall in the audit window {window.label}")
    warnings += [f"waiver for {w['rule']} on {w['resource']} expired on {w['expires']}; it no longer waives"
                 for w in waivers if w["status"] == "expired"]
    return Audit(window, policy, findings, store.sources, summary, clause_status(policy, rules, findings),
                 waivers, warnings, str(inventory) if inventory else None)


def summarize(store: Store, policy: Policy, window: Window, findings: list[Finding]) -> dict[str, Any]:
    stats = store.window_stats(window)
    active = [f for f in findings if not f.waived]
    by_severity = {s.label: sum(1 for f in active if f.severity == s) for s in reversed(Severity)}
    by_team = store.spend_by(window, team_sql(policy))
    budgets = {}
    for name, team in policy.teams.items():
        spent = by_team.get(name, {}).get(policy.currency, Decimal(0))
        budgets[name] = {"lead": team.lead, "budget": team.budget_per_quarter, "spent": spent,
                         "share_of_budget": (round(float(spent / team.budget_per_quarter) * 100, 1)
                                             if team.budget_per_quarter else None)}
    return {
        **stats,
        "by_team": by_team,
        "teams": budgets,
        "findings": {"total": len(active), "waived": len(findings) - len(active), "by_severity": by_severity},
        "monthly_savings": savings_total(active),
        "findings_cost": _sum_money(active, "cost"),
    }

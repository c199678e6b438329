"""Runs the rule pack under the policy over the normalized tables, and assembles the audit result."""

from __future__ import annotations

import calendar
import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor import __version__
from auditor.auditfile import SCHEMA as AUDIT_SCHEMA
from auditor.catalog import Catalog, load_catalog
from auditor.errors import InputError
from auditor.model import (
    Commitment,
    Finding,
    GpuAsset,
    GpuCapacity,
    Job,
    RemoteDataFlow,
    ResourceSpend,
    Severity,
    StorageGrowth,
    TeamSpend,
    TransferFlow,
    UnattributedSpend,
    WaiverStatus,
    money,
)
from auditor.policy import Policy
from auditor.providers.columns import lit
from auditor.rule import Rule, all_rules

if TYPE_CHECKING:  # the store imports DuckDB; the gate runs the rules without it, so it loads on first use
    from auditor.store import SourceFile, Store, Window


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


# The Store method that builds each entity from the tables (by name: the store is imported only in run_audit).
ENTITY_BUILDERS: dict[type, str] = {
    GpuAsset: "gpu_assets", Job: "jobs", ResourceSpend: "resource_spend", TransferFlow: "transfer_flows",
    GpuCapacity: "gpu_capacity", TeamSpend: "team_spend", UnattributedSpend: "unattributed_spend",
    Commitment: "commitments", StorageGrowth: "storage_growth", RemoteDataFlow: "remote_data_flows",
}
# Builders that also read the policy (team attribution, budgets): called with (window, policy).
WITH_POLICY = {TeamSpend, UnattributedSpend}


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
    findings.sort(key=finding_order)
    return findings


def finding_order(f: Finding) -> tuple:
    return -f.severity, -(f.monthly_savings or 0), f.rule, f.resource


def waiver_statuses(policy: Policy, status: list[dict[str, Any]], findings: list[Finding],
                    today: date) -> list[WaiverStatus]:
    """The policy's waivers as entities (for POL001), with the billed cost of the findings each one names."""
    out = []
    for w, st in zip(policy.waivers, status, strict=True):
        cost: dict[str, Decimal] = {}
        for f in findings:
            if w.matches(f.rule, f.resource) and f.cost is not None:
                cost[f.currency] = cost.get(f.currency, Decimal(0)) + f.cost
        out.append(WaiverStatus(f"waiver:{w.rule}:{w.resource}", w.rule, w.resource, w.reason, w.owner, w.expires,
                                today, st["status"], st["matched"], cost, policy.path, w.line,
                                {policy.owner_tags[0]: w.owner}))
    return out


def load_baseline(path: Path) -> tuple[set[str], dict[str, Any]]:
    """The fingerprints of every finding in a previous audit.json (reported, waived or itself from a baseline)."""
    from auditor.auditfile import read_audit

    saved = read_audit(path)
    doc = saved.doc
    listed = doc["findings"] + ((doc.get("baseline") or {}).get("findings") or [])
    prints = {f.get("fingerprint") for f in listed if isinstance(f, dict)}
    prints.discard(None)
    return prints, {"path": str(path), "sha256": saved.sha256,
                    "window": (doc.get("window") or {}).get("label")}


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
    from auditor.store import Window

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
    generated_at: datetime | None = None  # when given (--generated-at, SOURCE_DATE_EPOCH); see stamp()
    partial: bool = False
    as_of: date | None = None  # the day waivers were judged on
    previous: dict[str, Any] | None = None  # last quarter's audit.json: {"path", "sha256", "doc"} (trend.py)
    # --baseline: the audit.json whose findings are known ({"path", "sha256", "window"}), and the findings of this
    # audit found in it: kept out of `findings`, so neither reported nor failing, but listed in audit.json
    baseline: dict[str, Any] | None = None
    known: list[Finding] = field(default_factory=list)

    def stamp(self) -> datetime:
        """The audit's generated_at. Never the wall clock, so that the same inputs give the same bytes: the time
        given, else midnight UTC of the as-of date, else the window's end."""
        if self.generated_at is not None:
            return self.generated_at
        if self.as_of is not None:
            return datetime(self.as_of.year, self.as_of.month, self.as_of.day)
        return self.window.end

    def active(self) -> list[Finding]:
        return [f for f in self.findings if not f.waived]

    def worst(self) -> Severity | None:
        active = self.active()
        return max((f.severity for f in active), default=None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able audit (audit.json): every report format is rendered from this dict alone."""
        doc = {
            "schema": AUDIT_SCHEMA,
            "tool": {"name": "gpu-auditor", "version": __version__},
            "generated_at": self.stamp().isoformat() + "Z",
            "as_of": self.as_of.isoformat() if self.as_of else None,
            "window": {"start": self.window.start.isoformat() + "Z", "end": self.window.end.isoformat() + "Z",
                       "label": self.window.label},
            "policy": {"name": self.policy.name, "version": self.policy.version, "owner": self.policy.owner,
                       "path": self.policy.path, "currency": self.policy.currency},
            "partial": self.partial,
            "inputs": {"billing": [_source_dict(s) for s in self.sources], "inventory": self.inventory,
                       "previous": None},
            "summary": _jsonable(self.summary),
            "clauses": _jsonable(self.clauses),
            "findings": [_plain(f.to_dict()) for f in self.findings],
            "baseline": None if self.baseline is None else {
                **self.baseline, "known": len(self.known), "findings": [_plain(f.to_dict()) for f in self.known]},
            "waivers": self.waivers,
            "warnings": self.warnings,
            "trend": None,
        }
        if self.previous is not None:
            from auditor.trend import compare

            doc["inputs"]["previous"] = {k: self.previous[k] for k in ("path", "sha256")}
            doc["trend"] = compare(doc, self.previous["doc"])
        return doc


def _source_dict(s: SourceFile) -> dict[str, Any]:
    d = {"path": s.path, "format": s.format, "sha256": s.sha256, "rows": s.rows}
    if s.duplicate_of:
        d["duplicate_of"] = s.duplicate_of
    for k in ("period_start", "period_end", "billed_cost", "effective_cost"):
        if k in s.stats:
            d[k] = _jsonable(s.stats[k])
    return d


def _exact(d: Decimal) -> str:
    """A Decimal as its exact text, without the trailing zeros or exponent of DuckDB's DECIMAL (2208, not
    2208.000000000000000000)."""
    text = format(d, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _jsonable(v: Any, decimal: Callable[[Decimal], str] = lambda d: str(money(d))) -> Any:
    """For JSON: times as UTC ISO-8601, Decimals by `decimal` (money by default: strings rounded once to the
    cent), through dicts and lists."""
    if isinstance(v, Decimal):
        return decimal(v)
    if isinstance(v, datetime):
        return v.isoformat() + "Z"
    if isinstance(v, dict):
        return {str(k): _jsonable(x, decimal) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x, decimal) for x in v]
    return v


def _plain(v: Any) -> Any:
    """A finding's dict for JSON: a Decimal left in its evidence (GB, hours, percent) as its exact text, not a
    cent."""
    return _jsonable(v, _exact)


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


def run_audit(policy: Policy, billing: list[Path | str], inventory: Path | None = None,
              window: Window | None = None, today: date | None = None,
              select: Iterable[str] | None = None,
              progress: Callable[[str], None] | None = None, baseline: Path | None = None) -> Audit:
    from auditor.providers.detect import URI_NEEDS_SPARK, is_uri
    from auditor.pull import audit_inputs
    from auditor.store import BILLING_ENGINE, Store, Window

    # URIs (s3a://bucket/prefix) are read by --engine spark through the cluster's file systems (engines/spark.py),
    # after the local files and snapshots.
    uris = [p for p in billing if is_uri(p)]
    if uris and BILLING_ENGINE.get() is None:
        raise InputError(URI_NEEDS_SPARK, path=str(uris[0]))
    prints, base_info = load_baseline(baseline) if baseline is not None else (None, None)  # fail before the work
    catalog = load_catalog()
    store = Store(catalog)
    # Snapshot folders: their billing, inventory, window, failures.
    inputs = audit_inputs([p for p in billing if not is_uri(p)], inventory)
    store.load_billing(inputs.billing + uris, progress)
    if inputs.inventory is not None:
        if progress:
            progress(f"reading inventory {inputs.inventory_label}")
        store.load_snapshot(inputs.inventory)
    window = window or inputs.window
    if window is None:
        data = store.data_window()
        if data is None:
            raise InputError("no billing lines to audit")
        window = Window(data.start, data.end, label_for(data.start, data.end))
    ctx = Context(catalog, policy, window)
    if progress:
        progress(f"running the rules over {window.label}")
    rules = configured_rules(policy, select)
    needed = {r.entity for r in rules}
    entities = {t: getattr(store, build)(window, *([policy] if t in WITH_POLICY else []))
                for t, build in ENTITY_BUILDERS.items() if t in needed}
    findings = run_rules(rules, entities, ctx)
    today = today or date.today()
    waivers = apply_waivers(findings, policy, today)
    # Expired waivers are findings themselves (POL001), judged once the waivers have been applied.
    findings = sorted(findings + run_rules(rules, {WaiverStatus: waiver_statuses(policy, waivers, findings, today)},
                                           ctx), key=finding_order)
    known: list[Finding] = []
    if prints is not None:
        for f in findings:
            f.in_baseline = f.fingerprint in prints
        known = [f for f in findings if f.in_baseline]
        findings = [f for f in findings if not f.in_baseline]
    summary = summarize(store, policy, window, findings)
    warnings = list(store.warnings) + inputs.warnings
    if summary["rows"] == 0:
        warnings.append(f"no billing lines fall in the audit window {window.label}")
    warnings += [f"waiver for {w['rule']} on {w['resource']} expired on {w['expires']}; it no longer waives"
                 for w in waivers if w["status"] == "expired"]
    return Audit(window, policy, findings, store.sources, summary, clause_status(policy, rules, findings),
                 waivers, warnings, inputs.inventory_label, partial=bool(inputs.missing), baseline=base_info,
                 known=known)


def summarize(store: Store, policy: Policy, window: Window, findings: list[Finding]) -> dict[str, Any]:
    from auditor import breakdown, fleet

    stats = store.window_stats(window)
    active = [f for f in findings if not f.waived]
    savings = savings_total(active)
    team_key, project_key = team_sql(policy), breakdown.tag_sql(policy.project_tags)
    per_team = breakdown.team_spend(store, window, team_key, project_key)
    assets = store.gpu_assets(window)
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
        "monthly_savings": savings,
        "quarterly_savings": {cur: amount * 3 for cur, amount in savings.items()},  # 3 months of 730 hours
        "findings_cost": _sum_money(active, "cost"),
        "breakdown": breakdown.spend_breakdown(store, window, policy.currency, team_key, project_key),
        "gpu_hours_by_pricing": breakdown.gpu_hours_by_pricing(per_team),
        "team_spend": per_team,
        "fleet": {"by_model": breakdown.gpu_by_model(per_team), "utilisation": fleet.total_bands(util),
                  "machines": machines[:fleet.MACHINES], "machines_total": len(machines)},
        "forecast": breakdown.forecast(store, window, team_key, savings),
        "previous_window": breakdown.previous_spend(store, window),
        "coverage": coverage,
    }

"""The core shared by the audit and the gate: the configured rules run over entities, waivers applied, the
policy's clauses judged; and the audit itself: load -> entities -> rules -> findings -> result."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor import running
from auditor.context import Context
from auditor.errors import InputError
from auditor.figures import actions, savings_by, sum_money
from auditor.model import Finding, SteadyGpuSpend, WaiverStatus
from auditor.policy import Policy, Waiver
from auditor.registry import all_rules, get_rule, rule_keys
from auditor.rule import Rule
from auditor.text import did_you_mean
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.audit import Audit
    from auditor.tables.store import SourceFile, Store

# Reads billing files into the store: Store.load_billing (DuckDB), or Spark's (tables/spark.py).
BillingEngine = Callable[["Store", list, Callable[[str], None] | None], "list[SourceFile]"]


def configured_rules(policy: Policy, select: Iterable[str] | None = None) -> list[Rule]:
    """Every rule of the pack, with its options and severity from its policy clause; a clause with
    `enabled: false` turns its rules off, and `select` keeps only the named rules."""
    chosen = None
    if select:
        chosen = set()
        for key in select:
            try:
                chosen.add(get_rule(key).id)
            except KeyError:
                ids = [r.id for r in all_rules()]
                hint = did_you_mean(key, rule_keys(), otherwise=f"; known rules: {', '.join(ids)}")
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


def tag_keys_read(policy: Policy, rules: Iterable[Rule]) -> set[str]:
    """Every tag key the audit reads of billing lines: the policy's attribution keys (team, owner, project, job,
    tokens, samples) and each rule's options that name tag keys (a `tag` option, a list of them, a map keyed by
    them). The store keeps only these of a line's tags. (The labels that mark a machine interactive are read from
    the inventory's tags, which are kept whole.)"""
    keys = {*policy.team_tags, *policy.owner_tags, *policy.project_tags, *policy.job_tags, *policy.token_tags,
            *policy.sample_tags}
    for rule in rules:
        for name, f in rule.options.items():
            value = rule.opt(name)
            named = f if f.kind == "tag" else f.item if f.kind == "list" else f.keys if f.kind == "map" else None
            if value and named is not None and named.kind == "tag":
                keys.update([value] if f.kind == "tag" else value)
    return keys


def follow_split(findings: list[Finding], teams: dict[str, str | None]) -> None:
    """A finding on a machine the provider split (`teams`: split.teams_of) is counted under the team that bears
    the largest part of its cost, as its spend is, not under the team of the machine's own tags: findings by
    team, team reports and actions per team then agree with team spend and budgets."""
    for f in findings:
        key = f.resource.lower() if f.resource else None
        if key in teams:
            f.team = teams[key]


def run_rules(rules: list[Rule], entities: dict[type, list], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for rule in rules:
        found: list[Finding] = []
        for entity in entities.get(rule.entity, []):
            found.extend(rule.check(entity, ctx))
        findings.extend(rule.fold(found, ctx))
    findings.sort(key=finding_order)
    return findings


def finding_order(f: Finding) -> tuple:
    return -f.severity, -(f.monthly_savings or 0), f.rule, f.resource


def waiver_statuses(policy: Policy, status: list[dict[str, Any]], findings: list[Finding],
                    today: date) -> list[WaiverStatus]:
    """The policy's waivers as entities (for POL001), with the billed cost of the findings each one names."""
    out = []
    for w, st, named in zip(policy.waivers, status, named_by(policy.waivers, findings), strict=True):
        cost: dict[str, Decimal] = {}
        for f in named:
            if f.cost is not None:
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
    prints = {str(f["fingerprint"]) for f in listed if isinstance(f, dict) and f.get("fingerprint") is not None}
    return prints, {"path": str(path), "sha256": saved.sha256,
                    "window": (doc.get("window") or {}).get("label")}


def freed(findings: list[Finding], policy: Policy, today: date) -> set[str]:
    """The machines (ids, lower case) that findings not waived say to stop or shrink (Rule.frees_capacity)."""
    live = [w for w in policy.waivers if not w.expired(today)]
    frees = {cls.id for cls in all_rules() if cls.frees_capacity}
    waived = {id(f) for named in named_by(live, findings) for f in named}
    return {f.resource.lower() for f in findings if f.rule in frees and id(f) not in waived}


def named_by(waivers: list[Waiver], findings: list[Finding]) -> list[list[Finding]]:
    """The findings each waiver names, in the findings' order: a waiver is compared with its own rule's findings
    alone, not with every finding of the audit (a hundred thousand, where tags churn)."""
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(f.rule, []).append(f)
    return [[f for f in by_rule.get(w.rule, ()) if w.matches(f.rule, f.resource)] for w in waivers]


def apply_waivers(findings: list[Finding], policy: Policy, today: date) -> list[dict[str, Any]]:
    """Mark waived findings; an expired waiver waives nothing and is reported as expired."""
    status = []
    for w, named in zip(policy.waivers, named_by(policy.waivers, findings), strict=True):
        expired = w.expired(today)
        matched = len(named)
        for f in named:
            if not expired and f.waiver is None:
                f.waiver = {"reason": w.reason, "owner": w.owner, "expires": w.expires.isoformat()}
        state = "expired" if expired else ("active" if matched else "unused")
        status.append({"rule": w.rule, "resource": w.resource, "reason": w.reason, "owner": w.owner,
                       "expires": w.expires.isoformat(), "status": state, "matched": matched, "line": w.line})
    return status


def clause_status(policy: Policy, rules: list[Rule], findings: list[Finding],
                  checked: dict[str, int]) -> list[dict[str, Any]]:
    """Each rule's clause: disabled; not checked (the rule had nothing to look at: no sweep, no reservation, no
    Kubernetes node in the inputs); else met or broken, "(defaults)" where the policy does not set the clause.
    `checked` is the number of entities each configured rule looked at."""
    out = []
    configured = {r.id for r in rules}
    savings = savings_by([f for f in findings if not f.waived], lambda f: f.rule)  # each saving counted once
    by_rule: dict[str, list[Finding]] = {}  # each rule's active findings, in order: one pass, not one a rule
    for f in findings:
        if not f.waived:
            by_rule.setdefault(f.rule, []).append(f)
    for cls in all_rules():
        clause = policy.clause(cls.clause)
        active = by_rule.get(cls.id, [])
        if cls.id not in configured:
            state = "disabled"
        elif not active and not checked.get(cls.id):
            state = "not checked"
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
                    "cost": sum_money(active, "cost"), "monthly_savings": savings.get(cls.id, {})})
    return out


def run_audit(policy: Policy, billing: list[Path | str], inventory: Path | None = None,
              window: Window | None = None, today: date | None = None,
              select: Iterable[str] | None = None,
              progress: Callable[[str], None] | None = None, baseline: Path | None = None,
              engine: BillingEngine | None = None, previous: dict[str, Any] | None = None,
              generated_at: datetime | None = None) -> Audit:
    """The audit: billing and inventory in, the result out (every output is a view of it).

    `engine` reads the billing files into the store (default: DuckDB in process; `--engine spark` gives
    Spark's, tables/spark.py); `previous` is last quarter's audit (trend.load_previous)."""
    # The tables load DuckDB, and the billing files, snapshots and the audit's result are the audit's alone:
    # imported here, so that the gate, which runs only the rules, starts fast.
    from auditor.audit import Audit
    from auditor.providers.billing.detect import URI_NEEDS_SPARK, is_uri
    from auditor.providers.live.inputs import audit_inputs
    from auditor.tables import gpu_machines, split  # noqa: F401 (gpu_machines: registers the GPU machines' builders)
    from auditor.tables.entities import BUILDERS, build, examined
    from auditor.tables.jobcost import job_costs, job_totals
    from auditor.tables.sql import team_sql
    from auditor.tables.store import Store
    from auditor.tables.summary import READS as SUMMARY_READS
    from auditor.tables.summary import summarize
    from auditor.tables.unitcost import unit_costs

    # URIs (s3a://bucket/prefix) are read by --engine spark through the cluster's file systems (tables/spark.py),
    # after the local files and snapshots.
    uris = [p for p in billing if is_uri(p)]
    if uris and engine is None:
        raise InputError(URI_NEEDS_SPARK, path=str(uris[0]))
    prints, base_info = load_baseline(baseline) if baseline is not None else (None, None)  # fail before the work
    # Only the tag keys something reads are kept; every rule of the policy counts, whatever `select` runs.
    store = Store(tag_keys=tag_keys_read(policy, configured_rules(policy)))
    # Snapshot folders: their billing, inventory, window, failures.
    inputs = audit_inputs([Path(p) for p in billing if not is_uri(p)], inventory)
    if engine is not None:
        engine(store, [*inputs.billing, *uris], progress)
    else:  # no URIs: refused above
        store.load_billing(inputs.billing, progress)
    if inputs.inventory is not None:
        if progress:
            progress(f"reading inventory {inputs.inventory_label}")
        store.load_snapshot(inputs.inventory)
    window = store.audit_window(window or inputs.window, "audit")
    ctx = Context(store.catalog, policy, window)
    if progress:
        progress(f"running the rules over {window.label}")
    rules = configured_rules(policy, select)
    needed = {r.entity for r in rules}
    # The commitment baseline is built last, without the machines the other rules say to stop or shrink.
    # Each type built for the rules that read it: where they state their candidates, only those (Rule.candidates).
    entities = {t: build(store, window, policy, t, [r for r in rules if r.entity is t])
                for t in BUILDERS if t in needed and t is not SteadyGpuSpend}
    today = today or date.today()
    findings = run_rules([r for r in rules if r.entity is not SteadyGpuSpend], entities, ctx)
    store.freed = freed(findings, policy, today)
    if SteadyGpuSpend in needed:  # kept with the others: COM004's clause is judged on what it looked at
        entities[SteadyGpuSpend] = build(store, window, policy, SteadyGpuSpend)
        findings += run_rules([r for r in rules if r.entity is SteadyGpuSpend],
                              {SteadyGpuSpend: entities[SteadyGpuSpend]}, ctx)
    follow_split(findings, split.teams_of(store, window, team_sql(policy)))
    waivers = apply_waivers(findings, policy, today)
    seen = {**{t: examined(v) for t, v in entities.items()}, WaiverStatus: len(waivers)}
    # The rules are done with the entities: only the summary's own are kept, and every resource's (hundreds of
    # megabytes at ten million lines) is let go before the findings are ranked, costed and written.
    entities.clear()
    store.keep_entities(SUMMARY_READS)
    checked = {r.id: seen.get(r.entity, 0) for r in rules}
    # Expired waivers are findings themselves (POL001), judged once the waivers have been applied.
    findings = sorted(findings + run_rules(rules, {WaiverStatus: waiver_statuses(policy, waivers, findings, today)},
                                           ctx), key=finding_order)
    known: list[Finding] = []
    if prints is not None:
        for f in findings:
            f.in_baseline = f.fingerprint in prints
        known = [f for f in findings if f.in_baseline]
        findings = [f for f in findings if not f.in_baseline]
    running.judge(findings, store.con, window)  # savings only for what still runs at the window's end
    summary = summarize(store, policy, window, findings, actions([f for f in findings if not f.waived]))
    jobs = job_costs(store, window, policy, findings + known)
    summary["jobs"] = job_totals(jobs)
    summary["unit_costs"] = unit_costs(store, policy, window.label, jobs, previous["doc"] if previous else None)
    warnings = list(store.warnings) + inputs.warnings
    store.close()
    if summary["rows"] == 0:
        warnings.append(f"no billing lines fall in the audit window {window.label}")
    warnings += [f"waiver for {w['rule']} on {w['resource']} expired on {w['expires']}; it no longer waives"
                 for w in waivers if w["status"] == "expired"]
    result = Audit(window, policy, findings, store.sources, summary, clause_status(policy, rules, findings, checked),
                   waivers, warnings, inputs.inventory_label, partial=bool(inputs.missing), as_of=today,
                   previous=previous, generated_at=generated_at, baseline=base_info, known=known,
                   jobs=jobs)
    if previous is not None:
        from auditor.trend import compare

        result.trend = compare(result.to_dict(), previous["doc"])
    return result

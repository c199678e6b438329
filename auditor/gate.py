"""The deploy gate: the pack's job rules over training-job manifests, before a GPU is paid for.

Reads manifests into `Job` entities (providers/manifests/), runs every rule that reads jobs under the policy,
applies the policy's waivers and the manifests' own inline waivers, and decides the exit code. Imports
nothing heavy: no DuckDB (the store), no cloud SDK, so it starts fast in a pre-commit hook.

An inline waiver is an annotation (Kubernetes) or a tag or label (SageMaker, Azure ML, SkyPilot) on the job:

    gpu-auditor.dev/waive: "SPOT001 until 2027-01-31: restarts from the dataset cache in two minutes"

One waiver a line; more keys may start with `gpu-auditor.dev/waive` (`gpu-auditor.dev/waive-budget`). The
rule is an ID or a name; the date is required, and from the day after it the waiver no longer waives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from auditor.context import Context
from auditor.core import apply_waivers, configured_rules, run_rules
from auditor.errors import InputError
from auditor.model import Finding, Job, Severity
from auditor.policy import Policy
from auditor.providers.catalog import load_catalog
from auditor.providers.manifests import ANNOTATION_PREFIX, load_jobs
from auditor.registry import get_rule, rule_keys
from auditor.rule import Rule
from auditor.text import did_you_mean
from auditor.window import quarter_of

WAIVE_KEY = ANNOTATION_PREFIX + "waive"
WAIVER_RE = re.compile(r"^\s*(?P<rule>[A-Za-z0-9-]+)\s+until\s+(?P<date>\d{4}-\d{2}-\d{2})\s*:\s*(?P<reason>.*?)\s*$")
GATE_SCHEMA = "gpu-auditor/gate@1"


@dataclass
class InlineWaiver:
    rule: str
    expires: date
    reason: str
    job: str
    file: str | None
    line: int | None

    def expired(self, today: date) -> bool:
        return self.expires < today


@dataclass
class GateResult:
    policy: Policy
    files: list[str]
    jobs: list[Job]
    rules: list[Rule]
    findings: list[Finding]
    waivers: list[dict[str, Any]]
    warnings: list[str]
    fail_on: Severity | None  # None: never fail on findings (--fail-on none)
    warn_only: bool = False
    as_of: date = field(default_factory=date.today)
    failures: list[InputError] = field(default_factory=list)  # files that could not be read, one error each

    def active(self) -> list[Finding]:
        return [f for f in self.findings if not f.waived]

    def blocks(self, f: Finding) -> bool:
        """Whether a finding is at or above --fail-on (whether or not --warn-only lets it pass)."""
        return not f.waived and self.fail_on is not None and f.severity >= self.fail_on

    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if self.blocks(f)]

    def failed_files(self) -> list[dict[str, Any]]:
        """The files that could not be read, as file, line and why."""
        return [{"file": e.path, "line": e.line, "message": e.message} for e in self.failures]

    @property
    def exit_code(self) -> int:
        if self.failures:
            return 2
        return 1 if self.blocking() and not self.warn_only else 0

    @property
    def verdict(self) -> str:
        if self.failures:
            return "error"
        if not self.blocking():
            return "pass"
        return "warn" if self.warn_only else "fail"


def job_rules(policy: Policy) -> list[Rule]:
    """The rules of the pack that read jobs, configured by the policy (disabled clauses left out)."""
    return [r for r in configured_rules(policy) if r.entity is Job]


def inline_waivers(job: Job) -> list[InlineWaiver]:
    """The waivers a job's manifest carries in its annotations, tags or labels."""
    out = []
    keys = {**job.tags, **job.annotations}
    for key, value in sorted(keys.items()):
        if not (key == WAIVE_KEY or key.startswith((WAIVE_KEY + "-", WAIVE_KEY + "."))):
            continue
        for text in str(value).splitlines():
            if not text.strip():
                continue
            m = WAIVER_RE.match(text)
            if not m or not m.group("reason"):
                raise InputError(f"{key}: {text.strip()!r} is not a waiver; write 'RULE until YYYY-MM-DD: reason'",
                                 path=job.source_file, line=job.source_line)
            try:
                rule = get_rule(m.group("rule")).id
            except KeyError:
                hint = did_you_mean(m.group("rule"), rule_keys())
                raise InputError(f"{key}: no rule {m.group('rule')!r}{hint}", path=job.source_file,
                                 line=job.source_line) from None
            try:
                expires = date.fromisoformat(m.group("date"))
            except ValueError:
                raise InputError(f"{key}: {m.group('date')!r} is not a date like 2027-01-31", path=job.source_file,
                                 line=job.source_line) from None
            out.append(InlineWaiver(rule, expires, m.group("reason"), job.id, job.source_file, job.source_line))
    return out


def apply_inline_waivers(findings: list[Finding], jobs: list[Job], today: date,
                         failures: list[InputError] | None = None) -> list[dict[str, Any]]:
    """Mark the findings a job's own unexpired waivers cover; an expired one waives nothing. With a `failures`
    list, a malformed waiver is recorded there (its job's other findings still stand) instead of raised."""
    status = []
    for job in jobs:
        try:
            waivers = inline_waivers(job)
        except InputError as e:
            if failures is None:
                raise
            failures.append(e)
            continue
        for w in waivers:
            matched = [f for f in findings if f.rule == w.rule and f.resource == job.id]
            if not w.expired(today):
                for f in matched:
                    if f.waiver is None:
                        f.waiver = {"reason": w.reason, "owner": None, "expires": w.expires.isoformat(),
                                    "source": "inline", "file": w.file, "line": w.line}
            state = "expired" if w.expired(today) else ("active" if matched else "unused")
            status.append({"source": "inline", "rule": w.rule, "resource": job.id, "reason": w.reason,
                           "owner": None, "expires": w.expires.isoformat(), "status": state,
                           "matched": len(matched), "file": w.file, "line": w.line})
    return status


def run_gate(policy: Policy, paths: Iterable[str | Path], *, fail_on: Severity | None = Severity.HIGH,
             warn_only: bool = False, today: date | None = None, skip_unknown: bool = False) -> GateResult:
    """Check the manifests under `paths`. Every file is read and the jobs of the good ones judged; a file that
    cannot be read (malformed, a bad value or waiver, a document of a kind the gate does not read) is a failure
    of the result (exit 2). With `skip_unknown` (a pre-commit hook that sees every YAML file) unknown kinds are
    only warned about."""
    today = today or date.today()
    catalog = load_catalog()
    names = [str(p) for p in paths]
    loaded = load_jobs(names, catalog, skip_unknown)
    jobs, files, failures = loaded.jobs, loaded.files, loaded.failures
    if not files and not failures:  # a path that names no manifest is a mistake in the CI job, not a pass
        raise InputError(f"no manifest files (*.yaml, *.yml, *.json) in {', '.join(names) or 'no path given'}: "
                         "nothing to check")
    rules = job_rules(policy)
    ctx = Context(catalog, policy, quarter_of(today))
    findings = run_rules(rules, {Job: jobs}, ctx)
    waivers = [{"source": "policy", **w} for w in apply_waivers(findings, policy, today)]
    waivers += apply_inline_waivers(findings, jobs, today, failures)
    warnings = [f"skipped {s}" for s in loaded.skipped]
    if not jobs and not failures:
        warnings.append(f"no GPU training jobs in {len(files)} file(s): nothing to check")
    for w in waivers:
        if w["status"] == "expired":
            where = f"{w['file']}:{w['line']}: inline " if w["source"] == "inline" else \
                f"{policy.path}:{w['line']}: policy "
            warnings.append(f"{where}waiver for {w['rule']} on {w['resource']} expired on {w['expires']}; "
                            "it no longer waives")
    findings.sort(key=lambda f: (f.file or "", f.line or 0, -f.severity, f.rule, f.resource, f.key))
    failures.sort(key=lambda e: (e.path or "", e.line or 0))
    return GateResult(policy, files, jobs, rules, findings, waivers, warnings, fail_on, warn_only, today, failures)

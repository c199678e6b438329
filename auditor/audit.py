"""One audit's result and its encoding as audit.json; every output format is a view of it. No analysis here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from auditor import __version__
from auditor.audit_model import AuditDoc, Summary
from auditor.auditfile import SCHEMA as AUDIT_SCHEMA
from auditor.errors import EXIT_FINDINGS, EXIT_PARTIAL
from auditor.model import Finding, Severity, money
from auditor.policy import Policy
from auditor.secret_patterns import MASKED_SECRET, SHORT, mask, mask_deep, mask_text, masked_key, secret_entry
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.tables.store import SourceFile


@dataclass
class Audit:
    """One audit's result; every output format is a view of it."""

    window: Window
    policy: Policy
    findings: list[Finding]
    sources: list[SourceFile]
    summary: Summary  # audit_model.py: every section typed
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
    trend: dict[str, Any] | None = None  # the change since `previous` (outputs/trend.py), computed by the core
    jobs: list[dict[str, Any]] = field(default_factory=list)  # every job and sweep with its cost (tables/jobcost.py)

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

    def exit_code(self, fail_on: Severity | None) -> int:
        """3 for a partial audit (a source could not be read completely), else 1 when an active finding is at or
        above `fail_on`, else 0."""
        if self.partial:
            return EXIT_PARTIAL
        worst = self.worst()
        return EXIT_FINDINGS if fail_on is not None and worst is not None and worst >= fail_on else 0

    def to_dict(self, masked: bool = False) -> AuditDoc:
        """The JSON-able audit (audit.json): every report format is rendered from this dict alone. `masked`: as
        the outputs show it, with what looks like a credential masked (secret_patterns.mask_deep); the parts
        that grow with the bill (summary, findings, jobs) are masked as they are encoded (findings and actions
        field by field: _finding, _summary)."""
        small = mask_deep if masked else _same
        doc: AuditDoc = {
            "schema": AUDIT_SCHEMA,
            "tool": {"name": "gpu-auditor", "version": __version__},
            "generated_at": self.stamp().isoformat() + "Z",
            "as_of": self.as_of.isoformat() if self.as_of else None,
            "window": small({"start": self.window.start.isoformat() + "Z",
                             "end": self.window.end.isoformat() + "Z", "label": self.window.label}),
            "policy": small({"name": self.policy.name, "version": self.policy.version, "owner": self.policy.owner,
                             "path": self.policy.path, "currency": self.policy.currency,
                             "rates": _rates(self.policy)}),
            "partial": self.partial,
            "inputs": small({"billing": [_source_dict(s) for s in self.sources], "inventory": self.inventory,
                             "previous": None if self.previous is None else
                             {k: self.previous[k] for k in ("path", "sha256")}}),
            "summary": _summary(self.summary, masked),
            "clauses": _jsonable(self.clauses, masked=masked),
            # a Decimal left in a finding's evidence (GB, hours, percent) is written as its exact text, not a cent
            "findings": [_finding(f, masked) for f in self.findings],
            "baseline": None if self.baseline is None else {
                **small({**self.baseline, "known": len(self.known)}),
                "findings": [_finding(f, masked) for f in self.known]},
            "waivers": small(self.waivers),
            "warnings": small(self.warnings),
            "trend": small(self.trend),
            "jobs": _jsonable(self.jobs, masked=masked),
        }
        return doc


def _same(value: Any) -> Any:
    return value


def _rates(policy: Policy) -> dict[str, Any] | None:
    """The rates the audit converted other currencies with, as the report names them."""
    r = policy.rates
    if r is None:
        return None
    out = {"date": r.date.isoformat(), "source": r.source, "rates": {c: str(v) for c, v in sorted(r.per_unit.items())}}
    return {**out, "path": r.path} if r.path else out


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


def _cents(d: Decimal) -> str:
    return str(money(d))


# The text of a finding or an action that can hold what people wrote (an id, a tag in a message, a team, a path):
# masked. Their other text is the rule's own (its id, name, clause, remediation), labels, digests and money.
_FINDING_TEXT = ("resource", "message", "provider", "account", "region", "owner", "team", "currency", "file",
                 "counted_under")
_ACTION_TEXT = ("resource", "currency", "message", "team", "owner")
_ACTION_MONEY = ("saving", "to_check", "wasted", "wasted_to_check", "cost")


def _finding(f: Finding, masked: bool) -> dict[str, Any]:
    """A finding as audit.json holds it: Finding.to_dict with its evidence and waiver made JSON-able (a Decimal
    in its evidence as its exact text) and, `masked`, its text masked, as _jsonable would make it: field by
    field rather than walked, as an audit can hold a hundred thousand findings."""
    d = f.to_dict()
    if masked:
        _mask_fields(d, _FINDING_TEXT)
    for k in ("evidence", "waiver"):
        if d[k] is not None:
            d[k] = _jsonable(d[k], _exact, masked)
    return d


def _summary(summary: Any, masked: bool) -> Any:
    """The summary made JSON-able (_jsonable), its actions (one per resource with a finding: as many) action by
    action, as _finding writes findings."""
    if not isinstance(summary, dict) or not isinstance(summary.get("actions"), list):
        return _jsonable(summary, masked=masked)
    return {k: [_action(a, masked) for a in v] if k == "actions" else _jsonable(v, masked=masked)
            for k, v in summary.items()}


def _action(a: dict[str, Any], masked: bool) -> dict[str, Any]:
    """An action (figures.actions) as _jsonable would make it: money to the cent, its text masked."""
    d = dict(a)
    for k in _ACTION_MONEY:
        d[k] = _money(d[k])
    d["reasons"] = [{**r, "monthly_savings": _money(r["monthly_savings"])} for r in d["reasons"]]
    if masked:
        _mask_fields(d, _ACTION_TEXT)
        for r in d["reasons"]:
            _mask_fields(r, ("message",))
    return d


def _money(v: Any) -> Any:
    return None if v is None else _cents(v) if v.__class__ is Decimal else _jsonable(v)


def _mask_fields(d: dict[str, Any], keys: tuple[str, ...]) -> None:
    for k in keys:
        v = d[k]
        if v.__class__ is str and len(v) >= SHORT:
            d[k] = mask_text(v)


def _jsonable(v: Any, decimal: Callable[[Decimal], str] = _cents, masked: bool = False) -> Any:
    """For JSON: times as UTC ISO-8601, Decimals by `decimal` (money by default: strings rounded once to the
    cent), through dicts and lists; `masked`: every string and key masked as secret_patterns.mask_deep would
    mask the result (the text of a time or a Decimal never holds a secret). Plain values are handled in the
    loops, not by a call each: an audit has millions of them."""
    if isinstance(v, str):
        return mask(v) if masked else v
    if isinstance(v, Decimal):
        return decimal(v)
    if isinstance(v, datetime):
        return v.isoformat() + "Z"
    if isinstance(v, date):  # a dated policy option (discount_as_of): the day as written
        return v.isoformat()
    if isinstance(v, dict):
        if len(v) <= _FEW and _keys_as_they_are(tuple(v), masked):  # a finding, its evidence: a comprehension
            if not masked:
                return {k: x if x.__class__ in _TEXT_OR_PLAIN else _jsonable(x, decimal) for k, x in v.items()}
            return {k: x if x.__class__ in _PLAIN else (mask_text(x) if len(x) >= SHORT else x)
                    if x.__class__ is str else _jsonable(x, decimal, masked) for k, x in v.items()}
        out = {}
        for k, x in v.items():
            key = k if k.__class__ is str else str(k)
            c = x.__class__
            if c is str:
                y = mask_text(x) if masked and len(x) >= SHORT else x
            elif c in _PLAIN:
                y = x
            else:
                y = _jsonable(x, decimal, masked)
            if not masked:
                out[key] = y
                continue
            shown, maybe_secret = masked_key(key)
            out[shown] = MASKED_SECRET if maybe_secret and secret_entry(key, x if isinstance(x, str) else y) else y
        return out
    if isinstance(v, list | tuple):
        return [(mask_text(x) if masked and len(x) >= SHORT else x) if x.__class__ is str
                else x if x.__class__ in _PLAIN else _jsonable(x, decimal, masked) for x in v]
    return v


_PLAIN = frozenset((int, float, bool, type(None)))  # exactly these classes: JSON as they are
_TEXT_OR_PLAIN = _PLAIN | {str}


_FEW = 64  # a dict of no more keys is a record (a finding, its evidence), whose keys repeat: every finding's do


@lru_cache(maxsize=1 << 12)
def _keys_as_they_are(keys: tuple[Any, ...], masked: bool) -> bool:
    """Whether a dict's keys are all text, and (`masked`) each shown as it is with no value under it that may be
    a credential (masked_key): its entries are then its values alone made JSON-able."""
    return all(k.__class__ is str and (not masked or masked_key(k) == (k, False)) for k in keys)



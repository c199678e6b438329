"""The rule interface and the registry of the rule pack.

A rule is one module in `rules/`, named by its ID. It declares the entity it reads, the policy clause
that sets its options, and a docstring with fixed sections that is its documentation. It yields
findings and does no I/O.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from auditor.model import Finding, Severity
from auditor.schema import Field

if TYPE_CHECKING:
    from auditor.engine import Context

ID_RE = re.compile(r"^[A-Z]{2,5}[0-9]{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
DOC_SECTIONS = ("What it does", "Why it matters", "Example", "How to fix")

# IDs that were used once and must never be given to another rule.
RETIRED: dict[str, str] = {}


class Rule:
    id: ClassVar[str]
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    severity: ClassVar[Severity] = Severity.MEDIUM
    entity: ClassVar[type]
    clause: ClassVar[str]
    options: ClassVar[dict[str, Field]] = {}

    def __init__(self, options: dict[str, Any] | None = None, severity: Severity | None = None):
        self.opts = {k: f.default for k, f in self.options.items()}
        self.opts.update(options or {})
        if severity is not None:
            self.severity = severity

    def opt(self, key: str) -> Any:
        return self.opts[key]

    def check(self, entity: Any, ctx: Context) -> Iterable[Finding]:
        raise NotImplementedError(f"{type(self).__name__} must define check()")

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def doc(cls) -> dict[str, str]:
        return doc_sections(cls.__doc__ or "")

    @classmethod
    def remediation(cls) -> str:
        return " ".join(cls.doc().get("How to fix", "").split())

    def finding(self, entity: Any, ctx: Context, message: str, *, evidence: dict[str, Any],
                cost: Decimal | None = None, monthly_savings: Decimal | None = None,
                currency: str = "USD", key: str = "", resource: str | None = None) -> Finding:
        tags = getattr(entity, "tags", {}) or {}
        team, owner = ctx.attribute(tags)
        return Finding(
            rule=self.id, name=self.name, severity=self.severity, resource=resource or entity.id,
            message=message, entity_type=type(entity).__name__, provider=getattr(entity, "provider", None),
            account=getattr(entity, "account", None), region=getattr(entity, "region", None),
            owner=owner, team=team, evidence=evidence, cost=cost, monthly_savings=monthly_savings,
            currency=currency, remediation=self.remediation(), clause=self.clause,
            file=getattr(entity, "source_file", None), line=getattr(entity, "source_line", None), key=key)


def doc_sections(doc: str) -> dict[str, str]:
    """`## Heading` sections of a rule docstring, plus `summary` (the first line)."""
    lines = [ln[4:] if ln.startswith("    ") else ln for ln in doc.strip().splitlines()]
    out: dict[str, str] = {"summary": lines[0].strip() if lines else ""}
    current = None
    for ln in lines[1:]:
        m = re.match(r"^\s*##\s+(.+?)\s*$", ln)
        if m:
            current = m.group(1)
            out[current] = ""
        elif current:
            out[current] += ln + "\n"
    return {k: v.strip("\n") for k, v in out.items()}


class RuleError(Exception):
    """A rule that breaks the pack's conventions: a bug in the pack, caught by the meta tests."""


_REGISTRY: dict[str, type[Rule]] = {}


def register(cls: type[Rule]) -> type[Rule]:
    rid = getattr(cls, "id", None)
    if not rid or not ID_RE.fullmatch(rid):
        raise RuleError(f"{cls.__name__}: rule id {rid!r} must look like GPU001")
    if rid in RETIRED:
        raise RuleError(f"{rid} is retired ({RETIRED[rid]}) and cannot be reused")
    if rid in _REGISTRY and _REGISTRY[rid] is not cls:
        raise RuleError(f"duplicate rule id {rid}")
    if not NAME_RE.fullmatch(getattr(cls, "name", "")):
        raise RuleError(f"{rid}: name {cls.name!r} must be kebab-case")
    missing = [s for s in DOC_SECTIONS if s not in cls.doc()]
    if missing:
        raise RuleError(f"{rid}: docstring lacks sections {', '.join(missing)}")
    _REGISTRY[rid] = cls
    return cls


def _discover() -> None:
    import auditor.rules as pack

    for mod in pkgutil.iter_modules(pack.__path__):
        importlib.import_module(f"auditor.rules.{mod.name}")


def all_rules() -> list[type[Rule]]:
    if not _REGISTRY:
        _discover()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get_rule(key: str) -> type[Rule]:
    """A rule by ID, name or alias, case-insensitively."""
    k = key.strip().lower()
    for cls in all_rules():
        if k in (cls.id.lower(), cls.name, *[a.lower() for a in cls.aliases]):
            return cls
    raise KeyError(key)


def iter_clauses() -> Iterator[tuple[str, list[type[Rule]]]]:
    by_clause: dict[str, list[type[Rule]]] = {}
    for cls in all_rules():
        by_clause.setdefault(cls.clause, []).append(cls)
    yield from sorted(by_clause.items())

"""The registry of the rule pack: one ID -> rule class map, filled by `@register` as the pack's modules load.

It knows rules only by what they declare (id, name, aliases, clause, docstring), so the policy can be checked
against the pack without importing the rule interface.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from typing import Any

ID_RE = re.compile(r"^[A-Z]{2,5}[0-9]{3}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
DOC_SECTIONS = ("What it does", "Why it matters", "Example", "How to fix")

# IDs that were used once and must never be given to another rule.
RETIRED: dict[str, str] = {}

RuleClass = Any  # a subclass of auditor.rule.Rule


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


_REGISTRY: dict[str, RuleClass] = {}


def register(cls: RuleClass) -> RuleClass:
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


def all_rules() -> list[RuleClass]:
    if not _REGISTRY:
        _discover()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def rule_keys() -> list[str]:
    """Every rule's ID, then every rule's name: what a policy or a command may name a rule by."""
    return [r.id for r in all_rules()] + [r.name for r in all_rules()]


def get_rule(key: str) -> RuleClass:
    """A rule by ID, name or alias, case-insensitively."""
    k = key.strip().lower()
    for cls in all_rules():
        if k in (cls.id.lower(), cls.name, *[a.lower() for a in cls.aliases]):
            return cls
    raise KeyError(key)


def iter_clauses() -> Iterator[tuple[str, list[RuleClass]]]:
    by_clause: dict[str, list[RuleClass]] = {}
    for cls in all_rules():
        by_clause.setdefault(cls.clause, []).append(cls)
    yield from sorted(by_clause.items())


def policy_keys(r) -> list[str]:
    """The policy keys that tune a rule: its clause's options, severity and switch, and what else it reads."""
    clause = f"clauses.{r.clause}"
    return ([f"{clause}.{k}" for k in r.options] + [f"{clause}.severity", f"{clause}.enabled", f"{clause}.text"]
            + list(getattr(r, "policy_keys", ())))

"""A saved audit.json, read back: `report`, `audit --previous`, `audit --baseline` and `email` all start here."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any, cast

from auditor.audit_model import AuditDoc
from auditor.errors import InputError
from auditor.schema import MAX_AMOUNT

SCHEMA = "gpu-auditor/audit@1"
MAX_DEPTH = 64  # audit.json nests about 8 levels; deeper is not one (and would exhaust the renderers' stack)
_AMOUNTS = {"money": False, "moneyOrNull": True, "hours": False}  # schema definitions of amounts: null allowed?
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


@dataclass(frozen=True)
class SavedAudit:
    doc: AuditDoc  # checked against audit.schema.json
    path: Path  # the audit.json itself
    sha256: str


def read_audit(path: Path) -> SavedAudit:
    """An audit folder or its audit.json, checked to be one; the errors a user can cause name the file."""
    file = path / "audit.json" if os.path.isdir(path) else path
    try:
        raw = file.read_bytes()
        doc = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise InputError("no audit.json found here; give an audit folder written by `gpu-auditor audit`, "
                         "or its audit.json", path=str(file)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the audit: {getattr(e, 'strerror', None) or e}", path=str(file)) from None
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg} (column {e.colno})", path=str(file), line=e.lineno) from None
    except RecursionError:
        raise InputError(f"not an audit: nested more than {MAX_DEPTH} levels deep", path=str(file)) from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"not a gpu-auditor audit.json: schema is {found!r}, expected {SCHEMA!r}", path=str(file))
    for key, kind in (("window", dict), ("summary", dict), ("findings", list), ("policy", dict)):
        if not isinstance(doc.get(key), kind):
            raise InputError(f"not a complete audit: {key!r} is missing or not a {kind.__name__}", path=str(file))
    _check_depth(doc, str(file))
    problem = _mismatch(doc, _schema(), "")
    if problem:
        raise InputError(problem, path=str(file))
    # checked against audit.schema.json above (tests/test_typed.py: its keys are the model's)
    return SavedAudit(cast(AuditDoc, doc), file, hashlib.sha256(raw).hexdigest())


@cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((files("auditor.data") / "audit.schema.json").read_text(encoding="utf-8"))
    return schema


def _check_depth(doc: Any, where: str) -> None:
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"not an audit: nested more than {MAX_DEPTH} levels deep", path=where)
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values()]
        elif isinstance(value, list):
            stack += [(v, depth + 1) for v in value]


def _mismatch(value: Any, schema: dict[str, Any], path: str) -> str | None:
    """The first place where a saved audit does not have the type audit.schema.json gives it (amounts must
    be decimal numbers), as `JSON.PATH: what is wrong`; None when every value has its type. Keys the schema
    requires are not insisted on: an audit.json from an earlier version may lack some."""
    where = path or "(top level)"
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        if name in _AMOUNTS:
            return None if value is None and _AMOUNTS[name] else _amount_problem(value, where)
        return _mismatch(value, _schema()["$defs"][name], path)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    if kinds and not any(_is(value, k) for k in kinds):
        return f"{where}: expected {' or '.join(kinds)}, found {_json_kind(value)} {_short(value)}"
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            problem = sub and _mismatch(v, sub, f"{path}.{k}" if path else k)
            if problem:
                return problem
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            problem = _mismatch(v, schema["items"], f"{path}[{i}]")
            if problem:
                return problem
    return None


def _is(value: Any, kind: str) -> bool:
    if kind in ("number", "integer"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES.get(kind, object))


def _amount_problem(value: Any, where: str) -> str | None:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            amount = Decimal(str(value).strip())
        except (InvalidOperation, ValueError):
            amount = None
        if amount is not None and amount.is_finite():
            if abs(amount) < MAX_AMOUNT:
                return None
            return f"{where}: {_short(value)} is out of range: an amount has at most 20 digits before the point"
    return f"{where}: {_short(value)} is not an amount (a decimal number like 12.34)"


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "text", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."

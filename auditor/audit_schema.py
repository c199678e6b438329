"""audit.json's JSON schema generated from its typed model (audit_model.py: AuditDoc and the sections of its
summary), checked in as docs/audit.schema.json; tests/test_typed.py checks that the file is what this generates
and that an audit validates against it. A section the model types only as an object (a finding, a job) is an
object here; auditor/data/audit.schema.json, which `report` reads saved audits with, says more of those, and names
the same keys as the model (checked there too).

    python -m auditor.audit_schema > docs/audit.schema.json"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import Any, NotRequired, Union

from auditor import audit_model
from auditor.auditfile import SCHEMA as AUDIT_SCHEMA

DEFINITIONS = {  # the text forms of audit_model's Annotated kinds
    "money": {"type": "string", "pattern": "^-?[0-9]+\\.[0-9]{2}$", "description": "rounded once to the cent"},
    "hours": {"type": "string", "pattern": "^-?[0-9]+\\.[0-9]$", "description": "GPU-hours, one decimal"},
    "time": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$", "description": "UTC, ISO-8601"},
}
_PLAIN = {str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"}, bool: {"type": "boolean"},
          type(None): {"type": "null"}}


def schema() -> dict[str, Any]:
    """The JSON schema of audit.json, from audit_model.AuditDoc."""
    defs: dict[str, Any] = dict(DEFINITIONS)
    top = _of(audit_model.AuditDoc, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"{AUDIT_SCHEMA}, from its model",
            **top, "$defs": dict(sorted(defs.items()))}


def _of(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of one type of the model; a TypedDict becomes a definition of its own, referred to by name."""
    if typing.is_typeddict(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # taken before its fields, which may refer to it
            defs[name] = _typed_dict(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return {"$ref": f"#/$defs/{args[1]}"}
    if origin in (Union, types.UnionType):
        options = [_of(a, defs) for a in args]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin in (dict, Mapping):
        return {"type": "object", "additionalProperties": _of(args[1], defs)}
    if origin is list:
        return {"type": "array", "items": _of(args[0], defs)}
    if tp is Any:
        return {}
    if tp in _PLAIN:
        return dict(_PLAIN[tp])
    raise TypeError(f"audit_model: no JSON schema for {tp!r}")


def _typed_dict(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """An object of exactly the TypedDict's keys; those NotRequired (an earlier audit.json may lack them) are not
    required."""
    hints = typing.get_type_hints(tp, include_extras=True)
    required = [k for k, v in hints.items() if typing.get_origin(v) is not NotRequired]
    props = {k: _of(typing.get_args(v)[0] if typing.get_origin(v) is NotRequired else v, defs)
             for k, v in hints.items()}
    doc = " ".join((tp.__doc__ or "").split())
    return {"type": "object", **({"description": doc} if doc else {}), "required": required, "properties": props,
            "additionalProperties": False}


def text() -> str:
    """The schema as the checked-in file holds it."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(text(), end="")

"""A saved audit.json, read back: `report`, `audit --previous`, `audit --baseline` and `email` all start here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.errors import InputError

SCHEMA = "gpu-auditor/audit@1"


@dataclass(frozen=True)
class SavedAudit:
    doc: dict[str, Any]
    path: Path  # the audit.json itself
    sha256: str


def read_audit(path: Path) -> SavedAudit:
    """An audit folder or its audit.json, checked to be one; the errors a user can cause name the file."""
    file = path / "audit.json" if path.is_dir() else path
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
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"not a gpu-auditor audit.json: schema is {found!r}, expected {SCHEMA!r}", path=str(file))
    for key, kind in (("window", dict), ("summary", dict), ("findings", list), ("policy", dict)):
        if not isinstance(doc.get(key), kind):
            raise InputError(f"not a complete audit: {key!r} is missing or not a {kind.__name__}", path=str(file))
    return SavedAudit(doc, file, hashlib.sha256(raw).hexdigest())

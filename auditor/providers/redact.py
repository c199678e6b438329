"""Secrets that ride along in billing data and inventories, removed before anything is stored or shown.

A resource id or a tag can hold a presigned S3 or GCS URL, an Azure SAS URL or a URL with a password in it
(a checkpoint location, a dataset link). Whoever holds such a URL holds the access it grants, and an audit
report travels by e-mail. So every string read from an export or an inventory keeps its URL's scheme, host
and path (enough to know the object) and loses its query string and user info, and signature or token
parameters outside a URL lose their values. The same rules exist as a Python function (inventories, error
messages) and as SQL (billing lines, never looped over in Python). Token-shaped secrets (access keys, GitHub
tokens, JWTs, ...) are masked later, in every output: auditor/secret_patterns.py.
"""

from __future__ import annotations

import re
from typing import Any

from auditor.secret_patterns import SECRET_PARAMS  # the one list of credential names

MARK = "REDACTED"

# (pattern, replacement), applied in order; RE2 (DuckDB) and Python `re` read these alike. A URL ends at a
# space or a quote, so a URL inside JSON text (a FOCUS Tags cell) is redacted without breaking the JSON.
RULES = (
    # scheme://user:password@host -> scheme://REDACTED@host
    (r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s?#@\"'\\]+@", r"\1" + MARK + "@"),
    # scheme://host/path?query -> scheme://host/path?REDACTED
    (r"([A-Za-z][A-Za-z0-9+.-]*://[^\s?#\"'\\]*)\?[^\s#\"'\\]*", r"\1?" + MARK),
    # sig=... outside a URL (a SAS token pasted on its own, or a URL whose slashes JSON escaped)
    (rf"(?i)(^|[^A-Za-z0-9_-])({SECRET_PARAMS})=[^&\s\"',;\\]+", r"\1\2=" + MARK),
)
_COMPILED = tuple((re.compile(p), r.replace(r"\1", r"\g<1>").replace(r"\2", r"\g<2>")) for p, r in RULES)


def redact(text: str) -> str:
    """`text` without URL query strings, URL passwords and credential parameters."""
    if not isinstance(text, str) or not ("://" in text or "=" in text):
        return text
    for pattern, replacement in _COMPILED:
        text = pattern.sub(replacement, text)
    return text


def redact_deep(value: Any) -> Any:
    """Every string in a JSON-like document, redacted (keys too: a tag key is a string from the source)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_deep(k): redact_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_deep(v) for v in value]
    return value


def redact_sql(expr: str) -> str:
    """The SQL of `redact` over a VARCHAR expression. Two `contains` tests let ordinary values through without
    running a regex, so this costs next to nothing per billing line."""
    out = expr
    for pattern, replacement in RULES:
        out = f"regexp_replace({out}, '{pattern.replace(chr(39), chr(39) * 2)}', '{replacement}', 'g')"
    return f"(CASE WHEN contains({expr}, '://') OR contains({expr}, '=') THEN {out} ELSE {expr} END)"

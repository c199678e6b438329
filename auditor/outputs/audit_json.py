"""audit.json written as it goes: the text of `json.dumps(doc, indent=2, ensure_ascii=False)` (passed through
text.json_text), byte for byte, but produced one top-level entry and one list item (one finding, one job) at a
time, so a 100,000-finding audit never holds its whole text in memory.

The standard library indents only in its pure-Python encoder, which yields every token separately (millions of
small writes at scale); here a value is turned into text by one recursive join, with C's string escaping."""

from __future__ import annotations

import math
from collections.abc import Mapping
from json.encoder import encode_basestring  # the C escaping json.dumps(ensure_ascii=False) uses
from typing import Any, TextIO

from auditor.text import json_text

STEP = "  "  # indent=2


def write_json(doc: Mapping[str, Any], fh: TextIO) -> None:
    """`doc` as indented JSON into `fh`, with a final newline; the lists at its top level (findings, jobs) and
    in its top-level sections item by item."""
    if not doc:
        fh.write("{}\n")
        return
    fh.write("{")
    sep = "\n"
    for key, value in doc.items():
        fh.write(f"{sep}{STEP}{json_text(_key(key))}: ")
        sep = ",\n"
        if isinstance(value, dict) and value:
            fh.write("{")
            inner = "\n"
            for k, v in value.items():
                fh.write(f"{inner}{STEP * 2}{json_text(_key(k))}: ")
                inner = ",\n"
                if isinstance(v, list | tuple):
                    _write_list(v, STEP * 2, fh)
                else:
                    fh.write(json_text(_text(v, STEP * 2)))
            fh.write(f"\n{STEP}}}")
        elif isinstance(value, list | tuple):
            _write_list(value, STEP, fh)
        else:
            fh.write(json_text(_text(value, STEP)))
    fh.write("\n}\n")


def _write_list(items: list[Any] | tuple[Any, ...], indent: str, fh: TextIO) -> None:
    if not items:
        fh.write("[]")
        return
    inner = indent + STEP
    fh.write("[")
    sep = "\n"
    for item in items:
        fh.write(f"{sep}{inner}{json_text(_text(item, inner))}")
        sep = ",\n"
    fh.write(f"\n{indent}]")


def _text(value: Any, indent: str) -> str:
    """`value` as json.dumps(indent=2, ensure_ascii=False) writes it on a line indented by `indent`."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    inner = indent + STEP
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return f"[\n{inner}" + f",\n{inner}".join([encode_basestring(v) if v.__class__ is str else _text(v, inner)
                                                      for v in value]) + f"\n{indent}]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        # Most of an audit's values are text, null or a flag, under text keys: written here, not by a call each.
        sep = f",\n{inner}"
        return f"{{\n{inner}" + sep.join([
            f"{_KEYS.get(k) or _key(k)}: "
            f"{encode_basestring(v) if v.__class__ is str else 'null' if v is None else _text(v, inner)}"
            for k, v in value.items()]) + f"\n{indent}}}"
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_KEYS: dict[Any, str] = {}  # the keys' text: an audit's dicts repeat their keys (every finding has the same)
_FEW_KEYS = 1 << 12


def _key(key: Any) -> str:
    """A dict key as json.dumps writes it: text, or a number, true, false or null made text."""
    if isinstance(key, str):
        text = encode_basestring(key)
        if len(_KEYS) < _FEW_KEYS and key.__class__ is str:
            _KEYS[key] = text
        return text
    if key is True or key is False or key is None:
        return f'"{"true" if key is True else "false" if key is False else "null"}"'
    if isinstance(key, int):
        return f'"{int.__repr__(key)}"'
    if isinstance(key, float):
        return f'"{_float(key)}"'
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


def _float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)

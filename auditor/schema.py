"""A small declarative validator for the policy and the inventory snapshot.

Errors name the file, the line (where the document format keeps one) and the key, and suggest the
nearest valid key for a typo.
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from auditor.errors import InputError
from auditor.text import did_you_mean

Path = tuple[str | int, ...]
MAX_AMOUNT = Decimal(10) ** 20  # what DECIMAL(38,18), the type of every amount, holds before the point


@dataclass(frozen=True)
class Field:
    kind: str  # str, scalar, int, number, money, bool, date, datetime, list, map, record, any, or a TYPED text kind
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    item: Field | None = None  # list items and map values
    keys: Field | None = None  # map keys (text), checked as a value of this field
    fields: dict[str, Field] = field(default_factory=dict)  # record keys
    doc: str = ""


def record(required: bool = False, doc: str = "", **fields: Field) -> Field:
    return Field("record", required=required, fields=fields, doc=doc)


def record_of(fields: dict[str, Field]) -> Field:
    """A record of keys known only at run time (rule options): a key may be any name, `doc` or `required`
    included, which `record(**fields)` would take as its own arguments."""
    return Field("record", fields=fields)


def fmt_path(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


class Validator:
    """Checks a document against a Field. By default the first error is raised; with `collect`, every error is
    kept in `errors` (the policy: `policy validate` names them all) and a bad value reads as missing."""

    def __init__(self, source: str, locate: Callable[[Path], int | None] = lambda p: None, collect: bool = False,
                 raw: Callable[[Path], str | None] = lambda p: None):
        self.source = source
        self.locate = locate
        self.collect = collect
        self.raw = raw  # a scalar as written (YAML): an amount is read from its digits, not from a float
        self.errors: list[InputError] = []

    def fail(self, path: Path, message: str) -> InputError:
        return InputError(f"{fmt_path(path)}: {message}", path=self.source, line=self.locate(path))

    def _part(self, value: Any, spec: Field, path: Path) -> Any:
        """One key's or item's value checked; in collect mode an error is kept and the value reads as None."""
        try:
            return self.check(value, spec, path)
        except InputError as e:
            if not self.collect:
                raise
            self.errors.append(e)
            return None

    def check(self, value: Any, spec: Field, path: Path = ()) -> Any:
        kind = spec.kind
        if value is None:
            if spec.required:
                raise self.fail(path, "is required")
            return spec.default
        if kind == "any":
            return value
        if kind == "record":
            return self._record(value, spec, path)
        if kind == "list":
            if not isinstance(value, list):
                raise self.fail(path, f"expected a list, got {_kind_of(value)}")
            return [self._part(v, spec.item, path + (i,)) for i, v in enumerate(value)] if spec.item else value
        if kind == "map":
            if not isinstance(value, dict):
                raise self.fail(path, f"expected a mapping, got {_kind_of(value)}")
            if spec.keys:
                for k in value:
                    self._part(str(k), spec.keys, path + (str(k),))
            return {str(k): self._part(v, spec.item, path + (str(k),)) if spec.item else v
                    for k, v in value.items()}
        return self._scalar(value, spec, path)

    def _record(self, value: Any, spec: Field, path: Path) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_kind_of(value)}")
        for key in value:
            if key not in spec.fields:
                hint = did_you_mean(str(key), spec.fields, otherwise=f"; valid keys: {', '.join(sorted(spec.fields))}")
                error = self.fail(path + (str(key),), f"unknown key {key!r}{hint}")
                if not self.collect:
                    raise error
                self.errors.append(error)
        return {k: self._part(value.get(k), f, path + (k,)) for k, f in spec.fields.items()}

    def _scalar(self, value: Any, spec: Field, path: Path) -> Any:
        kind = spec.kind
        if kind == "str":
            if not isinstance(value, str):
                raise self.fail(path, f"expected text, got {_kind_of(value)} {value!r}")
            if spec.choices and value not in spec.choices:
                raise self.fail(path, f"{value!r} is not one of {', '.join(spec.choices)}"
                                      f"{did_you_mean(value, spec.choices)}")
            return value
        if kind in TYPED:  # text with a meaning, checked here so that every command refuses it alike
            if not isinstance(value, str):
                raise self.fail(path, f"expected {TYPED[kind][0]}, got {_kind_of(value)} {value!r}")
            problem = TYPED[kind][1](value)
            if problem:
                raise self.fail(path, f"{value!r} {problem}")
            return value
        if kind == "scalar":  # text, or a number meant as text (`version: 2026.3`)
            if isinstance(value, dict | list):
                raise self.fail(path, f"expected a single value, got {_kind_of(value)}")
            return str(value)
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.fail(path, f"expected true or false, got {value!r}")
            return value
        if kind in ("int", "number", "money"):
            if isinstance(value, bool) or not isinstance(value, int | float | Decimal) or \
                    (kind == "int" and not isinstance(value, int)):
                want = "a whole number" if kind == "int" else "a number"
                raise self.fail(path, f"expected {want}, got {_kind_of(value)} {value!r}")
            if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
                raise self.fail(path, f"expected a finite number, got {value!r}")
            if spec.minimum is not None and value < spec.minimum:
                raise self.fail(path, f"must be at least {_num(spec.minimum)}, got {value}")
            if spec.maximum is not None and value > spec.maximum:
                raise self.fail(path, f"must be at most {_num(spec.maximum)}, got {value}")
            if kind == "money":
                try:
                    amount = Decimal(str(value))
                except InvalidOperation:
                    raise self.fail(path, f"not an amount: {value!r}") from None
                written = self.raw(path)
                if written is not None:  # exact: `0.1` as written, not the float nearest to it (else as parsed)
                    with contextlib.suppress(InvalidOperation):
                        amount = Decimal(written.replace("_", ""))
                if abs(amount) >= MAX_AMOUNT:
                    raise self.fail(path, f"{value} is out of range: an amount has at most 20 digits before the "
                                          "decimal point (amounts are DECIMAL(38,18))")
                return amount
            return value
        if kind == "date":
            if isinstance(value, datetime):
                return value.date()
            if isinstance(value, date):
                return value
            try:
                return date.fromisoformat(str(value))
            except ValueError:
                raise self.fail(path, f"expected a date like 2027-01-31, got {value!r}") from None
        if kind == "datetime":
            return parse_datetime(value, lambda: self.fail(path, f"expected a UTC time like "
                                                                 f"2026-07-01T00:00:00Z, got {value!r}"))
        raise AssertionError(f"unknown field kind {kind}")


DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(y|mo|w|d|h|min|m|s)")
DURATION_UNITS = {"y": 365 * 86400, "mo": 30 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "min": 60, "m": 60,
                  "s": 1}
TAG_KEY = re.compile(r"[\w .:/=+\-@]{1,128}")  # AWS tag keys (GCP label keys and Azure tag names are narrower)
REGION = re.compile(r"[a-z0-9*?\[\]-]{2,40}")


def parse_duration(text: str) -> timedelta:
    """`90m`, `1h30m`, `7d`, `1y` (365 days), `6mo` (30 days each) as a timedelta; ValueError otherwise."""
    compact = text.strip().lower().replace(" ", "")
    parts = DURATION.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise ValueError(text)
    return timedelta(seconds=sum(float(n) * DURATION_UNITS[u] for n, u in parts))


def _duration_problem(text: str) -> str | None:
    try:
        return None if parse_duration(text) > timedelta(0) else "is no time; give one like 90m, 12h, 7d or 1y"
    except ValueError:
        return "is not a duration like 90m, 1h30m, 7d or 1y (units y, mo, w, d, h, m, s)"


def _regex_problem(text: str) -> str | None:
    try:
        re.compile(text)
    except re.error as e:
        return f"is not a valid regular expression: {e.msg} at position {e.pos}"
    return None


def _tag_problem(text: str) -> str | None:
    if text != text.strip() or not TAG_KEY.fullmatch(text):
        return ("is not a tag key: 1 to 128 letters, digits, spaces and _ . : / = + - @, "
                "without leading or trailing spaces")
    return None


def _gpu_problem(text: str) -> str | None:
    from auditor.providers.catalog import load_catalog  # the catalog is read only when a GPU option is written
    from auditor.providers.manifests.common import OTHER_NAMES, family_named
    from auditor.providers.manifests.pods import OTHER_ACCELERATORS, OTHER_PREFIXES

    models = list(load_catalog().gpus)
    pattern = text.strip().lower()
    if any(fnmatch.fnmatchcase(m.lower(), pattern) for m in models):
        return None
    # Accelerators that are not NVIDIA GPUs are named by their family (TPU, Inferentia) or their own name (tpu-v5p*).
    families = {f for _, f in OTHER_NAMES} | set(OTHER_ACCELERATORS.values()) | set(OTHER_PREFIXES.values())
    if any(fnmatch.fnmatchcase(f.lower(), pattern) for f in families) or family_named(pattern.rstrip("*")):
        return None
    return f"names no GPU model of the catalog{did_you_mean(text.strip(), models)}"


def _region_problem(text: str) -> str | None:
    if not REGION.fullmatch(text.strip().lower()):
        return "is not a region code like us-east-1, europe-west4 or eastus (a glob such as eu-* is allowed)"
    return None


METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _metric_problem(text: str) -> str | None:
    if not METRIC.fullmatch(text):
        return "is not a Prometheus metric name: letters, digits, _ and :, not starting with a digit"
    return None


# Kinds of text with a meaning: (what it is, for errors; its check: why a value is refused, or None).
TYPED: dict[str, tuple[str, Callable[[str], str | None]]] = {
    "regex": ("a regular expression", _regex_problem),
    "duration": ("a duration like 90m or 7d", _duration_problem),
    "tag": ("a tag key", _tag_problem),
    "gpu": ("a GPU model such as A100 (a glob such as A100* is allowed)", _gpu_problem),
    "region": ("a region code such as us-east-1", _region_problem),
    "metric": ("a Prometheus metric name such as training_tokens_total", _metric_problem),
}


def parse_datetime(value: Any, error: Callable[[], Exception]) -> datetime:
    """An ISO-8601 time as a naive UTC datetime (times are UTC throughout)."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    else:
        try:
            dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise error() from None
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt


def _kind_of(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "text", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _num(x: float) -> str:
    """2147483647, not 2.14748e+09: a limit is shown as written."""
    return str(int(x)) if float(x).is_integer() else str(x)

"""SQL building blocks the billing readers share: resolve a column whatever its spelling, quote, cast."""

from __future__ import annotations

from auditor.providers.billing.detect import norm
from auditor.sql import lit, q

MONEY = "DECIMAL(38,18)"


def money(expr: str) -> str:
    return f"CAST({expr} AS {MONEY})"


def timestamp(expr: str) -> str:
    """Any ISO-8601 spelling (`2023-11-01T00:00:00.000Z`, `2024-09-18 22:00:00`) to a UTC timestamp."""
    return f"timezone('UTC', CAST({expr} AS TIMESTAMPTZ))"


class Columns:
    """The columns one file has, looked up by any spelling: `lineItem/UsageType` finds
    `line_item_usage_type` too. An absent column reads as NULL, since export column sets vary."""

    def __init__(self, names: tuple[str, ...] | list[str], fields: tuple[tuple[str, str], ...] = (),
                 types: tuple[tuple[str, str], ...] = ()):
        self.names = tuple(names)
        self.fields = dict(fields)  # nested fields: dotted name -> SQL path
        self.types = dict(types)  # Parquet and JSON column types; CSV columns are all text
        self.by_key: dict[str, str] = {}
        for n in self.names:
            self.by_key.setdefault(norm(n), n)

    def _sql(self, name: str) -> str:
        return self.fields.get(name) or q(name)

    def name(self, *candidates: str) -> str | None:
        for c in candidates:
            found = self.by_key.get(norm(c))
            if found is not None:
                return found
        return None

    def ref(self, *candidates: str) -> str:
        found = self.name(*candidates)
        return self._sql(found) if found else "NULL"

    def text(self, *candidates: str) -> str:
        """The column as trimmed text, with empty strings as NULL."""
        found = self.name(*candidates)
        return f"NULLIF(trim(CAST({self._sql(found)} AS VARCHAR)), '')" if found else "CAST(NULL AS VARCHAR)"

    def first_text(self, *candidates: str) -> str:
        """The first non-empty of several columns (each present one is tried in turn)."""
        parts = [self.text(c) for c in candidates if self.name(c)]
        if not parts:
            return "CAST(NULL AS VARCHAR)"
        return parts[0] if len(parts) == 1 else f"COALESCE({', '.join(parts)})"

    def money(self, *candidates: str) -> str:
        found = self.name(*candidates)
        return money(self._sql(found)) if found else f"CAST(NULL AS {MONEY})"

    def timestamp(self, *candidates: str) -> str:
        found = self.name(*candidates)
        return timestamp(self._sql(found)) if found else "CAST(NULL AS TIMESTAMP)"


def case_map(expr: str, mapping: dict[str, str], default: str = "NULL") -> str:
    """A SQL CASE that maps exact values of expr, for small lookup tables kept in Python."""
    if not mapping:
        return default
    whens = " ".join(f"WHEN {lit(k)} THEN {lit(v)}" for k, v in mapping.items())
    return f"(CASE {expr} {whens} ELSE {default} END)"

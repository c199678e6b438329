"""SQL building blocks the billing readers share: resolve a column whatever its spelling, quote, cast."""

from __future__ import annotations

import re

from auditor.errors import InputError, InputErrors
from auditor.providers.billing.csv_dialect import PLAIN_NUMBER
from auditor.providers.billing.detect import norm
from auditor.sql import lit, q

MONEY = "DECIMAL(38,18)"
SUM_TOO_LARGE = ("more than an amount holds (at most 20 digits before the decimal point), though each cost is "
                 "within it: no bill is this large; check the cost columns")

# The column types (DuckDB's names, from the file's schema) a reader accepts for each kind of value: text is
# always accepted (its values are checked line by line as they are read), NULL is a column with no value at all.
_TEXT = {"VARCHAR", "JSON", "NULL"}
_NUMBERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL", "VARINT", "BIGNUM"}
_TIMES = {"TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS",
          "DATE"}
ACCEPTED = {"money": (_NUMBERS | _TEXT, "a number (or text holding one)"),
            "time": (_TIMES | _TEXT, "a timestamp (or text holding an ISO-8601 time)"),
            "date": (_TIMES | _TEXT, "a date (or text holding one)")}
_NOT_TEXT = ("STRUCT", "MAP", "LIST", "UNION", "BLOB", "BIT")  # what an id, a name or a tag value cannot be


# A tag key as the audit compares keys: case and white space ignored, anywhere in the key, so that a key
# Context.tag reads (stray spaces around it) is always kept by the store's filter (`kept_tags_sql`).
_SPACE = r"[\s\p{Z}\x{85}\x{1c}-\x{1f}]"


def folded_tag_key(key: str) -> str:
    return "".join(key.split()).lower()


def kept_tags_sql(tags: str, keys: frozenset[str]) -> str:
    """The entries of a tag map whose folded key is one of `keys` (folded): the tags the audit reads."""
    names = ", ".join(lit(k) for k in sorted(keys))
    return (f"map_from_entries(list_filter(map_entries({tags}), "
            f"lambda e: lower(regexp_replace(e.key, {lit(_SPACE)}, '', 'g')) IN ({names})))")


def base_type(duckdb_type: str) -> str:
    """`DECIMAL(18,2)` -> DECIMAL, `VARCHAR[]` -> LIST, `STRUCT(a INT)` -> STRUCT."""
    t = duckdb_type.strip().strip('"').upper()
    return "LIST" if t.endswith("]") else t.split("(", 1)[0].strip()


def money(expr: str, text: bool = False) -> str:
    """`expr` as an amount; `text`: `expr` is text, which must be a plain number (PLAIN_NUMBER). DuckDB's cast
    reads more as a number: `1_000` (a digit separator: 1000) and `1e3.`, which no bill means. Such text is made
    to fail the cast, as `$1,000` does, so the read stops and diagnose.py names it."""
    if text:
        expr = f"CASE WHEN NOT ({expr} SIMILAR TO {lit(PLAIN_NUMBER)}) THEN 'not a number: ' || {expr} ELSE {expr} END"
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
        # The top-level columns as the read names them: a nested field is reached through its column, a twin in
        # case of an earlier column (two AWS tags) is read under another name (csv_dialect.unique_names)
        self.top = [n for n in self.names if n not in self.fields] + [
            v[1:-1].replace('""', '"') for v in self.fields.values() if re.fullmatch(r'"(?:[^"]|"")*"', v)]
        self.used: dict[str, str] = {}  # column -> what a reader reads it as: money, time or text (check_types)
        self.by_key: dict[str, str] = {}
        self.twins: dict[str, list[str]] = {}  # spellings of one column (`lineItem/UnblendedCost` and
        for n in self.names:                   # `line_item_unblended_cost`) that the file has both of
            if self.by_key.setdefault(norm(n), n) != n:
                self.twins.setdefault(self.by_key[norm(n)], [self.by_key[norm(n)]]).append(n)
        self.ambiguous: set[str] = set()  # used columns that have twins: refused by check_types
        # The tag keys (folded) the audit reads, None: every key. A reader with a column per tag reads only
        # those columns (`reads_tag`); the store drops the other keys of every tag map (kept_tags_sql).
        self.tag_keys: frozenset[str] | None = None

    def reads_tag(self, key: str) -> bool:
        return self.tag_keys is None or folded_tag_key(key) in self.tag_keys

    def sql(self, name: str) -> str:
        """The SQL of the column of this very name (a twin in case is read under another: `..._1`)."""
        return self.fields.get(name) or q(name)

    def value(self, *candidates: str) -> str:
        """A column read as an amount or a time: where the file's schema says text (Parquet or JSON written from a
        spreadsheet or a CSV), an empty value is no value, as it is in a CSV."""
        found = self.name(*candidates)
        if not found:
            return "NULL"
        sql = self.sql(found)
        return f"NULLIF(trim({sql}), '')" if base_type(self.types.get(found, "")) == "VARCHAR" else sql

    def name(self, *candidates: str) -> str | None:
        for c in candidates:
            found = self.by_key.get(norm(c))
            if found is not None:
                if found in self.twins:
                    self.ambiguous.add(found)
                return found
        return None

    def ref(self, *candidates: str) -> str:
        found = self.name(*candidates)
        return self.sql(found) if found else "NULL"

    def text(self, *candidates: str) -> str:
        """The column as trimmed text, with empty strings as NULL."""
        found = self.name(*candidates)
        if found:
            self.used.setdefault(found, "text")
        return f"NULLIF(trim(CAST({self.sql(found)} AS VARCHAR)), '')" if found else "CAST(NULL AS VARCHAR)"

    def raw_text(self, *candidates: str) -> str:
        """The column as text, untrimmed (a test of what it contains, which trimming does not change)."""
        found = self.name(*candidates)
        return f"CAST({self.sql(found)} AS VARCHAR)" if found else "CAST(NULL AS VARCHAR)"

    def first_text(self, *candidates: str) -> str:
        """The first non-empty of several columns (each present one is tried in turn)."""
        parts = [self.text(c) for c in candidates if self.name(c)]
        if not parts:
            return "CAST(NULL AS VARCHAR)"
        return parts[0] if len(parts) == 1 else f"COALESCE({', '.join(parts)})"

    def money(self, *candidates: str) -> str:
        found = self.name(*candidates)
        if found:
            self.used[found] = "money"
        return money(self.value(found), self.is_text(found)) if found else f"CAST(NULL AS {MONEY})"

    def is_text(self, name: str) -> bool:
        """Whether the column is text: every CSV column, a Parquet or JSON column of VARCHAR."""
        return base_type(self.types.get(name, "VARCHAR")) == "VARCHAR"

    def timestamp(self, *candidates: str) -> str:
        found = self.name(*candidates)
        if found:
            self.used[found] = "time"
        return timestamp(self.value(found)) if found else "CAST(NULL AS TIMESTAMP)"


def case_map(expr: str, mapping: dict[str, str], default: str = "NULL") -> str:
    """The value of expr looked up in a lookup table kept in Python (text to text), else `default`: a MAP
    literal, which the engine builds once a query. A CASE of a WHEN a value was planned (and, on Spark, compiled)
    branch by branch on every read: Azure's 500 region spellings, twice over, made 37 KB of its reader's SQL and
    most of the time a small file took to read (1.06 s of CPU for one line; 0.37 s as a MAP)."""
    if not mapping:
        return default
    pairs = ", ".join(f"{lit(k)}: {lit(v)}" for k, v in mapping.items())
    found = f"map_extract_value(MAP {{{pairs}}}, {expr})"
    return found if default == "NULL" else f"COALESCE({found}, {default})"


def check_types(cols: Columns, checks: list[tuple[str, str]], path: str) -> None:
    """Refuse a file that has a column the reader uses in two spellings (which holds the money?), or whose
    schema gives a column the reader uses a type it cannot read as what it reads it for:
    a cost column of BOOLEAN was summed as 1 a line, without a word. Every such column is named, with the type
    found (one line each). CSV columns are text, and pass; their values are checked as they are read."""
    errors = [InputError(f"the file has {' and '.join(map(repr, cols.twins[c]))}, two spellings of one column; "
                         "gpu-auditor cannot tell which to read (remove one)", path=path, column=c)
              for c in sorted(cols.ambiguous)]
    for column, kind in {**cols.used, **dict(checks)}.items():
        found = cols.types.get(column)
        if not found:
            continue
        if kind in ACCEPTED and base_type(found) not in ACCEPTED[kind][0]:
            errors.append(InputError(f"the column is of type {found}; gpu-auditor reads it as {ACCEPTED[kind][1]}",
                                     path=path, column=column))
        elif kind == "text" and base_type(found) in _NOT_TEXT:
            errors.append(InputError(f"the column is of type {found}; gpu-auditor reads it as text (an id, a name "
                                     "or a value)", path=path, column=column))
    InputErrors.raise_if_any(errors)

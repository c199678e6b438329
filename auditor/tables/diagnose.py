"""What is wrong with a billing file DuckDB could not read, in one line that names the file, the line and the
column: the first value a reader's check refuses, a line too long, a ragged row, a stray quote."""

from __future__ import annotations

import csv
import re
from itertools import islice

import duckdb

from auditor.errors import AuditorError, InputError, out_of_memory
from auditor.providers.billing import azure, gcp
from auditor.providers.billing.columns import MONEY, SUM_TOO_LARGE, Columns
from auditor.providers.billing.csv_dialect import PLAIN_NUMBER, open_bytes
from auditor.providers.billing.detect import MAX_LINE, Sniffed, gzip_line_over
from auditor.providers.redact import redact
from auditor.sql import lit


def csv_reason(error: str) -> str:
    """What is wrong, in words, from a DuckDB read error. Never its `Original Line:` echo: a line can be megabytes
    long, and can hold what should not be printed."""
    if m := re.search(r"Maximum line size of (\d+) bytes exceeded", error):
        return f"the line is longer than {int(m.group(1)):,} bytes, the longest line gpu-auditor reads"
    if m := re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", error):
        return f"the line has {m.group(2)} fields where the header has {m.group(1)}"
    if "unterminated quote" in error:
        return "a quoted value is never closed (a stray '\"')"
    if "Overflow in" in error:  # the sum of the lines of one group, each within the limit
        return f"the costs add up to {SUM_TOO_LARGE}"
    if "Map keys must be unique" in error:  # a repeated label record (GCP) or CUR 2.0's tags text: no line named
        return "a line's tags or labels name one key twice; which value is meant cannot be told"
    if "Invalid unicode" in error:
        return NOT_UTF8
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    return redact(re.sub(r"^[A-Za-z ]*Error: ", "", first))[:200]


NOT_UTF8 = "the line is not UTF-8 text (Latin-1 or Windows-1252?); save the file as UTF-8"


def not_utf8(error: InputError, s: Sniffed) -> InputError:
    """A line DuckDB found not UTF-8 (`error`, its line numbered as in the file `s`), with the column and the byte
    where it stops being UTF-8: a CSV saved by a spreadsheet on Windows is Windows-1252 where a name or tag has an
    accent. `error` as it is where the line cannot be told apart so (a value over several lines)."""
    if error.line is None or NOT_UTF8 not in error.message:
        return error
    with open_bytes(s.path, s.compression == "gzip") as f:
        raw = next(islice(f, error.line - 1, None), b"")
    cells = next(csv.reader([raw.decode("utf-8", "surrogateescape").rstrip("\r\n")]), [])
    bad = [(i, m.group()) for i, cell in enumerate(cells) if (m := re.search("[\udc80-\udcff]", cell))]
    if not bad or len(cells) != len(s.columns):
        return error
    i, char = bad[0]
    return InputError(f"cannot read the file: byte 0x{ord(char) - 0xdc00:02x} is not UTF-8 text (Latin-1 or "
                      "Windows-1252?); save the file as UTF-8", path=error.path, line=error.line,
                      column=s.columns[i])


def long_gzip_line(s: Sniffed) -> InputError | None:
    """A gzip CSV's first line longer than DuckDB reads, as the error that names it; None where there is none.
    Looked for first when DuckDB refuses such a file: DuckDB miscounts a long line as a ragged one, and looking
    for mixed line endings (csv_dialect.normalized) would inflate all of a gzip bomb's endless line, where this
    stops at its first MAX_LINE bytes."""
    if s.container == "csv" and s.compression == "gzip" and (line := gzip_line_over(s.path)):
        return InputError(f"cannot read the file: the line is longer than {MAX_LINE:,} bytes, the longest line "
                          "gpu-auditor reads", path=str(s.path), line=line)
    return None


BRACED = "CASE WHEN starts_with(trim(v), '{') THEN trim(v) ELSE '{' || v || '}' END"  # Azure's tags lack braces


def _no_object(text: str) -> str:
    """Whether JSON text is no object a reader reads as a map: not JSON, not an object, or a key given twice (the
    map's words for that name no line: "Map keys must be unique")."""
    return (f"(NOT json_valid({text}) OR json_type({text}) <> 'OBJECT' OR "
            f"TRY_CAST(CAST({text} AS JSON) AS MAP(VARCHAR, VARCHAR)) IS NULL)")


def diagnose(con: duckdb.DuckDBPyConnection, s: Sniffed, cols: Columns, relation: str,
             checks: list[tuple[str, str]], first_row: int, error: duckdb.Error) -> AuditorError:
    """Turn a DuckDB error into one line that names the file, the line and the column (a gzip CSV's line too
    long for DuckDB is named first, by `long_gzip_line`)."""
    if isinstance(error, duckdb.OutOfMemoryException):  # not a bad file: a limit to raise
        return out_of_memory(str(s.path))
    # NaN and infinity by their own test: DuckDB 2.0 answers false to `TRY_CAST(v AS DECIMAL) IS NULL` for a
    # Parquet DOUBLE NaN, which that cast gives as NULL
    tests = {"money": f"TRY_CAST(v AS {MONEY}) IS NULL OR NOT isfinite(TRY_CAST(v AS DOUBLE)) "
                      f"OR NOT (CAST(v AS VARCHAR) SIMILAR TO {lit(PLAIN_NUMBER)})",
             "time": "TRY_CAST(v AS TIMESTAMPTZ) IS NULL",
             "date": f"({azure.parse_date('trim(CAST(v AS VARCHAR))', try_=True)}) IS NULL",
             "tags": _no_object(f"({BRACED})"),
             "json": _no_object("CAST(v AS VARCHAR)"),
             "credits": f"len(list_filter({gcp.credit_amounts(cols, 'v')}, lambda a: NOT (a SIMILAR TO "
                        f"{lit(PLAIN_NUMBER)}) OR TRY_CAST(a AS {MONEY}) IS NULL)) > 0"}
    want = {"money": "a number", "time": "a UTC time like 2026-07-01T00:00:00Z", "json": "a JSON object",
            "date": "a date like 09/21/2023 or 2023-09-21", "tags": "a JSON object of tags",
            "credits": "a list of credits whose amounts are numbers"}
    # every amount the reader reads, not only those it names: `1_000` in any of them stops the read (columns.money)
    checks = checks + [(c, "money") for c, kind in cols.used.items() if kind == "money" and (c, kind) not in checks]
    try:
        for column, kind in checks:
            row = con.execute(
                f"SELECT rn, v FROM (SELECT row_number() OVER () + {first_row - 1} AS rn, {cols.value(column)} AS v "
                f"FROM {relation}) WHERE v IS NOT NULL AND ({tests[kind]}) ORDER BY rn LIMIT 1").fetchone()
            if row:
                shown = f"{redact(str(row[1]))[:60]!r}"
                plain = kind == "money" and re.fullmatch(PLAIN_NUMBER, str(row[1]))  # `1_000`: not a number
                if plain and (finite := con.execute("SELECT isfinite(TRY_CAST(? AS DOUBLE))",
                                                    [str(row[1])]).fetchone()) and finite[0]:
                    return InputError(f"{shown} is out of range: an amount has at most 20 digits before the "
                                      "decimal point", path=str(s.path), line=row[0], column=column)
                if kind in ("json", "tags") and (twice := con.execute(
                        f"SELECT json_type(j) = 'OBJECT' FROM (SELECT TRY_CAST({BRACED} AS JSON) AS j FROM "
                        "(SELECT CAST(? AS VARCHAR) AS v))", [str(row[1])]).fetchone()) and twice[0]:
                    return InputError(f"{shown} names a key twice", path=str(s.path), line=row[0], column=column)
                return InputError(f"{shown} is not {want[kind]}", path=str(s.path), line=row[0],
                                  column=column)
    except duckdb.Error as e:
        error = e
    named = re.search(r"[Ll]ine:? (\d+)", str(error))
    return InputError(f"cannot read the file: {csv_reason(str(error))}", path=str(s.path),
                      line=int(named.group(1)) if named else None)

"""Billing CSVs as spreadsheets, editors and mirrors leave them, made readable by DuckDB's strict reader when
their meaning is not in doubt.

Read as they are: a UTF-8 BOM, CRLF or CR-only (Excel for Mac) line endings, quoted numbers, `NULL` for an empty
value, and a delimiter ending every line (the header's too: an unnamed last column, read under `TRAILING` and
never used). Read from a normalized copy (`normalized`) once DuckDB refuses the file: line endings mixed in one
file (a file edited on two systems, exports concatenated), the header repeated inside the file (exports
concatenated with their headers), and what a spreadsheet leaves in a CSV it saves: rows of only delimiters
(`,,,,`, left out with a warning naming their lines) and a last row that totals the file (a `Total` label and
amounts: left out with a warning where each amount is its column's sum over the lines above it to the cent, else
refused naming its line: it is no total of this file). Refused in one line naming the file, the line and why:
anything else that is not one table of comma-separated values (DuckDB's diagnosis, tables/diagnose.py), and dates
like 9/18/2024 (the readers').

The copy keeps the line numbers of the original in every message: a dropped header is counted back
(`Normalized.original_line`).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import zlib
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.errors import InputError
from auditor.sql import q

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

TRAILING = "x_trailing_delimiter"  # the name an unnamed last column (a delimiter ending every line) is read under
# An amount as text, as exports write one: a sign, digits with one decimal point, an exponent (`1e3`: some exports
# write them), spaces around. `+5`, `.5`, `5.` and `007` are one number to every reader of a CSV: kept.
PLAIN_NUMBER = r"\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*"
CENT = Decimal("0.01")
NULLS = ("", "NULL")  # what an empty value is written as; no billing value is the word NULL
CHUNK = 8 << 20


def header_line(head: bytes) -> bytes:
    """The first line of a file's first bytes, whichever line ending ends it (LF, CRLF, or CR alone)."""
    return re.split(rb"\r\n|\r|\n", head, maxsplit=1)[0]


def line_break(path: Path) -> bytes:
    """What ends a plain file's lines, from its first 64 KiB: CR alone (Excel for Mac) where no LF is seen, else
    LF (CRLF included). What the long-line checks search for (detect.py)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    return b"\r" if b"\n" not in head and b"\r" in head else b"\n"


def header_names(names: list[str], path: str) -> list[str]:
    """The header's column names; an empty last name is a delimiter that ends every line (kept, read as
    TRAILING), an empty name elsewhere is refused (no column can be read by it)."""
    for i, name in enumerate(names[:-1]):
        if not name:
            raise InputError(f"column {i + 1} of the header has no name", path=path, line=1)
    return names


def read_names(columns: tuple[str, ...]) -> list[str]:
    """The columns as DuckDB reads them: the unnamed last one as TRAILING, twins in case apart (unique_names)."""
    return unique_names([c or TRAILING for c in columns])


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@lru_cache(maxsize=1 << 12)  # the parts of one export repeat one header: 5,001 files, 720,000 names, 48 distinct
def folded(name: str) -> str:
    """A column name as DuckDB compares names: its ASCII letters in lower case (`Team` is `team`, but `É` is not
    `é`, two names to DuckDB)."""
    return name.translate(_ASCII_LOWER)


def unique_names(names: list[str]) -> list[str]:
    """Names as DuckDB tells them apart (`folded`), and as it renames them in a Parquet, JSON or CSV file (the
    read of a CSV names every column so): a name an earlier one has in some case gets `_` and the count of the
    names that took it so far, and again while that is taken too. `resourceTags/user:Team` after
    `resourceTags/user:team` is `resourceTags/user:Team_1`; after `...:team` and `...:Team_1` it is
    `...:Team_1_1`."""
    taken: dict[str, int] = {}  # each name given, folded: how many later names it was taken for
    out = []
    for name in names:
        while (key := folded(name)) in taken:
            taken[key] += 1
            name = f"{name}_{taken[key]}"
        taken[key] = 0
        out.append(name)
    return out


def open_bytes(path: Path, gz: bool) -> io.BufferedIOBase:
    """A file's bytes, inflated where it is gzip."""
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _mixed(path: Path, gz: bool) -> bool:
    """Whether the file ends its lines in more than one way (LF, CRLF, CR). Counted on bytes, quotes not
    parsed: a CRLF file whose quoted values hold LF counts as mixed, and is read from a copy all the same."""
    crlf = lf = cr = 0
    last = b""
    with open_bytes(path, gz) as f:
        while chunk := f.read(CHUNK):
            if last == b"\r" and chunk[:1] == b"\n":
                crlf += 1
            crlf += chunk.count(b"\r\n")
            lf += chunk.count(b"\n")
            cr += chunk.count(b"\r")
            last = chunk[-1:]
    return sum(1 for n in (lf - crlf, cr - crlf, crlf) if n > 0) > 1


@dataclass
class Normalized:
    """A normalized copy of a billing CSV, and the lines of the original it leaves out: repeated headers, rows of
    no value (`blank`) and a last row that a spreadsheet's user added to total the file (`total`)."""

    path: str
    dropped: list[int] = field(default_factory=list)  # record numbers (the header is 1) in the original
    blank: list[int] = field(default_factory=list)
    total: tuple[int, list[str]] | None = None  # its record number and values

    def original_line(self, line: int | None) -> int | None:
        """The original's record number of the copy's record `line`."""
        if line is None:
            return None
        for d in sorted([*self.dropped, *self.blank, *([self.total[0]] if self.total else [])]):
            if line >= d:
                line += 1
        return line


def normalized(path: Path, compression: str, columns: tuple[str, ...], folder: str) -> Normalized | None:
    """A copy with one line ending (LF), without repeated headers, rows of only delimiters and a last row that
    names a total (held in `total`, for check_total), where the file needs one; else None (also
    where Python's csv cannot read it either: then DuckDB's diagnosis of the original names what is wrong).
    Made only for a file DuckDB refused: DuckDB reads a file with mixed endings or a repeated header rightly or
    not at all (a repeated header is no amount), so a file it reads is never looked through twice."""
    gz = compression == "gzip"
    header = [c.strip() for c in columns]
    try:
        if not _mixed(path, gz) and not _repeats_header(path, gz) and not _spreadsheet_rows(path, gz):
            return None
    except (OSError, EOFError, zlib.error):  # a damaged gzip stream: DuckDB's diagnosis names it
        return None
    out = Normalized(os.path.join(folder, f"normalized-{os.getpid()}-{abs(hash(str(path)))}.csv"))
    raw = gzip.open(path, "rt", encoding="utf-8-sig", newline="") if gz else \
        open(path, encoding="utf-8-sig", newline="")
    reader = None
    try:
        with raw as src, open(out.path, "w", encoding="utf-8", newline="") as dst:
            writer = csv.writer(dst, lineterminator="\n")
            reader = csv.reader((line.removeprefix("\ufeff") for line in src), strict=True)  # BOMs concatenated
            held: tuple[int, list[str]] | None = None  # the last row with a value so far: it may total the file
            for n, row in enumerate(reader, start=1):
                if n > 1 and [c.strip() for c in row] == header:
                    out.dropped.append(n)
                    continue
                if n > 1 and not any(c.strip() for c in row):
                    if row:
                        out.blank.append(n)
                    else:  # an empty line: DuckDB skips it, in the copy as in a file it reads itself
                        writer.writerow(row)
                    continue
                if held:
                    writer.writerow(held[1])
                held = (n, row)
            if held and held[0] > 1 and is_total(held[1]):
                out.total = held
            elif held:
                writer.writerow(held[1])
    except csv.Error as e:  # DuckDB's word for this is a "state machine" that names no line
        os.unlink(out.path)
        raise InputError(f"cannot read the file: not comma-separated values ({e})", path=str(path),
                         line=reader.line_num if reader else None) from None
    except (UnicodeDecodeError, OSError, EOFError, zlib.error):
        os.unlink(out.path)  # DuckDB reads the original and names what is wrong, and where
        return None
    return out


def _repeats_header(path: Path, gz: bool) -> bool:
    """Whether the header line appears again as a line of its own (exports concatenated with their headers)."""
    with open_bytes(path, gz) as f:
        head = f.read(1 << 16)
    first = header_line(head.removeprefix(b"\xef\xbb\xbf"))
    if not first:
        return False
    needles = [end + bom + first for end in (b"\n", b"\r") for bom in (b"", b"\xef\xbb\xbf")]
    with open_bytes(path, gz) as f:
        tail = b""
        while chunk := f.read(CHUNK):
            text = tail + chunk
            for needle in needles:  # bytes.find: the whole file at memory speed
                at = text.find(needle)
                while at >= 0:
                    after = text[at + len(needle):at + len(needle) + 1]
                    if after in (b"\r", b"\n") or (not after and len(chunk) < CHUNK):
                        return True
                    at = text.find(needle, at + 1)
            tail = text[-len(needles[-1]) - 1:]
    return False


# What a spreadsheet's user writes in the row that totals a file (case and spaces ignored)
TOTAL_LABELS = ("total", "grand total", "sum")
_TOTAL_LINE = re.compile(rb'(?i)(?:^|,)[ \t]*"?[ \t]*(?:grand[ \t]+total|total|sum)[ \t]*"?[ \t]*(?:,|$)')
_DELIMITERS_ONLY = re.compile(rb'[\r\n][ \t"]*,[, \t"]*(?:[\r\n]|$)')  # `,,,` and `"","",""`


def is_total(row: list[str]) -> bool:
    """A row whose only text is a total label: every other value empty or a number."""
    text = [c for c in (c.strip() for c in row) if c and not _is_number(c)]
    return len(text) == 1 and " ".join(text[0].lower().split()) in TOTAL_LABELS


def _is_number(text: str) -> bool:
    return re.fullmatch(PLAIN_NUMBER, text) is not None


def _spreadsheet_rows(path: Path, gz: bool) -> bool:
    """Whether a line holds only delimiters (a spreadsheet's empty rows, `,,,,`), or the last line that holds a
    value names a total (a row added to total the file): what a spreadsheet leaves in a CSV it saves."""
    with open_bytes(path, gz) as f:
        tail = b""
        while chunk := f.read(CHUNK):
            text = tail + chunk
            if _DELIMITERS_ONLY.search(text):
                return True
            tail = text[-(1 << 16):]
    lines = [x for x in re.split(rb"\r\n|\r|\n", tail) if x.strip(b" \t,")]
    return bool(lines) and bool(_TOTAL_LINE.search(lines[-1]))


def copy_note(path: str, n: Normalized) -> list[str]:
    """What a reader of the audit should know of a copy: the repeated headers and the empty rows left out."""
    def shown(lines: list[int]) -> str:
        return ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")

    notes = []
    if n.dropped:
        notes.append(f"{path}: the header is repeated at line(s) {shown(n.dropped)} (files concatenated?); those "
                     "lines are not read")
    if n.blank:
        notes.append(f"{path}: {len(n.blank):,} line(s) hold no value, only delimiters (a spreadsheet's empty rows) "
                     f"at line(s) {shown(n.blank)}; not read")
    return notes


def check_total(con: DuckDBPyConnection, relation: str, copy: Normalized, columns: tuple[str, ...],
                cost_column: str | None, path: str) -> str | None:
    """The copy's last row left out as a total (`copy.total`): each of its amounts must be, to the cent, the sum of
    its column over the lines above it, the cost among them; then the row is what the file's lines add up to, and
    is dropped with a note. Else it is no total of this file, and cannot be dropped: refused, naming its line."""
    if copy.total is None:
        return None
    line, row = copy.total
    amounts = {name: value.strip() for name, value in zip(columns, row, strict=False)
               if value.strip() and _is_number(value.strip())}
    if cost_column is None or cost_column not in amounts:
        raise InputError("a last line that names a total holds no cost (a total a spreadsheet added?); "
                         "remove it", path=path, line=line)
    sums = con.execute("SELECT " + ", ".join(f"CAST(sum(TRY_CAST({q(c)} AS DECIMAL(38,18))) AS VARCHAR)"
                                             for c in amounts) + f" FROM {relation}").fetchone() or ()
    for (name, value), total in zip(amounts.items(), sums, strict=True):
        cents = Decimal(total or 0).quantize(CENT, ROUND_HALF_EVEN)
        if Decimal(value).quantize(CENT, ROUND_HALF_EVEN) != cents:
            raise InputError(f"a last line that names a total, whose {value} is not the sum of the column over the "
                             f"lines above it ({cents}): not a total of this file, so it cannot be left out; "
                             "remove it", path=path, line=line, column=name)
    return (f"{path}: line {line} is a total row ({amounts[cost_column]}, the sum of {cost_column} over the lines "
            "above it, a spreadsheet's?); not read")


def check_trailing(con: DuckDBPyConnection, relation: str, first_row: int, path: str, copy: Normalized | None) -> None:
    """Refuse a file whose header ends in a delimiter and where a line holds a value past it: a column without a
    name, which no reader reads, so its value would be lost without a word. (A read that fails here fails again
    in the store's read, which names what is wrong.)"""
    import duckdb

    sql = (f"SELECT n FROM (SELECT row_number() OVER () + {first_row - 1} AS n, {TRAILING} AS v FROM {relation}) "
           "WHERE v IS NOT NULL ORDER BY n LIMIT 1")
    try:
        held = con.execute(sql).fetchone()
    except duckdb.Error:
        return
    if held:
        raise InputError("a value past the header's last column, which has no name (the header ends in a "
                         "delimiter)", path=path, line=copy.original_line(held[0]) if copy else held[0])

"""Billing CSVs as spreadsheets, editors and mirrors leave them, made readable by DuckDB's strict reader when
their meaning is not in doubt.

Read as they are: a UTF-8 BOM, CRLF or CR-only (Excel for Mac) line endings, quoted numbers, `NULL` for an empty
value, and a delimiter ending every line (the header's too: an unnamed last column, read under `TRAILING` and
never used). Read from a normalized copy (`normalized`) once DuckDB refuses the file: line endings mixed in one
file (a file edited on two systems, exports concatenated), and the header repeated inside the file (exports
concatenated with their headers). Refused in one line naming the file, the line and why: anything else that is
not one table of comma-separated values (DuckDB's diagnosis, tables/diagnose.py), and dates like 9/18/2024 (the
readers').

The copy keeps the line numbers of the original in every message: a dropped header is counted back
(`Normalized.original_line`).
"""

from __future__ import annotations

import csv
import gzip
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.errors import InputError

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

TRAILING = "x_trailing_delimiter"  # the name an unnamed last column (a delimiter ending every line) is read under
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
    """The columns as DuckDB reads them: the unnamed last one as TRAILING."""
    return [c or TRAILING for c in columns]


def _mixed(path: Path, gz: bool) -> bool:
    """Whether the file ends its lines in more than one way (LF, CRLF, CR). Counted on bytes, quotes not
    parsed: a CRLF file whose quoted values hold LF counts as mixed, and is read from a copy all the same."""
    crlf = lf = cr = 0
    last = b""
    with (gzip.open if gz else open)(path, "rb") as f:
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
    """A normalized copy of a billing CSV, and the lines of the original it leaves out (repeated headers)."""

    path: str
    dropped: list[int] = field(default_factory=list)  # record numbers (the header is 1) in the original

    def original_line(self, line: int | None) -> int | None:
        """The original's record number of the copy's record `line`."""
        if line is None:
            return None
        for d in self.dropped:
            if line >= d:
                line += 1
        return line


def normalized(path: Path, compression: str, columns: tuple[str, ...], folder: str) -> Normalized | None:
    """A copy with one line ending (LF) and without repeated headers, where the file needs one; else None (also
    where Python's csv cannot read it either: then DuckDB's diagnosis of the original names what is wrong).
    Made only for a file DuckDB refused: DuckDB reads a file with mixed endings or a repeated header rightly or
    not at all (a repeated header is no amount), so a file it reads is never looked through twice."""
    gz = compression == "gzip"
    header = [c.strip() for c in columns]
    try:
        if not _mixed(path, gz) and not _repeats_header(path, gz):
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
            for n, row in enumerate(reader, start=1):
                if n > 1 and [c.strip() for c in row] == header:
                    out.dropped.append(n)
                    continue
                writer.writerow(row)
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
    with (gzip.open if gz else open)(path, "rb") as f:
        head = f.read(1 << 16)
    first = header_line(head.removeprefix(b"\xef\xbb\xbf"))
    if not first:
        return False
    needles = [end + bom + first for end in (b"\n", b"\r") for bom in (b"", b"\xef\xbb\xbf")]
    with (gzip.open if gz else open)(path, "rb") as f:
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


def copy_note(path: str, n: Normalized) -> str | None:
    """What a reader of the audit should know of a copy: the repeated headers left out."""
    if not n.dropped:
        return None
    shown = ", ".join(map(str, n.dropped[:5])) + (", ..." if len(n.dropped) > 5 else "")
    return f"{path}: the header is repeated at line(s) {shown} (files concatenated?); those lines are not read"


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

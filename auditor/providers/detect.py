"""Find billing files and tell their format from their content: magic bytes and header, never the name."""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import InputError

DATA_SUFFIXES = (".csv", ".csv.gz", ".gz", ".parquet", ".txt")


@dataclass(frozen=True)
class Sniffed:
    path: Path
    container: str  # csv or parquet
    compression: str  # none or gzip
    columns: tuple[str, ...]
    format: str  # aws-cur, focus-1.0, focus-1.1, focus-1.2
    has_bom: bool = False


def norm(column: str) -> str:
    """One spelling for `lineItem/UsageType` and `line_item_usage_type`: lower case, letters and digits."""
    return re.sub(r"[^a-z0-9]", "", column.lower())


def expand(paths: list[Path]) -> list[Path]:
    """Files named, and the data files inside folders named (sorted, recursively)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.name.lower().endswith(DATA_SUFFIXES)
                           and not f.name.startswith("."))
            if not found:
                raise InputError("folder holds no billing files (.csv, .csv.gz, .parquet)", path=str(p))
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise InputError("no such file or folder", path=str(p))
    return out


def _read_header(path: Path, gz: bool) -> tuple[list[str], bool]:
    try:
        raw = gzip.open(path, "rb") if gz else open(path, "rb")
        with raw:
            head = raw.read(1 << 16)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"cannot read the file: {e}", path=str(path)) from None
    if not head.strip():
        raise InputError("the file is empty", path=str(path))
    bom = head.startswith(b"\xef\xbb\xbf")
    if bom:
        head = head[3:]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError("the file is UTF-16; save it as UTF-8", path=str(path), line=1)
    if b"\x00" in head:
        raise InputError("the file is binary, not CSV text", path=str(path))
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not merely a character cut by the 64 KiB read
            raise InputError("the header is not UTF-8 text", path=str(path), line=1) from None
        text = head[: e.start].decode("utf-8")
    first = next(csv.reader(io.StringIO(text)), [])
    return [c.strip() for c in first], bom


def _parquet_columns(path: Path, con) -> list[str]:
    import duckdb

    try:
        top = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    except duckdb.Error as e:
        raise InputError(f"cannot read the Parquet file: {str(e).splitlines()[0]}", path=str(path)) from None
    return [r[0] for r in top]


def sniff(path: Path, con) -> Sniffed:
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PAR1":
        columns, container, compression, bom = _parquet_columns(path, con), "parquet", "none", False
    else:
        gz = magic[:2] == b"\x1f\x8b"
        columns, bom = _read_header(path, gz)
        container, compression = "csv", "gzip" if gz else "none"
    fmt = detect_format(columns)
    if fmt is None:
        shown = ", ".join(columns[:6]) + (", ..." if len(columns) > 6 else "")
        raise InputError(f"not a billing export gpu-auditor reads (header: {shown}); expected an AWS Cost "
                         "and Usage Report or a FOCUS export", path=str(path), line=1)
    return Sniffed(path, container, compression, tuple(columns), fmt, bom)


FOCUS_12 = {"invoiceid", "pricingcurrency", "billingaccounttype", "subaccounttype"}
FOCUS_11 = {"servicesubcategory", "skumeter", "skupricedetails", "capacityreservationid"}


def detect_format(columns: list[str] | tuple[str, ...]) -> str | None:
    keys = {norm(c) for c in columns}
    if {"billedcost", "chargeperiodstart", "billingcurrency"} <= keys:
        if keys & FOCUS_12:
            return "focus-1.2"
        if keys & FOCUS_11:
            return "focus-1.1"
        return "focus-1.0"
    if "lineitemunblendedcost" in keys and "lineitemusagestartdate" in keys:
        return "aws-cur"
    return None

"""Find billing files and tell their format from their content: magic bytes and header, never the name."""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from auditor.errors import InputError
from auditor.files import readable
from auditor.providers.billing import avro, csv_dialect
from auditor.readable import files_under, kind_of, read_text

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

DATA_SUFFIXES = (".csv", ".csv.gz", ".gz", ".parquet", ".txt", ".json", ".jsonl", ".ndjson", ".avro")
# A Hadoop file system URI (s3a://bucket/prefix, gs://, abfss://, hdfs://, file:///, dbfs:/), or the `s3:/bucket`
# pathlib makes of one. Two letters at least: `C:/` is a Windows drive.
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")
URI_NEEDS_SPARK = ("a URI is read directly only by `gpu-auditor audit --engine spark` (on a cluster with that file "
                   "system's connector); or mount the bucket and give its local path")


def is_uri(path: object) -> bool:
    """Whether a billing argument is a URI, kept as text (a Path would fold its `//`)."""
    return isinstance(path, str) and URI.match(path) is not None


@dataclass(frozen=True)
class Sniffed:
    path: Path
    container: str  # csv, parquet, json (newline-delimited) or avro (read through a Parquet copy: avro.py)
    compression: str  # none or gzip
    columns: tuple[str, ...]  # nested fields of Parquet and JSON appear dotted: `sku.description`
    format: str  # aws-cur, aws-cur2, focus-1.0 to focus-1.3, gcp-billing, azure-cost
    has_bom: bool = False
    fields: tuple[tuple[str, str], ...] = ()  # dotted name -> SQL that reaches it, for nested fields
    types: tuple[tuple[str, str], ...] = ()  # column -> DuckDB type, for Parquet, JSON and Avro
    serial: bool = False  # read with DuckDB's single-threaded CSV reader (see has_long_line)


def norm(column: str) -> str:
    """One spelling for `lineItem/UsageType` and `line_item_usage_type`: lower case, letters and digits."""
    return re.sub(r"[^a-z0-9]", "", column.lower())


def expand(paths: list[Path], notes: list[str] | None = None) -> list[Path]:
    """Files named, and the data files inside folders named (sorted, recursively). Where a folder holds
    AWS CUR manifests, only the files of the assemblies they list are read: AWS re-delivers a month as a
    new assembly beside the old one, and reading both would count the month twice."""
    out: list[Path] = []
    for p in paths:
        if not (URI.match(str(p)) and not os.path.lexists(p)) and kind_of(p, "billing file") == "folder":
            found = files_under(p, is_data, "billing file")  # an unreadable path among them: refused
            manifests = _manifests(p)
            _refuse_incomplete(manifests, found)
            listed = {k for keys in manifests.values() for k in keys}
            if listed:
                kept = [f for f in found if _tail(f) in listed] or [f for f in found if f.name in listed]
                for f in found:
                    if f not in kept and notes is not None:
                        notes.append(f"{f}: not in the folder's CUR manifest (a superseded delivery); not read")
                found = kept
            if not found:
                raise InputError("folder holds no billing files (.csv, .csv.gz, .parquet, .json, .avro)",
                                 path=str(p))
            out.extend(found)
        elif URI.match(str(p)) and not os.path.lexists(p):
            raise InputError(URI_NEEDS_SPARK, path=str(p))
        else:
            out.append(p)
    return out


def is_data(f: Path) -> bool:
    return f.name.lower().endswith(DATA_SUFFIXES) and not f.name.startswith(".") and not _is_sidecar(f)


def _tail(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _manifests(folder: Path) -> dict[Path, set[str]]:
    """Each CUR manifest in a folder, with the `assemblyId/file` and `file` names it lists (CUR 1 `reportKeys`,
    CUR 2.0 `dataFiles`)."""
    keys: dict[Path, set[str]] = {}
    for m in sorted(folder.rglob("*")):
        if not (m.is_file() and m.name.lower().endswith("manifest.json")):
            continue
        try:
            text = read_text(m, "CUR manifest")
        except OSError as e:
            raise InputError(f"cannot read the CUR manifest: {e}", path=str(m)) from None
        keys[m] = manifest_keys(text, str(m))
    return keys


def _refuse_incomplete(manifests: dict[Path, set[str]], found: list[Path]) -> None:
    """A manifest some of whose files are in the folder and some not: a delivery downloaded in part, whose period
    would be read in part without a word. (None of them: a period not downloaded, or superseded files beside
    it, which `expand` names as not read.)"""
    tails, names = {_tail(f) for f in found}, {f.name for f in found}
    for m, keys in manifests.items():
        files = {k for k in keys if "/" in k} or keys  # each file once: by its `assemblyId/file` where given
        # found as `expand` keeps them: by assembly and name where any is found so, else by name alone
        by_tail = any(k in tails for k in files)
        missing = sorted(k for k in files if (k not in tails if by_tail else k.split("/")[-1] not in names))
        if missing and len(missing) < len(files):
            raise InputError(f"lists {len(files)} files, of which {len(missing)} {'is' if len(missing) == 1 else 'are'}"
                             f" not in the folder (the first: {missing[0]}): an incomplete download, whose period "
                             "would be read in part; download the rest", path=str(m))


def manifest_keys(text: str, where: str) -> set[str]:
    """`assemblyId/file` and `file` names one CUR manifest lists (also read from object storage: spark.py)."""
    import json

    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InputError(f"cannot read the CUR manifest: {e}", path=where) from None
    keys: set[str] = set()
    for key in (doc.get("reportKeys") or doc.get("dataFiles") or []) if isinstance(doc, dict) else []:
        parts = str(key).rstrip("/").split("/")
        keys.add("/".join(parts[-2:]))
        keys.add(parts[-1])
    return keys


def _is_sidecar(path: Path) -> bool:
    """Files that travel with billing data but are not billing lines: a CUR manifest, a snapshot's
    manifest.json and inventory.json."""
    name = path.name.lower()
    return name.endswith(".json") and ("manifest" in name or name == "inventory.json")


def _read_header(path: Path, gz: bool) -> tuple[list[str], bool]:
    try:
        raw = gzip.open(path, "rb") if gz else open(path, "rb")
        with raw:
            head = raw.read(1 << 16)
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"cannot read the file: {e}", path=str(path)) from None
    bom = head.startswith(b"\xef\xbb\xbf")
    if bom:
        head = head[3:]
    if not head.strip():  # a byte order mark alone is no header either
        raise InputError("the file is empty", path=str(path))
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError("the file is UTF-16; save it as UTF-8", path=str(path), line=1)
    if b"\x00" in head:
        raise InputError("the file is binary, not CSV text", path=str(path))
    first_line = csv_dialect.header_line(head)
    try:
        text = first_line.decode("utf-8")  # later lines are checked as DuckDB reads them
    except UnicodeDecodeError:
        raise InputError("the header is not UTF-8 text; save the file as UTF-8", path=str(path), line=1) from None
    first = next(csv.reader(io.StringIO(text)), [])
    names = csv_dialect.header_names([c.strip() for c in first], str(path))
    _refuse_twins(path, names, line=1)
    return names, bom


def _nested_columns(path: Path, con: DuckDBPyConnection,
                    reader: str) -> tuple[list[str], list[tuple[str, str]], list[tuple[str, str]]]:
    """Columns of a Parquet or JSON file, with STRUCT fields flattened to dotted names."""
    import duckdb

    kind = "Parquet" if reader == "read_parquet" else "JSON"
    try:
        top = con.execute(f"DESCRIBE SELECT * FROM {reader}(?)", [readable(path)]).fetchall()
    except duckdb.Error as e:
        raise _unreadable(kind, path, str(e)) from None
    if reader == "read_parquet":
        written = _parquet_names(path, con)
        _refuse_twins(path, written)
    else:
        if [name for name, *_ in top] == ["json"]:  # what DuckDB names a file of lines not all objects
            _refuse_no_object(path)
        # DuckDB reads a second `cost` key in another case as `Cost_1`: the first line's keys, as written
        written = _json_keys(path)
        _refuse_twins(path, written, line=1)
    # two tags in case (`...:team`, `...:Team`): each by its own name, the second read as DuckDB renamed it (`_1`)
    read = [name for name, *_ in top]
    if len(written) != len(read) or csv_dialect.unique_names(written) != read:
        written = read
    return flatten([(name, dtype) for name, (_, dtype, *_) in zip(written, top, strict=True)], read)


def _unreadable(kind: str, path: Path, error: str) -> InputError:
    """DuckDB's refusal of a Parquet or JSON file as one line: the file named once (DuckDB names it again, quoted,
    in its reason), with the line DuckDB names ("Malformed JSON in file "x", at byte 22 in line 2: ...")."""
    reason = re.sub(r"^[A-Za-z ]*Error: ", "", error.strip().splitlines()[0] if error.strip() else "unknown error")
    for quoted in (f"'{readable(path)}'", f'"{readable(path)}"'):  # the name DuckDB was given
        reason = re.sub(f"(?: in file)? {re.escape(quoted)},?", "", reason)
    line = re.search(r" in line (\d+)", reason)
    reason = re.sub(r" in line \d+", "", reason).strip().removesuffix(".")
    return InputError(f"cannot read the {kind} file (cut short or damaged?): {reason}", path=str(path),
                      line=int(line[1]) if line else None)


def _parquet_names(path: Path, con: DuckDBPyConnection) -> list[str]:
    """The top-level column names a Parquet file's schema holds, as written (DuckDB renames a second
    `BilledCost` to `BilledCost_1`)."""
    rows = con.execute("SELECT name, num_children FROM parquet_schema(?)", [readable(path)]).fetchall()

    def after(i: int) -> int:  # the index past the schema element at i and its children
        end = i + 1
        for _ in range(rows[i][1] or 0):
            end = after(end)
        return end

    names, i = [], 1
    for _ in range(rows[0][1] or 0):
        names.append(rows[i][0])
        i = after(i)
    return names


def _refuse_no_object(path: Path) -> None:
    """Refuse a JSON lines file's first line that holds something other than an object (`42`, `[]`)."""
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            text = line.removeprefix(b"\xef\xbb\xbf").strip()
            if text and not text.startswith(b"{"):
                raise InputError("the line is not a JSON object; a JSON lines file holds one object a line",
                                 path=str(path), line=n)


def _json_keys(path: Path) -> list[str]:
    """The top-level keys of a JSON lines file's first object (the file's first text is `{`), in their order; []
    where it is cut or no JSON (DuckDB's read names what is wrong)."""
    import json

    with open(path, "rb") as f:  # a line over DuckDB's 16 MB object limit was refused before this is asked
        first = next(line for line in f if line.strip())
    try:
        keys: list[str] = json.loads(first, object_pairs_hook=lambda pairs: [k for k, _ in pairs])
    except ValueError:  # not JSON, or not UTF-8
        return []
    return keys


# An AWS CUR's column of one tag: AWS tag keys are case-sensitive, so a CUR can hold `resourceTags/user:team` and
# `resourceTags/user:Team`, two tags (read apart: csv_dialect.unique_names, Columns.sql).
TAG_COLUMN = re.compile(r"(?i)^(?:resourceTags/(user|aws):|resource_tags_(user|aws)_)(.+)$")


def _refuse_twins(path: Path, names: list[str], line: int | None = None) -> None:
    """Two columns of one name: which one holds the money cannot be told, so neither is read. Names that differ
    only in the case of ASCII letters are one name to DuckDB's SQL (csv_dialect.folded): refused too, but for two
    AWS tag columns (TAG_COLUMN), which are two tags. (`line`: a CSV header's.)"""
    seen: dict[str, int] = {}
    for i, name in enumerate(names, 1):
        if (j := seen.get(csv_dialect.folded(name))) is not None and not (
                names[j - 1] != name and TAG_COLUMN.match(name)):
            named = f"both named {name!r}" if names[j - 1] == name else \
                f"named {names[j - 1]!r} and {name!r}, one name in any case"
            raise InputError(f"columns {j} and {i} are {named}; gpu-auditor cannot tell which to read (remove or "
                             "rename one)", path=str(path), line=line)
        seen[csv_dialect.folded(name)] = i


def flatten(top: list[tuple[str, str]], read: list[str] | None = None
            ) -> tuple[list[str], list[tuple[str, str]], list[tuple[str, str]]]:
    """(column, DuckDB type) pairs to the column names with STRUCT fields as dotted names, the SQL that reaches
    each nested field (and each column DuckDB reads under another name, `read`), and every name's type."""
    from auditor.sql import q

    names: list[str] = []
    fields: list[tuple[str, str]] = []
    types: list[tuple[str, str]] = []

    def walk(name: str, sql: str, dtype: str) -> None:
        names.append(name)
        types.append((name, dtype))
        if name != sql.strip('"'):
            fields.append((name, sql))
        if dtype.startswith("STRUCT(") and dtype.endswith(")"):
            for fname, ftype in struct_fields(dtype[7:-1]):
                walk(f"{name}.{fname}", f"{sql}.{q(fname)}", ftype)

    for (name, dtype), as_read in zip(top, read or [n for n, _ in top], strict=True):
        walk(name, q(as_read), dtype)
    return names, fields, types


def struct_fields(body: str) -> list[tuple[str, str]]:
    """`id VARCHAR, "name" VARCHAR, usage STRUCT(a INT)` -> [(id, VARCHAR), (name, VARCHAR), (usage, STRUCT(a INT))]."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    out = []
    for part in parts:
        part = part.strip()
        m = re.match(r'^"((?:[^"]|"")*)"\s+(.*)$', part) or re.match(r"^(\S+)\s+(.*)$", part)
        if m:
            out.append((m.group(1).replace('""', '"'), m.group(2)))
    return out


def sniff(path: Path, con: DuckDBPyConnection) -> Sniffed:
    with open(path, "rb") as f:
        head = f.read(256)
    magic, first = head[:4], head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    fields: list[tuple[str, str]]  # each branch gives the columns, their fields and (but a CSV) their types
    types: list[tuple[str, str]] = []
    if magic == b"PAR1":
        columns, fields, types = _nested_columns(path, con, "read_parquet")
        container, compression, bom = "parquet", "none", False
    elif first == b"[":  # `bq query --format=json`: its elements have no lines of their own to name
        raise InputError("the file is one JSON array; gpu-auditor reads JSON lines, one object a line (BigQuery "
                         "exports a table so: bq extract --destination_format NEWLINE_DELIMITED_JSON; or convert it "
                         "with jq -c '.[]')", path=str(path), line=1)
    elif first == b"{":
        columns, fields, types = _nested_columns(path, con, "read_ndjson")
        container, compression, bom = "json", "none", False
    elif magic == avro.MAGIC:  # an Avro object container file (GCP's BigQuery export)
        columns, fields, types = flatten(avro.describe(path, con))
        container, compression, bom = "avro", "none", False
    else:
        gz = magic[:2] == b"\x1f\x8b"
        columns, bom = _read_header(path, gz)
        container, compression = "csv", "gzip" if gz else "none"
        from auditor.sql import q

        # two tag columns in case: the second read as `..._1` (csv_dialect.read_names), found by its own name
        fields = [(c, q(r)) for c, r in zip(columns, csv_dialect.read_names(tuple(columns)), strict=True)
                  if c and c != r]
    fmt = detect_format(columns)
    if fmt is None:
        if container == "csv" and len(columns) == 1:
            for delim, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "pipes")):
                if detect_format(columns[0].split(delim)):
                    raise InputError(f"the columns are separated by {name}; gpu-auditor reads comma-separated "
                                     "files: export the file as CSV with commas", path=str(path), line=1)
        header = 1 if container == "csv" else None  # Parquet, JSON and Avro have no header line to name
        if missed := near_miss(columns):
            raise InputError(missed, path=str(path), line=header)
        shown = ", ".join(_clip(c, 40) for c in columns[:6]) + (", ..." if len(columns) > 6 else "")
        raise InputError(f"not a billing export gpu-auditor reads (header: {shown}); it reads {READS}",
                         path=str(path), line=header)
    plain_csv = container == "csv" and compression == "none"
    eol = csv_dialect.line_break(path) if plain_csv and path.stat().st_size >= 2 << 20 else b"\n"  # has_long_line
    long_lines = plain_csv and has_long_line(path, eol=eol)
    if long_lines and (line := first_line_over(path, MAX_LINE, eol=eol)):
        raise InputError(f"cannot read the file: the line is longer than {MAX_LINE:,} bytes, the longest line "
                         "gpu-auditor reads", path=str(path), line=line)
    serial = container == "csv" and (compression == "gzip" or long_lines)
    return Sniffed(path, container, compression, tuple(columns), fmt, bom, tuple(fields), tuple(types), serial)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def has_long_line(path: Path, block: int = 1 << 20, eol: bytes = b"\n") -> bool:
    """Whether a stretch of `block` bytes holds no line break, that is, a line of at least a MiB (every line
    over 2 MiB leaves such a stretch). DuckDB's parallel CSV reader drops a last line longer than its 32 MB
    buffer without a word (DuckDB 2.0), so such a file goes to the single-threaded reader, which stops at any
    line over its 2,000,000-byte limit with an error naming the line. mmap: only the pages up to each
    stretch's first line break are touched. (A gzip file cannot be checked without inflating it: it is
    always read single-threaded; DuckDB inflates it on one thread anyway.)"""
    import mmap

    size = path.stat().st_size
    if size < 2 * block:
        return False
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        return any(mm.find(eol, pos, pos + block) < 0 for pos in range(0, size - block + 1, block))


MAX_LINE = 2_000_000  # bytes: DuckDB's max_line_size, the longest CSV line read


def first_line_over(path: Path, limit: int, block: int = 1 << 20, eol: bytes = b"\n") -> int | None:
    """The number of the first line of a plain file longer than `limit` bytes, or None. Found before DuckDB
    reads the file, which holds a whole line in memory before refusing it (a 2 GB line ran out of memory
    rather than naming its line). Only stretches without a line break are looked at, each no further than
    `limit` bytes; the line breaks before the long line are counted in 8 MiB slices."""
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        skip = 0
        for pos in range(0, len(mm) - block + 1, block):
            if pos < skip or mm.find(eol, pos, pos + block) >= 0:
                continue
            start = mm.rfind(eol, 0, pos) + 1
            end = mm.find(eol, start, start + limit + 1)
            if end < 0 and len(mm) - start > limit:
                return 1 + sum(mm[i:min(i + (8 << 20), start)].count(eol) for i in range(0, start, 8 << 20))
            skip = end if end >= 0 else len(mm)
    return None


def gzip_line_over(path: Path, limit: int = MAX_LINE, block: int = 1 << 20) -> int | None:
    """The number of the first line of a gzip CSV longer than `limit` bytes once inflated, or None (also for a
    damaged stream: that has its own message). DuckDB holds a whole line in memory before refusing it, so a
    100 MB line was miscounted as a line of too few fields, and a gzip bomb (gigabytes of one endless line)
    ended in DuckDB's allocation error, naming no file. This inflates in slices of `block` bytes and stops at
    the long line: a bomb costs `limit` bytes, not its size. Run when DuckDB fails on a gzip file."""
    inflate = zlib.decompressobj(31)
    line, run = 1, 0  # run: bytes of the current line inflated so far
    try:
        with open(path, "rb") as f:
            pending = b""
            while True:
                if not pending:
                    pending = f.read(block)
                    if not pending:
                        return None
                out = inflate.decompress(pending, block)
                pending = inflate.unconsumed_tail
                if inflate.eof:  # the next member of a multi-member file
                    pending = inflate.unused_data + pending
                    inflate = zlib.decompressobj(31)
                last = out.rfind(b"\n")
                if last < 0:
                    run += len(out)
                    if run > limit:
                        return line
                    continue
                first = out.find(b"\n")
                if run + first > limit:  # the line that went on from the slices before
                    return line
                line, pos = line + 1, first + 1
                if block > limit:  # a whole line inside one slice can be over the limit only then
                    while (nxt := out.find(b"\n", pos)) >= 0:
                        if nxt - pos > limit:
                            return line
                        line, pos = line + 1, nxt + 1
                else:
                    line += out.count(b"\n", pos)
                run = len(out) - last - 1
                if run > limit:
                    return line
    except (OSError, EOFError, zlib.error):
        return None


# Columns FOCUS 1.2 added (Microsoft's 1.0 export already has BillingAccountType, so that is no marker).
FOCUS_13 = {"allocatedmethodid", "allocatedmethoddetails", "allocatedresourceid", "allocatedresourcename",
            "allocatedtags", "contractapplied"}
FOCUS_12 = {"invoiceid", "pricingcurrency", "pricingcurrencyeffectivecost", "pricingcurrencylistunitprice"}
FOCUS_11 = {"servicesubcategory", "skumeter", "skupricedetails", "capacityreservationid"}


@dataclass(frozen=True)
class Need:
    """A column a reader cannot do without, under any of its spellings (normalized keys)."""

    keys: frozenset[str]
    shown: str  # as an error names it
    what: str  # what the reader takes from it


@dataclass(frozen=True)
class Family:
    """A family of exports: the columns its reader needs, and columns that only it has (`marks`), by which a
    file that lacks a needed column is still recognised as one of the family."""

    name: str  # as an error names it
    needs: tuple[Need, ...]
    marks: Callable[[str], bool]  # whether a column (as spelled in the file) is one of this family's


def _need(shown: str, what: str, *keys: str) -> Need:
    return Need(frozenset(keys or (norm(shown),)), shown, what)


def _keyed(*keys: str) -> Callable[[str], bool]:
    return lambda column: norm(column) in keys


# The needs are what each reader (aws.py, focus.py, gcp.py, azure.py) reads as the billed cost, the start time
# and the currency, plus what tells a GCP or Azure file apart from any CSV with a date and a cost.
FAMILIES = {
    "focus": Family("a FOCUS export", (
        _need("BilledCost", "the billed cost"), _need("ChargePeriodStart", "the start time"),
        _need("BillingCurrency", "the currency")),
        _keyed("billedcost", "effectivecost", "listcost", "contractedcost", "billingperiodstart", "billingperiodend",
               "chargeperiodstart", "chargeperiodend", "chargecategory", "chargeclass", "chargefrequency",
               "servicecategory", "pricingcategory", "pricingquantity", "pricingunit", "consumedquantity",
               "consumedunit", "commitmentdiscountid", "invoiceissuername", "providername", "publishername",
               "subaccountid", "regionid", "skupriceid", "listunitprice", "contractedunitprice")),
    "aws": Family("an AWS CUR", (
        _need("lineItem/UnblendedCost", "the billed cost"), _need("lineItem/UsageStartDate", "the start time")),
        # `lineItem/UsageType` or `line_item_usage_type`, `bill/PayerAccountId`, `identity/LineItemId`, ...
        lambda column: re.match(r"(?i)^(lineitem/|line_item_|identity[/_]|bill[/_]|product[/_]|pricing[/_]|"
                                r"reservation[/_]|savingsplan/|savings_plan_)", column) is not None),
    "gcp": Family("a GCP BigQuery billing export", (
        _need("cost", "the billed cost"), _need("usage_start_time", "the start time"),
        _need("currency", "the currency"),
        _need("sku.description", "what each line bills for", "skudescription", "sku")),
        _keyed("serviceid", "servicedescription", "skudescription", "usagestarttime", "usageendtime", "exporttime",
               "projectid", "projectnumber", "projectname", "systemlabels", "locationlocation", "locationregion",
               "locationzone", "costtype", "credits", "invoicemonth", "currencyconversionrate", "costatlist",
               "usageamount", "usageunit", "usageamountinpricingunits", "usagepricingunit", "resourceglobalname",
               "transactiontype")),
    "azure": Family("an Azure cost details export", (
        _need("CostInBillingCurrency, Cost, PreTaxCost or costInUsd", "the billed cost",
              "costinbillingcurrency", "cost", "pretaxcost", "costinusd"),
        _need("Date, UsageDateTime or servicePeriodStartDate", "the start time",
              "date", "usagedatetime", "serviceperiodstartdate"),
        _need("MeterCategory or ResourceLocation", "what each line bills for", "metercategory", "resourcelocation")),
        _keyed("metercategory", "metersubcategory", "metername", "meterid", "meterregion", "resourcelocation",
               "subscriptionguid", "subscriptionname", "resourcegroup", "resourcegroupname", "consumedservice",
               "chargetype", "pricingmodel", "additionalinfo", "unitofmeasure", "billingprofileid",
               "invoicesectionid", "partnumber", "effectiveprice", "paygprice", "reservationid", "benefitid",
               "instanceid", "costinbillingcurrency", "pretaxcost", "costinusd", "usagedatetime",
               "serviceperiodstartdate")),
}


# The FOCUS versions told apart, newest first, each by the columns it added; a file with none of them is 1.0.
FOCUS_VERSIONS = (("focus-1.3", FOCUS_13), ("focus-1.2", FOCUS_12), ("focus-1.1", FOCUS_11))
# What gpu-auditor reads, as an error about a file it cannot read names it: the FOCUS range from the list above.
READS = (f"AWS Cost and Usage Reports (CUR 1 and 2.0), FOCUS 1.0 to {FOCUS_VERSIONS[0][0].removeprefix('focus-')}, "
         "GCP BigQuery billing exports and Azure cost details")


def detect_format(columns: list[str] | tuple[str, ...]) -> str | None:
    return _detect(tuple(columns))


@lru_cache(maxsize=64)  # the parts of one export share their header: detected once, not once per part
def _detect(columns: tuple[str, ...]) -> str | None:
    keys = {norm(c) for c in columns}
    fam = next((f for f, family in FAMILIES.items() if all(n.keys & keys for n in family.needs)), None)
    if fam == "focus":
        return next((v for v, markers in FOCUS_VERSIONS if keys & markers), "focus-1.0")
    if fam == "aws":
        # AWS Data Exports (CUR 2.0) has a fixed snake_case schema with these columns CUR 1 never had.
        return "aws-cur2" if keys & {"billpayeraccountname", "lineitemusageaccountname"} else "aws-cur"
    return {"gcp": "gcp-billing", "azure": "azure-cost"}.get(fam or "")


def near_miss(columns: list[str] | tuple[str, ...]) -> str | None:
    """For a file of no known format that has three or more columns only one family of exports has, what it
    looks like and the needed columns it lacks: `looks like an AWS CUR but has no lineItem/UnblendedCost column
    (the billed cost)`. None for a file that looks like nothing."""
    keys = {norm(c) for c in columns}
    family = max(FAMILIES.values(), key=lambda f: sum(map(f.marks, columns)))  # the first of a tie
    missing = [n for n in family.needs if not n.keys & keys]
    if sum(map(family.marks, columns)) < 3 or not missing:
        return None
    snake = family is FAMILIES["aws"] and not any("/" in c for c in columns)  # Athena and CUR 2.0 spelling
    shown = [f"{_snake(n.shown) if snake else n.shown} column ({n.what})" for n in missing]
    return (f"looks like {family.name} but has no {' and no '.join(shown)}; gpu-auditor reads such an export "
            f"only with {'that column' if len(missing) == 1 else 'those columns'}")


def _snake(column: str) -> str:
    """`lineItem/UnblendedCost` as the Athena and CUR 2.0 exports spell it: `line_item_unblended_cost`."""
    return "_".join(re.sub(r"(?<!^)(?=[A-Z])", "_", part).lower() for part in column.split("/"))

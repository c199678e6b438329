"""Files read as one scan: the small files of one folder that share a format and columns (the parts AWS writes a
CUR in, a folder of daily exports) are one query, which costs what their lines cost rather than a fixed cost per
file. Their `costs` rows are grouped across the files (tables/normalize.py: rollup_sql with `files`); each file's
own figures come from the same read, by its name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from auditor.files import shown
from auditor.providers.billing.detect import Sniffed, sniff
from auditor.sql import lit
from auditor.tables.normalize import FILE, FILE_SET, GROUPS_SET, SCAN

# Files up to this size are read as one scan with others of their format and columns, up to BATCH_BYTES a scan
# (bytes on disk): the parts of an export, folders of daily files. A larger file is read on its own, where a
# query's fixed cost is small beside its lines', and Parquet is read in parallel and grouped by hash
# (normalize.py), which a scan of several files is not.
BATCH_FILE_BYTES = 4 << 20
BATCH_BYTES = 256 << 20


def batches(files: list[tuple[Path, str]], con: duckdb.DuckDBPyConnection) -> list[list[tuple[Sniffed, str]]]:
    """The files, sniffed, in batches read by one query each: small files in one folder, of the same format
    and columns (the parts of an export, a folder of daily files), are one scan, which costs what their lines
    cost rather than a query per file. A large file is a batch of its own, as is an Avro export (read through
    a copy). One folder: a re-delivered export comes in a folder of its own, and is found as such
    (Store._drop_redeliveries)."""
    batches: list[list[tuple[Sniffed, str]]] = []
    open_batch: dict[tuple, list[tuple[Sniffed, str]]] = {}
    size: dict[tuple, int] = {}
    for path, digest in files:
        sniffed = sniff(path, con)
        bytes_ = path.stat().st_size
        # (a name that is not UTF-8 is read through a link, whose name a scan of several would report: alone)
        if sniffed.container == "avro" or bytes_ > BATCH_FILE_BYTES or shown(path) != str(path):
            batches.append([(sniffed, digest)])
            continue
        key = (path.parent, sniffed.format, sniffed.container, sniffed.compression, sniffed.columns,
               sniffed.fields, sniffed.types, sniffed.has_bom, sniffed.serial)
        if key not in open_batch or size[key] + bytes_ > BATCH_BYTES:
            open_batch[key], size[key] = [], 0
            batches.append(open_batch[key])
        open_batch[key].append((sniffed, digest))
        size[key] += bytes_
    return batches


@dataclass
class FileFigures:
    """A file's own figures from a scan of several: those `SourceFile.stats` holds (its lines, charge period,
    and billed and effective cost per currency), the position of its first line in the read, and what the odd
    dates note needs: its lines dated before 2000, its first start, its lines dated after today, its last start."""

    stats: dict[str, Any]
    first_position: int
    odd: tuple[int, datetime | None, int, datetime | None]


def repeated(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a line is there twice in a group of the scan just made (normalize.scan_rollup_sql), every column
    alike: in one file (two charges alike) or in two (see `shared`)."""
    return con.execute(f"SELECT count(*) FROM {SCAN} WHERE __set = {GROUPS_SET} "
                       "AND len(list_distinct(__lhs)) < len(__lhs)").fetchone() != (0,)


def shared(relation: str, con: duckdb.DuckDBPyConnection) -> bool:
    """Whether two files of a scan share a line, every column alike (the same export delivered twice, in parts):
    then they are read one by one, and the re-delivery is found (Store._drop_redeliveries). Asked where a line is
    there twice (`repeated`), of the files again: their lines hashed whole, grouped, and the files holding each
    compared by name."""
    lines = f"SELECT hash(*COLUMNS(* EXCLUDE ({FILE}))) AS h, {FILE} AS f FROM {relation}"
    return con.execute(f"SELECT h FROM ({lines}) GROUP BY h HAVING min(f) <> max(f) LIMIT 1").fetchone() is not None


def figures(con: duckdb.DuckDBPyConnection) -> dict[str, FileFigures]:
    """Each file's own figures, from the scan of several just made (normalize.scan_rollup_sql: their `costs` rows
    are grouped across them, and each file's lines counted by the same read)."""
    rows = con.execute(f"""
        SELECT {FILE}, __cur, __lines, __pos, __t0, __t1, __billed, "__EffectiveCost", __old, __future, __last
        FROM {SCAN} WHERE __set = {FILE_SET} ORDER BY __pos""").fetchall()
    by_file: dict[str, list[tuple]] = {}
    for f, *row in rows:
        by_file.setdefault(f, []).append(tuple(row))
    out = {}
    for f, per_currency in by_file.items():  # a row per currency
        priced = [r for r in per_currency if r[5] is not None]
        stats = {"rows": sum(r[1] for r in per_currency),
                 "period_start": min((r[3] for r in per_currency if r[3] is not None), default=None),
                 "period_end": max((r[4] for r in per_currency if r[4] is not None), default=None),
                 "billed_cost": {r[0]: r[5] for r in priced}, "effective_cost": {r[0]: r[6] for r in priced}}
        out[f] = FileFigures(stats, min(r[2] for r in per_currency),
                             (sum(r[7] for r in per_currency), stats["period_start"], sum(r[8] for r in per_currency),
                              max((r[9] for r in per_currency if r[9] is not None), default=None)))
    return out


def starts(figures: dict[str, FileFigures]) -> str:
    """A VALUES list of each file and the position of its first line in the read."""
    return "VALUES " + ", ".join(f"({lit(f)}, {d.first_position})" for f, d in figures.items())


def number_in_files(figures: dict[str, FileFigures], first_row: int, con: duckdb.DuckDBPyConnection) -> None:
    """x_SourceRow of rows read with other files: from its first line's position in the read to that line's
    number in its file."""
    con.execute(f"UPDATE costs SET x_SourceRow = costs.x_SourceRow - s.pos + {first_row} "
                f"FROM ({starts(figures)}) s(f, pos) WHERE costs.x_SourceFile = s.f")


def numbered_in_files(lines: Callable[[], str], firsts: str, first_row: int) -> str:
    """The SELECT of lines of several files read as one, numbered in their read, numbered in each file."""
    return (f"SELECT l.* REPLACE (l.x_SourceRow - s.pos + {first_row} AS x_SourceRow) FROM ({lines()}) l "
            f"JOIN ({firsts}) s(f, pos) ON l.x_SourceFile = s.f")

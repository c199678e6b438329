"""Files read as one scan: the small files of one folder that share a format and columns (the parts AWS writes a
CUR in, a folder of daily exports) are one query, which costs what their lines cost rather than a fixed cost per
file. Their `costs` rows are grouped across the files (tables/normalize.py: rollup_sql with `files`); each file's
own figures come from the same read, by its name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from auditor.providers.billing.detect import Sniffed, sniff
from auditor.sql import lit
from auditor.tables.normalize import FILE

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
        if sniffed.container == "avro" or bytes_ > BATCH_FILE_BYTES:
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


def figures(exprs: dict[str, str], relation: str, first_row: int,
            con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Each file's own figures, from a scan of several (their `costs` rows are grouped across them): its
    lines, the position of its first line in the read, its charge period and billed and effective cost per
    currency, and its lines dated before 2000 or after today. Empty if two files share a line, every column
    alike (the same export delivered twice, in parts): then they are read one by one."""
    e = exprs
    rows = con.execute(f"""
        SELECT {FILE}, cur, count(*), min(pos), min(t0), max(t1), sum(billed), sum(effective),
               count(*) FILTER (t0 < TIMESTAMP '2000-01-01'),
               count(*) FILTER (t0 >= CAST(current_date + 1 AS TIMESTAMP)), max(t0), GROUPING({FILE})
        FROM (SELECT {FILE}, row_number() OVER () + {first_row - 1} AS pos, {e['BillingCurrency']} AS cur,
                     {e['BilledCost']} AS billed, {e['EffectiveCost']} AS effective,
                     {e['ChargePeriodStart']} AS t0, {e['ChargePeriodEnd']} AS t1,
                     hash(*COLUMNS(* EXCLUDE ({FILE}))) AS h
              FROM {relation})
        GROUP BY GROUPING SETS (({FILE}, cur), (h))
        HAVING GROUPING({FILE}) = 0 OR min({FILE}) <> max({FILE})
        ORDER BY 4""").fetchall()
    if any(r[-1] for r in rows):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for f, cur, n, pos, t0, t1, billed, effective, old, new, last, _ in rows:
        d = out.setdefault(f, {"rows": 0, "first_position": pos, "period_start": t0, "period_end": t1,
                               "billed_cost": {}, "effective_cost": {}, "old": 0, "new": 0, "last_start": last})
        d["rows"] += n
        d["first_position"] = min(d["first_position"], pos)
        d["period_start"], d["period_end"] = _least(d["period_start"], t0), _most(d["period_end"], t1)
        d["last_start"] = _most(d["last_start"], last)
        d["old"] += old
        d["new"] += new
        if billed is not None:
            d["billed_cost"][cur] = billed
            d["effective_cost"][cur] = effective
    return out

def number_in_files(figures: dict[str, dict[str, Any]], first_row: int, con: duckdb.DuckDBPyConnection) -> None:
    """x_SourceRow of rows read with other files: from its first line's position in the read to that line's
    number in its file."""
    starts = ", ".join(f"({lit(f)}, {d['first_position']})" for f, d in figures.items())
    con.execute(f"UPDATE costs SET x_SourceRow = costs.x_SourceRow - s.pos + {first_row} "
                f"FROM (VALUES {starts}) s(f, pos) WHERE costs.x_SourceFile = s.f")


def numbered_in_files(lines: Callable[[], str], starts: str, first_row: int) -> str:
    """The SELECT of lines of several files read as one, numbered in their read, numbered in each file."""
    return (f"SELECT l.* REPLACE (l.x_SourceRow - s.pos + {first_row} AS x_SourceRow) FROM ({lines()}) l "
            f"JOIN (VALUES {starts}) s(f, pos) ON l.x_SourceFile = s.f")


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _most(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)

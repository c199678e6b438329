"""The store: the normalized tables in an embedded DuckDB database, and reading billing files into them.

Billing lines are never looped over in Python: each file is read, summed per day and normalized by one
INSERT ... SELECT into `costs` (tables/normalize.py: rollup_sql), and every summary is a GROUP BY over it.
`Store.lines()` defines the view `lines`: the same files one row per billing line, for looking a line up;
nothing the audit reports reads it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from auditor.errors import InputError
from auditor.files import sha256_of
from auditor.providers.billing import aws, azure, focus, gcp
from auditor.providers.billing.columns import MONEY, Columns, check_types
from auditor.providers.billing.detect import MAX_LINE, Sniffed, expand, gzip_line_over, sniff
from auditor.providers.catalog import Catalog, load_catalog
from auditor.providers.redact import redact, redact_sql
from auditor.scratch import Scratch
from auditor.sql import lit
from auditor.tables import stats
from auditor.tables.normalize import CLASH, rollup_sql, select_sql
from auditor.tables.schema import COSTS, TABLES
from auditor.window import Window

PARALLEL_FILES = 4


READERS = {"aws-cur": aws.select, "aws-cur2": aws.select, "focus-1.0": focus.select, "focus-1.1": focus.select,
           "focus-1.2": focus.select, "focus-1.3": focus.select, "gcp-billing": gcp.select, "azure-cost": azure.select}
NULL_STRINGS = {f: ["", "NULL"] for f in ("focus-1.0", "focus-1.1", "focus-1.2", "focus-1.3")}


@dataclass
class SourceFile:
    path: str
    format: str
    sha256: str
    rows: int = 0
    cost_column: str | None = None  # the export's own column the billed cost is summed from
    duplicate_of: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def _csv_reason(error: str) -> str:
    """What is wrong, in words, from a DuckDB read error. Never its `Original Line:` echo: a line can be megabytes
    long, and can hold what should not be printed."""
    if m := re.search(r"Maximum line size of (\d+) bytes exceeded", error):
        return f"the line is longer than {int(m.group(1)):,} bytes, the longest line gpu-auditor reads"
    if m := re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", error):
        return f"the line has {m.group(2)} fields where the header has {m.group(1)}"
    if "unterminated quote" in error:
        return "a quoted value is never closed (a stray '\"')"
    if "Invalid unicode" in error:
        return "the line is not UTF-8 text (Latin-1 or Windows-1252?); save the file as UTF-8"
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    return redact(re.sub(r"^[A-Za-z ]*Error: ", "", first))[:200]


class Store:
    def __init__(self, catalog: Catalog | None = None, database: str = ":memory:"):
        # Large exports spill to the run's scratch folder instead of growing without bound; a folder left by a
        # run that was killed is removed here (scratch.py).
        self._spill = Scratch()
        if database == ":memory:":
            # A database file there rather than memory: DuckDB stores its tables compressed and keeps only what
            # fits the memory limit in memory, so ten million lines stay well under a gigabyte.
            database = os.path.join(self._spill.name, "audit.duckdb")
        self.con = duckdb.connect(database)
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(f"SET temp_directory = {lit(self._spill.name)}")
        self.con.execute(f"SET memory_limit = {lit(os.environ.get('GPU_AUDITOR_MEMORY_LIMIT', '384MB'))}")
        self.catalog = catalog or load_catalog()
        self.con.execute("BEGIN")  # one commit for the catalog's rows and the tables
        self.catalog.register(self.con)
        self.con.execute(TABLES)
        self.con.execute("COMMIT")
        self.sources: list[SourceFile] = []
        self.warnings: list[str] = []
        self.entities: dict[tuple[type, Window], list] = {}  # built once each (tables/entities.py)
        self._line_sql: dict[str, str] = {}  # per file read: the SELECT of its lines, for the `lines` view

    # ---- billing -------------------------------------------------------------------------------------
    def load_billing(self, paths: list[Path], progress: Callable[[str], None] | None = None) -> list[SourceFile]:
        files = list(self.distinct_files(paths))
        # Files are read side by side, each on its own connection (DuckDB appends to one table from several
        # at once), then registered in their order: the gain is largest on gzip CSV, read on one core per file.
        # At most PARALLEL_FILES: each file's grouping holds its own hash table within the one memory limit.
        workers = min(len(files), os.cpu_count() or 1, PARALLEL_FILES)
        cons = [self.con.cursor() for _ in range(workers)]
        free = list(cons)

        def read(item: tuple[int, tuple[Path, str]]) -> tuple[SourceFile, str]:
            i, (path, digest) = item
            if progress:
                progress(f"[{i}/{len(files)}] reading {path}")
            con = free.pop()
            try:
                return self._read(path, digest, con)
            finally:
                free.append(con)

        pool = ThreadPoolExecutor(max_workers=workers or 1)
        try:
            done = list(pool.map(read, enumerate(files, 1)))
        except BaseException:  # Ctrl-C, or a bad file: the files still being read stop now
            for con in cons:
                con.interrupt()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for con in cons:
                con.close()
        loaded = [self._register(source, line_sql) for source, line_sql in done]
        if len(loaded) > 1:
            self._drop_redeliveries(loaded)
        return [s for s in loaded if s.duplicate_of is None]

    def distinct_files(self, paths: list[Path], progress: Callable[[str], None] | None = None,
                       where: str = "") -> Iterator[tuple[Path, str]]:
        """(path, sha256) of each billing file under `paths` to read; a file whose content was read already is
        recorded as a duplicate, with a warning, and skipped. Every billing engine reads its files from here."""
        files = expand([Path(p) for p in paths], self.warnings)
        seen: dict[str, str] = {}
        for i, path in enumerate(files, 1):
            digest = sha256_of(path)
            if digest in seen:
                self.warnings.append(f"{path}: same content as {seen[digest]}; read once")
                self.sources.append(SourceFile(str(path), "duplicate", digest, duplicate_of=seen[digest]))
                continue
            seen[digest] = str(path)
            if progress:
                progress(f"[{i}/{len(files)}] reading {path}{where}")
            yield path, digest

    def _drop_redeliveries(self, loaded: list[SourceFile]) -> None:
        """A month exported twice (a re-delivered CUR, a second download) shares most of its lines with the
        first copy. Of two files that share over half their lines, keep the one that reaches later (then the
        larger) and drop the other, so no line is counted twice."""
        # Lines can only be shared where the files' charge periods overlap: compare just those files (monthly
        # files of one export never do, and hashing every line of ten million is the costly part).
        spans = self.con.execute("SELECT x_SourceFile, min(ChargePeriodStart), max(ChargePeriodStart) FROM costs "
                                 "GROUP BY ALL").fetchall()
        overlapping = sorted({a for a, s1, e1 in spans for b, s2, e2 in spans if a != b and s1 <= e2 and s2 <= e1})
        if not overlapping:
            return
        pairs = self.con.execute(f"""
            WITH k AS (SELECT x_SourceFile AS f, hash({LINE_KEY}) AS h, sum(x_Lines) AS n FROM costs
                       WHERE x_SourceFile IN ({', '.join(lit(f) for f in overlapping)}) GROUP BY ALL)
            SELECT a.f, b.f, sum(least(a.n, b.n)) FROM k a JOIN k b ON a.h = b.h AND a.f < b.f
            GROUP BY ALL""").fetchall()
        by_path = {s.path: s for s in loaded}
        for a, b, shared in pairs:
            sa, sb = by_path[a], by_path[b]
            if sa.duplicate_of or sb.duplicate_of or shared * 2 <= min(sa.rows, sb.rows):
                continue
            rank = lambda s: (s.stats["period_end"], s.rows, s.path)  # noqa: E731
            keep, drop = (sa, sb) if rank(sa) >= rank(sb) else (sb, sa)
            self.con.execute("DELETE FROM costs WHERE x_SourceFile = ?", [drop.path])
            self._line_sql.pop(drop.path, None)
            drop.duplicate_of = keep.path
            self.warnings.append(f"{drop.path}: {shared:,} of its {drop.rows:,} lines are also in {keep.path} "
                                 "(a re-delivered export?); counted once, from the latter")

    def reader_sql(self, fmt: str, cols: Columns) -> tuple[dict[str, str], list[tuple[str, str]]]:
        """The reader's SQL expressions for the `costs` columns (shared by DuckDB and Spark), and its checks."""
        exprs, checks = READERS[fmt](cols, self.catalog)
        exprs["Tags"] = f"COALESCE({exprs['Tags']}, CAST(MAP() AS MAP(VARCHAR, VARCHAR)))"  # no tags: an empty map
        # Presigned and SAS URLs in tags lose their query strings before they are stored (redact.py); the map is
        # built once per distinct tag set (normalize.py). Resource ids: see _redact_ids.
        exprs["Tags"] = (f"map_from_entries(list_transform(map_entries({exprs['Tags']}), lambda e: "
                         f"{{'key': e.key, 'value': {redact_sql('e.value')}}}))")
        return exprs, checks

    def load_file(self, path: Path, digest: str | None = None) -> SourceFile:
        """Read one billing file into `costs`."""
        return self._register(*self._read(path, digest or sha256_of(path), self.con))

    def _read(self, path: Path, digest: str, con: duckdb.DuckDBPyConnection) -> tuple[SourceFile, str]:
        """Read, group and classify one file into `costs` on `con`, in one transaction; with the SELECT of its
        lines, for the `lines` view."""
        sniffed = sniff(path, con)
        source = SourceFile(str(path), sniffed.format, digest)
        cols = Columns(sniffed.columns, sniffed.fields, sniffed.types)
        exprs, checks = self.reader_sql(sniffed.format, cols)
        check_types(cols, checks, str(path))  # a BOOLEAN cost column: refused, not summed as 1 a line
        source.cost_column = next((c for c, kind in checks if kind == "money"), None)
        relation = self._relation(sniffed)
        first_row = 2 if sniffed.container == "csv" else 1  # CSV rows are counted as lines, after the header
        # One INSERT ... SELECT of the lines summed per day; classification runs on those sums (normalize.py).
        # Parquet numbers its rows itself, which keeps the scan parallel; row_number() OVER () reads in order.
        parquet = sniffed.container == "parquet"
        numbers = "(file_row_number + 1)" if parquet else "row_number() OVER ()"
        for by_hash in ((True, False) if parquet else (False,)):
            sql = "INSERT INTO costs BY NAME " + rollup_sql(exprs, cols, relation, first_row, str(path),
                                                            sniffed.format, list(COSTS), numbers, by_hash, parquet)
            try:
                con.execute("BEGIN")
                con.execute(sql)
                self._check_values(path, con)
                self._redact_ids(path, con)
                con.execute("COMMIT")
                break
            except duckdb.InterruptException:  # Ctrl-C, or another file failed: stop, without a diagnosis
                con.execute("ROLLBACK")
                raise KeyboardInterrupt from None
            except duckdb.Error as e:
                con.execute("ROLLBACK")
                if by_hash and CLASH in str(e):
                    continue  # two keys shared a hash: group by the key columns themselves
                raise self._diagnose(con, sniffed, cols, relation, checks, first_row, e) from None
            except InputError:
                con.execute("ROLLBACK")
                raise
            except RuntimeError as e:  # DuckDB answers Ctrl-C during a query with RuntimeError('Query interrupted')
                con.execute("ROLLBACK")
                if "interrupted" in str(e).lower():
                    raise KeyboardInterrupt from None
                raise
        if not con.execute("SELECT count(*) FROM costs WHERE x_SourceFile = ?", [str(path)]).fetchone()[0]:
            raise InputError("the file has a header but no billing lines", path=str(path))
        # The same file, line by line (nothing is read until the view is queried).
        by_line = {**exprs, "x_Lines": "1", "ResourceId": self._redacted_id(exprs["ResourceId"])}
        return source, select_sql(by_line, cols, relation, first_row, str(path), sniffed.format, list(COSTS), numbers)

    def _register(self, source: SourceFile, line_sql: str | None) -> SourceFile:
        """A file read into `costs` (by DuckDB or Spark): its figures, its warnings, and the SELECT of its lines
        for the `lines` view where DuckDB can read the file itself."""
        source.stats = stats.file_stats(self.con, source.path)
        source.rows = source.stats["rows"]
        if line_sql is not None:
            self._line_sql[source.path] = line_sql
        self._note_odd(source)
        self.sources.append(source)
        return source

    def _note_odd(self, source: SourceFile) -> None:
        """Legal but odd: lines in several currencies (each totalled on its own), and charges dated before 2000
        or after today (UTC), which an export should not have. Read and counted as they are, with a warning."""
        currencies = sorted(source.stats.get("billed_cost") or {})
        if len(currencies) > 1:
            self.warnings.append(f"{source.path}: lines in {len(currencies)} currencies ({', '.join(currencies)}); "
                                 "each is totalled on its own, never added to another")
        # fetchall: a result left open (fetchone) blocks the next con.register, as Spark's next file does
        [(old, first, new, last)] = self.con.execute(
            "SELECT sum(x_Lines) FILTER (WHERE ChargePeriodStart < TIMESTAMP '2000-01-01'), min(ChargePeriodStart), "
            "sum(x_Lines) FILTER (WHERE ChargePeriodStart >= CAST(current_date + 1 AS TIMESTAMP)), "
            "max(ChargePeriodStart) FROM costs WHERE x_SourceFile = ?", [source.path]).fetchall()
        if old:
            self.warnings.append(f"{source.path}: {old:,} line(s) charged before 2000 (the first on "
                                 f"{first.date().isoformat()}); read as they are: check the export's dates")
        if new:
            self.warnings.append(f"{source.path}: {new:,} line(s) charged after today (the last on "
                                 f"{last.date().isoformat()}); read as they are: check the export's dates")

    def _relation(self, s: Sniffed) -> str:
        p = lit(str(s.path))
        if s.container == "parquet":
            return f"read_parquet({p}, file_row_number = true)"
        if s.container == "json":
            return f"read_ndjson({p})"
        if s.container == "avro":  # DuckDB reads Avro only with a downloaded extension: a Parquet copy (avro.py)
            from auditor.providers.billing.avro import to_parquet

            return f"read_parquet({lit(str(to_parquet(s.path, self._spill.name)))})"
        nulls = "[" + ", ".join(lit(n) for n in NULL_STRINGS.get(s.format, [""])) + "]"
        # The header was read already; naming the columns turns DuckDB's sniffer off, so a ragged or
        # unquoted row is an error with its line rather than a guess.
        columns = "{" + ", ".join(f"{lit(c)}: 'VARCHAR'" for c in s.columns) + "}"
        return (f"read_csv({p}, header = true, auto_detect = false, columns = {columns}, delim = ',', "
                f"quote = '\"', escape = '\"', nullstr = {nulls}, compression = {lit(s.compression)}, "
                f"strict_mode = true, encoding = 'utf-8'{', parallel = false' if s.serial else ''})")

    def lines(self) -> duckdb.DuckDBPyConnection:
        """The connection, with the view `lines` over the files read so far: their billing lines, one row each,
        normalized as `costs` is but not summed (for looking a line up; nothing the audit reports reads it).
        Made when asked for: defining it binds every file's SELECT, tens of milliseconds a file."""
        body = " UNION ALL BY NAME ".join(f"({sql})" for sql in self._line_sql.values())
        self.con.execute(f"CREATE OR REPLACE VIEW lines AS {body or 'SELECT * FROM costs WHERE false'}")
        return self.con

    @staticmethod
    def _redacted_id(expr: str) -> str:
        return (f"CASE WHEN contains({expr}, '://') OR contains({expr}, '=') THEN {redact_sql(expr)} "
                f"ELSE {expr} END")

    def _redact_ids(self, path: Path, con: duckdb.DuckDBPyConnection) -> None:
        """Resource ids that hold a URL or a credential parameter, redacted (redact.py) in the few lines that
        do: an UPDATE after the INSERT, so the common id stays a plain per-line column there."""
        con.execute(f"UPDATE costs SET ResourceId = {redact_sql('ResourceId')} WHERE x_SourceFile = ? "
                         "AND (contains(ResourceId, '://') OR contains(ResourceId, '='))", [str(path)])

    def _check_values(self, path: Path, con: duckdb.DuckDBPyConnection) -> None:
        """Lines whose cost or time is missing cannot be counted: say which, rather than drop them."""
        bad = con.execute(
            "SELECT x_SourceRow, BilledCost IS NULL, ChargePeriodStart IS NULL FROM costs "
            "WHERE x_SourceFile = ? AND (BilledCost IS NULL OR ChargePeriodStart IS NULL) "
            "ORDER BY x_SourceRow LIMIT 1", [str(path)]).fetchone()
        if bad:
            what = "the cost is empty" if bad[1] else "the charge period start is empty"
            raise InputError(f"{what}; every billing line needs a cost and a start time",
                             path=str(path), line=bad[0])

    def _diagnose(self, con: duckdb.DuckDBPyConnection, s: Sniffed, cols: Columns, relation: str,
                  checks: list[tuple[str, str]], first_row: int, error: duckdb.Error) -> InputError:
        """Turn a DuckDB error into one line that names the file, the line and the column."""
        if s.container == "csv" and s.compression == "gzip" and (line := gzip_line_over(s.path)):
            # DuckDB holds a line whole before refusing it: a long line (or a gzip bomb's endless one) was
            # miscounted as a ragged line, or ended in DuckDB's allocation error naming no file
            return InputError(f"cannot read the file: the line is longer than {MAX_LINE:,} bytes, the longest line "
                              "gpu-auditor reads", path=str(s.path), line=line)
        tests = {"money": f"TRY_CAST(v AS {MONEY}) IS NULL", "time": "TRY_CAST(v AS TIMESTAMPTZ) IS NULL",
                 "date": f"({azure.parse_date('trim(CAST(v AS VARCHAR))', try_=True)}) IS NULL",
                 "tags": "NOT json_valid(CASE WHEN starts_with(trim(v), '{') THEN trim(v) ELSE '{' || v || '}' END)",
                 "json": "NOT json_valid(CAST(v AS VARCHAR)) OR json_type(CAST(v AS VARCHAR)) <> 'OBJECT'"}
        want = {"money": "a number", "time": "a UTC time like 2026-07-01T00:00:00Z", "json": "a JSON object",
                "date": "a date like 09/21/2023 or 2023-09-21", "tags": "a JSON object of tags"}
        try:
            for column, kind in checks:
                row = con.execute(
                    f"SELECT rn, v FROM (SELECT row_number() OVER () + {first_row - 1} AS rn, {cols.ref(column)} AS v "
                    f"FROM {relation}) WHERE v IS NOT NULL AND ({tests[kind]}) ORDER BY rn LIMIT 1").fetchone()
                if row:
                    shown = f"{redact(str(row[1]))[:60]!r}"
                    if kind == "money" and con.execute("SELECT isfinite(TRY_CAST(? AS DOUBLE))",
                                                            [str(row[1])]).fetchone()[0]:
                        return InputError(f"{shown} is out of range: an amount has at most 20 digits before the "
                                          "decimal point", path=str(s.path), line=row[0], column=column)
                    return InputError(f"{shown} is not {want[kind]}", path=str(s.path), line=row[0],
                                      column=column)
        except duckdb.Error as e:
            error = e
        line = re.search(r"[Ll]ine:? (\d+)", str(error))
        return InputError(f"cannot read the file: {_csv_reason(str(error))}", path=str(s.path),
                          line=int(line.group(1)) if line else None)

    # ---- inventory -----------------------------------------------------------------------------------
    def _insert_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Rows (dicts by column name; keys the table lacks are left out) into a table, through a newline-JSON
        file DuckDB reads in one statement: parameters row by row take seconds for an inventory of thousands."""
        if not rows:
            return
        columns = self.con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                                   "ORDER BY column_index", [table]).fetchall()
        path = os.path.join(self._spill.name, f"{table}.ndjson")

        def plain(v: Any) -> Any:  # times as naive UTC text, as the tables hold them
            if isinstance(v, datetime):
                return (v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v).isoformat(" ")
            return float(v) if isinstance(v, Decimal) else str(v)

        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({c: r.get(c) for c, _ in columns}, default=plain) + "\n")
        spec = "{" + ", ".join(f"{lit(c)}: {lit(t)}" for c, t in columns) + "}"
        self.con.execute(f"INSERT INTO {table} SELECT * FROM read_json({lit(path)}, format = 'newline_delimited', "
                         f"columns = {spec})")
        os.unlink(path)

    def load_snapshot(self, doc: dict[str, Any]) -> None:
        for table in ("assets", "gpu_usage", "jobs", "gpu_units", "gpu_allocations", "slice_usage"):
            self._insert_rows(table, doc.get(table) or [])

    # ---- summaries -----------------------------------------------------------------------------------
    def data_window(self) -> Window | None:
        start, end = self.con.execute("SELECT min(ChargePeriodStart), max(ChargePeriodEnd) FROM costs").fetchone()
        if start is None:
            return None
        return Window(start, end or start, "")


# What makes two billing lines the same line, for finding a month exported twice.
LINE_KEY = ("x_Provider, BillingAccountId, SubAccountId, ChargePeriodStart, ChargePeriodEnd, ResourceId, "
            "x_UsageType, SkuId, ChargeDescription, BilledCost, ConsumedQuantity, ChargeCategory")

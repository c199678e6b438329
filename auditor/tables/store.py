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
from functools import partial
from pathlib import Path
from typing import Any

import duckdb

from auditor.errors import InputError, out_of_memory
from auditor.files import sha256_of
from auditor.providers.billing import aws, azure, focus, gcp
from auditor.providers.billing.columns import MONEY, Columns, check_types
from auditor.providers.billing.detect import MAX_LINE, Sniffed, expand, gzip_line_over, sniff
from auditor.providers.catalog import Catalog, load_catalog
from auditor.providers.redact import redact, redact_sql
from auditor.scratch import Scratch
from auditor.sql import lit
from auditor.tables import stats
from auditor.tables.normalize import CLASH, FILE, rollup_sql, select_sql
from auditor.tables.schema import COSTS, TABLES
from auditor.window import Window

PARALLEL_FILES = 4
# Files up to this size are read as one scan with others of their format and columns, up to BATCH_BYTES a scan
# (bytes on disk): the parts of an export, folders of daily files. A larger file is read on its own.
BATCH_FILE_BYTES = 64 << 20
BATCH_BYTES = 256 << 20


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
    part_of: str | None = None  # the scan it was read in with others of its export (Store.parts), if any


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
        # Files read as one scan (the parts of an export): label -> their paths and the figures of them all.
        self.parts: dict[str, dict[str, Any]] = {}
        # Per file read: the SELECT of its lines, for the `lines` view, written when the view is made.
        self._line_sql: dict[str, Callable[[], str]] = {}

    # ---- billing -------------------------------------------------------------------------------------
    def load_billing(self, paths: list[Path], progress: Callable[[str], None] | None = None) -> list[SourceFile]:
        files = list(self.distinct_files(paths))
        batches = self._batches(files)
        # Batches are read side by side, each on its own connection (DuckDB appends to one table from several
        # at once), then registered in their order: the gain is largest on gzip CSV, read on one core per file.
        # At most PARALLEL_FILES: each grouping holds its own hash table within the one memory limit.
        workers = min(len(batches), os.cpu_count() or 1, PARALLEL_FILES)
        cons = [self.con.cursor() for _ in range(workers)]
        free = list(cons)
        firsts = [sum(len(b) for b in batches[:i]) + 1 for i in range(len(batches))]

        def read(i: int) -> list[tuple[SourceFile, str]]:
            batch, first = batches[i], firsts[i]
            if progress:
                last = first + len(batch) - 1
                progress(f"[{first}/{len(files)}] reading {batch[0][0].path}" if len(batch) == 1 else
                         f"[{first}-{last}/{len(files)}] reading {len(batch):,} files as one, "
                         f"{batch[0][0].path} to {batch[-1][0].path}")
            con = free.pop()
            try:
                return self._read(batch, con)
            finally:
                free.append(con)

        pool = ThreadPoolExecutor(max_workers=workers or 1)
        try:
            done = [pair for pairs in pool.map(read, range(len(batches))) for pair in pairs]
        except BaseException:  # Ctrl-C, or a bad file: the files still being read stop now
            for con in cons:
                con.interrupt()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for con in cons:
                con.close()
        loaded = self._register_all(done)
        if len(loaded) > 1:
            self._drop_redeliveries(loaded)
        return [s for s in loaded if s.duplicate_of is None]

    def _batches(self, files: list[tuple[Path, str]]) -> list[list[tuple[Sniffed, str]]]:
        """The files, sniffed, in batches read by one query each: small files in one folder, of the same format
        and columns (the parts of an export, a folder of daily files), are one scan, which costs what their lines
        cost rather than a query per file. A large file is a batch of its own, as is an Avro export (read through
        a copy). One folder: a re-delivered export comes in a folder of its own, and is found as such
        (_drop_redeliveries)."""
        batches: list[list[tuple[Sniffed, str]]] = []
        open_batch: dict[tuple, list[tuple[Sniffed, str]]] = {}
        size: dict[tuple, int] = {}
        for path, digest in files:
            sniffed = sniff(path, self.con)
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
        first copy. Of two exports that share over half their lines, keep the one that reaches later (then the
        larger) and drop the other, so no line is counted twice. An export is a file, or the files read as one
        scan (the parts of one delivery, in one folder: lines shared between them are found as they are read)."""
        unit = {s.path: s.part_of or s.path for s in loaded}
        members: dict[str, list[SourceFile]] = {}
        for s in loaded:
            members.setdefault(unit[s.path], []).append(s)
        self.con.execute("CREATE OR REPLACE TEMP TABLE __units (file VARCHAR, unit VARCHAR)")
        self.con.executemany("INSERT INTO __units VALUES (?, ?)", list(unit.items()))
        # Lines can only be shared where the exports' charge periods overlap: compare just those (monthly
        # files of one export never do, and hashing every line of ten million is the costly part).
        spans = self.con.execute("SELECT unit, min(ChargePeriodStart), max(ChargePeriodStart) FROM costs "
                                 "JOIN __units ON x_SourceFile = file GROUP BY ALL").fetchall()
        overlapping = _overlapping(spans)
        if overlapping:
            pairs = self.con.execute(f"""
                WITH k AS (SELECT unit AS f, hash({LINE_KEY}) AS h, sum(x_Lines) AS n FROM costs
                           JOIN __units ON x_SourceFile = file
                           WHERE unit IN ({', '.join(lit(f) for f in overlapping)}) GROUP BY ALL)
                SELECT a.f, b.f, sum(least(a.n, b.n)) FROM k a JOIN k b ON a.h = b.h AND a.f < b.f
                GROUP BY ALL""").fetchall()
            for a, b, shared in pairs:
                self._drop_one_of(members[a], members[b], shared)
        self.con.execute("DROP TABLE __units")

    def _drop_one_of(self, a: list[SourceFile], b: list[SourceFile], shared: int) -> None:
        """Of two exports (their files) that share `shared` lines, drop the earlier if that is over half."""
        rows = lambda files: sum(s.rows for s in files)  # noqa: E731
        if a[0].duplicate_of or b[0].duplicate_of or shared * 2 <= min(rows(a), rows(b)):
            return
        rank = lambda files: (max(s.stats["period_end"] for s in files), rows(files), files[0].path)  # noqa: E731
        keep, drop = (a, b) if rank(a) >= rank(b) else (b, a)
        kept, dropped = keep[0].part_of or keep[0].path, drop[0].part_of or drop[0].path
        self.con.execute(f"DELETE FROM costs WHERE {_among([s.path for s in drop])}")
        self._line_sql.pop(dropped, None)
        for s in drop:
            s.duplicate_of = kept
        self.parts.pop(dropped, None)
        self.warnings.append(f"{dropped}: {shared:,} of its {rows(drop):,} lines are also in {kept} "
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
        [pair] = self._read([(sniff(path, self.con), digest or sha256_of(path))], self.con)
        return self._register_all([pair])[0]

    def _read(self, batch: list[tuple[Sniffed, str]],
              con: duckdb.DuckDBPyConnection) -> list[tuple[SourceFile, Callable[[], str]]]:
        """Read, group and classify a batch of files (of one format and columns) into `costs` on `con`, in one
        transaction and one scan; with the SELECT of each file's lines, for the `lines` view. Should the batch
        fail, or its files share lines, its files are read one by one, as files read alone are: that names the
        file, line and column at fault, and finds a file delivered twice."""
        sniffed = batch[0][0]
        paths = [str(s.path) for s, _ in batch]
        cols = Columns(sniffed.columns, sniffed.fields, sniffed.types)
        exprs, checks = self.reader_sql(sniffed.format, cols)
        check_types(cols, checks, paths[0])  # a BOOLEAN cost column: refused, not summed as 1 a line
        cost_column = next((c for c, kind in checks if kind == "money"), None)
        many = len(batch) > 1
        relation = self._relation(sniffed, paths if many else None)
        first_row = 2 if sniffed.container == "csv" else 1  # CSV rows are counted as lines, after the header
        one_by_one = lambda: [pair for one in batch for pair in self._read([one], con)]  # noqa: E731
        figures: dict[str, dict[str, Any]] = {}
        if many:
            try:
                figures = self._part_figures(exprs, relation, first_row, con)
            except duckdb.InterruptException:
                raise KeyboardInterrupt from None
            except duckdb.Error:
                return one_by_one()
            if not figures:
                return one_by_one()
        # One INSERT ... SELECT of the lines summed per day; classification runs on those sums (normalize.py).
        # A Parquet file numbers its rows itself, which keeps the scan parallel; row_number() OVER () reads in
        # order (several files: one after another).
        parquet = sniffed.container == "parquet" and not many
        numbers = "(file_row_number + 1)" if parquet else "row_number() OVER ()"
        for by_hash in ((True, False) if parquet else (False,)):
            sql = "INSERT INTO costs BY NAME " + rollup_sql(exprs, cols, relation, first_row, paths[0],
                                                            sniffed.format, list(COSTS), numbers, by_hash, parquet,
                                                            files=many)
            try:
                con.execute("BEGIN")
                con.execute(sql)
                if many:
                    self._number_in_files(figures, first_row, con)
                self._check_values(paths, con)
                self._redact_ids(paths, con)
                con.execute("COMMIT")
                break
            except duckdb.InterruptException:  # Ctrl-C, or another file failed: stop, without a diagnosis
                con.execute("ROLLBACK")
                raise KeyboardInterrupt from None
            except duckdb.Error as e:
                con.execute("ROLLBACK")
                if by_hash and CLASH in str(e):
                    continue  # two keys shared a hash: group by the key columns themselves
                if many:  # which file? each on its own says
                    return one_by_one()
                raise self._diagnose(con, sniffed, cols, relation, checks, first_row, e) from None
            except InputError:
                con.execute("ROLLBACK")
                raise
            except RuntimeError as e:  # DuckDB answers Ctrl-C during a query with RuntimeError('Query interrupted')
                con.execute("ROLLBACK")
                if "interrupted" in str(e).lower():
                    raise KeyboardInterrupt from None
                raise
        read = set(figures) or {f for (f,) in con.execute(
            f"SELECT DISTINCT x_SourceFile FROM costs WHERE {_among(paths)}").fetchall()}
        if empty := next((p for p in paths if p not in read), None):
            raise InputError("the file has a header but no billing lines", path=empty)
        label = f"{Path(paths[0]).parent}: {len(paths):,} files, {Path(paths[0]).name} to {Path(paths[-1]).name}"
        # The files, line by line (nothing is read until the view is queried): the lines of a scan of several
        # are numbered in the read, and in each file from the position of its first line.
        by_line = {**exprs, "x_Lines": "1", "ResourceId": self._redacted_id(exprs["ResourceId"])}
        lines = partial(select_sql, by_line, cols, relation, first_row, paths[0], sniffed.format, list(COSTS), numbers,
                        many)
        if many:
            starts = ", ".join(f"({lit(f)}, {d['first_position']})" for f, d in figures.items())
            lines = partial(_numbered_in_files, lines, starts, first_row)
        return [(SourceFile(str(s.path), s.format, digest, cost_column=cost_column, stats=figures.get(str(s.path), {}),
                            part_of=label if many else None), lines) for s, digest in batch]

    @staticmethod
    def _part_figures(exprs: dict[str, str], relation: str, first_row: int,
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

    @staticmethod
    def _number_in_files(figures: dict[str, dict[str, Any]], first_row: int, con: duckdb.DuckDBPyConnection) -> None:
        """x_SourceRow of rows read with other files: from its first line's position in the read to that line's
        number in its file."""
        starts = ", ".join(f"({lit(f)}, {d['first_position']})" for f, d in figures.items())
        con.execute(f"UPDATE costs SET x_SourceRow = costs.x_SourceRow - s.pos + {first_row} "
                    f"FROM (VALUES {starts}) s(f, pos) WHERE costs.x_SourceFile = s.f")

    def _register(self, source: SourceFile, line_sql: Callable[[], str] | None) -> SourceFile:
        """A file read into `costs` by Spark (see _register_all)."""
        return self._register_all([(source, line_sql)])[0]

    def _register_all(self, read: list[tuple[SourceFile, Callable[[], str] | None]]) -> list[SourceFile]:
        """Files read into `costs` (by DuckDB or Spark): their figures (one scan for all), their warnings, and the
        SELECT of their lines for the `lines` view where DuckDB can read the file itself."""
        alone = [source.path for source, _ in read if source.part_of is None]
        figures = stats.file_stats(self.con, alone) if alone else {}
        parts: dict[str, list[str]] = {}
        for source, line_sql in read:
            if source.part_of is None:
                source.stats = figures[source.path]
            else:
                parts.setdefault(source.part_of, []).append(source.path)
            source.rows = source.stats["rows"]
            if line_sql is not None:  # one SELECT for the files of a scan
                self._line_sql[source.part_of or source.path] = line_sql
            self.sources.append(source)
        for label, paths in parts.items():  # the figures of files read as one, all together
            self.parts[label] = {"files": paths, "stats": stats.file_stats(self.con, paths, together=True)}
        self._note_odd([source for source, _ in read])
        for source, _ in read:  # what only the notes read
            for k in ("first_position", "old", "new", "last_start"):
                source.stats.pop(k, None)
        return [source for source, _ in read]

    def _note_odd(self, sources: list[SourceFile]) -> None:
        """Legal but odd: lines in several currencies (each totalled on its own), and charges dated before 2000
        or after today (UTC), which an export should not have. Read and counted as they are, with a warning."""
        # fetchall: a result left open (fetchone) blocks the next con.register, as Spark's next file does
        alone = [s.path for s in sources if s.part_of is None]
        odd = {f: rest for f, *rest in self.con.execute(
            "SELECT x_SourceFile, sum(x_Lines) FILTER (WHERE ChargePeriodStart < TIMESTAMP '2000-01-01'), "
            "min(ChargePeriodStart), sum(x_Lines) FILTER (WHERE ChargePeriodStart >= "
            "CAST(current_date + 1 AS TIMESTAMP)), max(ChargePeriodStart) FROM costs "
            f"WHERE {_among(alone)} GROUP BY ALL").fetchall()} if alone else {}
        for source in sources:
            st = source.stats
            found = ((st["old"], st["period_start"], st["new"], st["last_start"]) if source.part_of
                     else odd.get(source.path, (None, None, None, None)))
            self._note_odd_file(source, *found)

    def _note_odd_file(self, source: SourceFile, old: int | None, first: datetime | None, new: int | None,
                       last: datetime | None) -> None:
        currencies = sorted(source.stats.get("billed_cost") or {})
        if len(currencies) > 1:
            self.warnings.append(f"{source.path}: lines in {len(currencies)} currencies ({', '.join(currencies)}); "
                                 "each is totalled on its own, never added to another")
        if old:
            self.warnings.append(f"{source.path}: {old:,} line(s) charged before 2000 (the first on "
                                 f"{first.date().isoformat()}); read as they are: check the export's dates")
        if new:
            self.warnings.append(f"{source.path}: {new:,} line(s) charged after today (the last on "
                                 f"{last.date().isoformat()}); read as they are: check the export's dates")

    def _relation(self, s: Sniffed, paths: list[str] | None = None) -> str:
        """The read of a sniffed file; or of several like it, as one scan naming each line's file (FILE)."""
        p = lit(str(s.path)) if paths is None else "[" + ", ".join(lit(x) for x in paths) + "]"
        named = "" if paths is None else f", filename = {lit(FILE)}"
        if s.container == "parquet":
            return f"read_parquet({p}, file_row_number = true{named})"
        if s.container == "json":
            return f"read_ndjson({p}{named})"
        if s.container == "avro":  # DuckDB reads Avro only with a downloaded extension: a Parquet copy (avro.py)
            from auditor.providers.billing.avro import to_parquet

            return f"read_parquet({lit(str(to_parquet(s.path, self._spill.name)))})"
        nulls = "[" + ", ".join(lit(n) for n in NULL_STRINGS.get(s.format, [""])) + "]"
        # The header was read already; naming the columns turns DuckDB's sniffer off, so a ragged or
        # unquoted row is an error with its line rather than a guess.
        columns = "{" + ", ".join(f"{lit(c)}: 'VARCHAR'" for c in s.columns) + "}"
        return (f"read_csv({p}, header = true, auto_detect = false, columns = {columns}, delim = ',', "
                f"quote = '\"', escape = '\"', nullstr = {nulls}, compression = {lit(s.compression)}, "
                f"strict_mode = true, encoding = 'utf-8'{', parallel = false' if s.serial else ''}{named})")

    def lines(self) -> duckdb.DuckDBPyConnection:
        """The connection, with the view `lines` over the files read so far: their billing lines, one row each,
        normalized as `costs` is but not summed (for looking a line up; nothing the audit reports reads it).
        Made when asked for: defining it binds every file's SELECT, tens of milliseconds a file."""
        body = " UNION ALL BY NAME ".join(f"({sql()})" for sql in self._line_sql.values())
        self.con.execute(f"CREATE OR REPLACE VIEW lines AS {body or 'SELECT * FROM costs WHERE false'}")
        return self.con

    @staticmethod
    def _redacted_id(expr: str) -> str:
        return (f"CASE WHEN contains({expr}, '://') OR contains({expr}, '=') THEN {redact_sql(expr)} "
                f"ELSE {expr} END")

    def _redact_ids(self, paths: list[str], con: duckdb.DuckDBPyConnection) -> None:
        """Resource ids that hold a URL or a credential parameter, redacted (redact.py) in the few lines that
        do: an UPDATE after the INSERT, so the common id stays a plain per-line column there."""
        con.execute(f"UPDATE costs SET ResourceId = {redact_sql('ResourceId')} WHERE {_among(paths)} "
                    "AND (contains(ResourceId, '://') OR contains(ResourceId, '='))")

    def _check_values(self, paths: list[str], con: duckdb.DuckDBPyConnection) -> None:
        """Lines whose cost or time is missing cannot be counted: say which, rather than drop them."""
        bad = con.execute(
            "SELECT x_SourceFile, x_SourceRow, BilledCost IS NULL, ChargePeriodStart IS NULL FROM costs "
            f"WHERE {_among(paths)} AND (BilledCost IS NULL OR ChargePeriodStart IS NULL) "
            "QUALIFY row_number() OVER (PARTITION BY x_SourceFile ORDER BY x_SourceRow) = 1").fetchall()
        if bad:
            order = {p: i for i, p in enumerate(paths)}
            path, row, no_cost, _ = min(bad, key=lambda b: (order[b[0]], b[1]))
            what = "the cost is empty" if no_cost else "the charge period start is empty"
            raise InputError(f"{what}; every billing line needs a cost and a start time", path=path, line=row)

    def _diagnose(self, con: duckdb.DuckDBPyConnection, s: Sniffed, cols: Columns, relation: str,
                  checks: list[tuple[str, str]], first_row: int, error: duckdb.Error) -> InputError:
        """Turn a DuckDB error into one line that names the file, the line and the column."""
        if s.container == "csv" and s.compression == "gzip" and (line := gzip_line_over(s.path)):
            # DuckDB holds a line whole before refusing it: a long line (or a gzip bomb's endless one) was
            # miscounted as a ragged line, or ended in DuckDB's allocation error naming no file
            return InputError(f"cannot read the file: the line is longer than {MAX_LINE:,} bytes, the longest line "
                              "gpu-auditor reads", path=str(s.path), line=line)
        if isinstance(error, duckdb.OutOfMemoryException):  # not a bad file: a limit to raise
            return out_of_memory(str(s.path))
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


def _overlapping(spans: list[tuple[str, Any, Any]]) -> list[str]:
    """The names of the (name, start, end) spans that overlap another. Sorted by start, a span overlaps an
    earlier one if the furthest end before it reaches its start, and a later one if the next start is in it."""
    spans = sorted(spans, key=lambda s: (s[1], s[2], s[0]))
    found, reach = set(), None
    for i, (name, start, end) in enumerate(spans):
        if (reach is not None and reach >= start) or (i + 1 < len(spans) and spans[i + 1][1] <= end):
            found.add(name)
        reach = end if reach is None else max(reach, end)
    return sorted(found)


def _numbered_in_files(lines: Callable[[], str], starts: str, first_row: int) -> str:
    """The SELECT of lines of several files read as one, numbered in their read, numbered in each file."""
    return (f"SELECT l.* REPLACE (l.x_SourceRow - s.pos + {first_row} AS x_SourceRow) FROM ({lines()}) l "
            f"JOIN (VALUES {starts}) s(f, pos) ON l.x_SourceFile = s.f")


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _most(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def _among(paths: list[str]) -> str:
    """The SQL condition of a row read from one of these files."""
    return f"x_SourceFile IN ({', '.join(lit(p) for p in paths)})"


# What makes two billing lines the same line, for finding a month exported twice.
LINE_KEY = ("x_Provider, BillingAccountId, SubAccountId, ChargePeriodStart, ChargePeriodEnd, ResourceId, "
            "x_UsageType, SkuId, ChargeDescription, BilledCost, ConsumedQuantity, ChargeCategory")

"""The store: the normalized tables in an embedded DuckDB database, and reading billing files into them.

Billing lines are never looped over in Python: each file is read, summed per day and normalized by one
INSERT ... SELECT into `costs` (tables/normalize.py: rollup_sql), and every summary is a GROUP BY over it.
`Store.lines()` defines the view `lines`: the same files one row per billing line, for looking a line up;
nothing the audit reports reads it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import duckdb

from auditor.errors import AuditorError, InputError, OutOfMemory
from auditor.files import readable, sha256_of, shown
from auditor.memory import memory_limit
from auditor.providers.billing import csv_dialect
from auditor.providers.billing.columns import SUM_TOO_LARGE, Columns, check_types, folded_tag_key, kept_tags_sql
from auditor.providers.billing.detect import MAX_LINE, Sniffed, expand, sniff
from auditor.providers.billing.registry import reader_for
from auditor.providers.catalog import Catalog, load_catalog
from auditor.providers.redact import redact_sql
from auditor.scratch import Scratch
from auditor.sql import lit
from auditor.tables import parts, stats
from auditor.tables.diagnose import diagnose, long_gzip_line, not_utf8
from auditor.tables.normalize import CLASH, FILE, SCAN, TAG_KEY, rollup_sql, scan_rollup_sql, select_sql, tag_key_sql
from auditor.tables.schema import COSTS, TABLES
from auditor.window import FIRST_DAY, LAST_DAY, Window

PARALLEL_FILES = 4
# The costs' sizes summed (as DOUBLE where beyond the engine's own sum): under this, no sum of the costs overflows
# DECIMAL(38,18), which holds under 10^20.
AMOUNT_LIMIT = Decimal("0.99e20")
MONEY_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost")


def side_by_side(batches: list[list[tuple[Sniffed, str]]]) -> int:
    """How many batches of files are read at once. Files DuckDB reads on one core (gzip CSV, a CSV read serially)
    are read side by side, each on its own connection (DuckDB appends to one table from several at once), at
    most PARALLEL_FILES, as each grouping holds its own hash table within the one memory limit. Any other read
    (Parquet, a plain CSV or JSON, a scan of several files) runs on every core already, and beside another its
    grouping would share the memory limit and spill: those are read one at a time (10M lines of high churn in
    three Parquet files: 78 CPU s side by side, 55 one at a time, at the same peak)."""
    if all(len(b) == 1 and b[0][0].serial for b in batches):
        return max(1, min(len(batches), os.cpu_count() or 1, PARALLEL_FILES))
    return 1


class Turns:
    """Reads run side by side until one runs out of memory beside others; from then on, each read still to start
    waits until none runs, so that files which crowd the memory limit are read one at a time and no more of them
    is read twice (the one that ran out is read again once the others are done: Store.load_billing)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = 0
        self.crowded = self.stopped = False

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: self.stopped or not self.crowded or self._running == 0)
            if self.stopped:  # the load stopped (Ctrl-C, a bad file) while this read waited
                raise KeyboardInterrupt
            self._running += 1
        try:
            yield
        except OutOfMemory:
            with self._changed:
                self.crowded = True
            raise
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def stop(self) -> None:
        with self._changed:
            self.stopped = True
            self._changed.notify_all()


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


class Store:
    def __init__(self, catalog: Catalog | None = None, database: str = ":memory:",
                 tag_keys: Iterable[str] | None = None):
        """`tag_keys`: the tag keys the audit reads (core.tag_keys_read); the other keys of every line's tags
        are dropped as the lines are read, so that a tag no rule reads (a run id that changes by the hour) does
        not split a resource's lines into a row and a tag set each. None keeps every key (`export --focus`)."""
        # Large exports spill to the run's scratch folder instead of growing without bound; a folder left by a
        # run that was killed is removed here (scratch.py).
        self._spill = Scratch()
        if database == ":memory:":
            # A database file there rather than memory: DuckDB stores its tables compressed and keeps only what
            # fits the memory limit in memory, so ten million lines stay well under a gigabyte.
            database = os.path.join(self._spill.name, "audit.duckdb")
        self.con = duckdb.connect(database)
        self.con.execute("SET TimeZone = 'UTC'")
        # The database is the run's scratch: closing it writes nothing more to a file about to be removed.
        self.con.execute("PRAGMA disable_checkpoint_on_shutdown")
        self.con.execute(f"SET temp_directory = {lit(self._spill.name)}")
        self.con.execute(f"SET memory_limit = {lit(memory_limit())}")
        self.catalog = catalog or load_catalog()
        self.tag_keys = None if tag_keys is None else frozenset(map(folded_tag_key, tag_keys))
        self.con.execute("BEGIN")  # one commit for the catalog's rows and the tables
        self.catalog.register(self.con)
        self.con.execute(TABLES)
        self.con.execute("COMMIT")
        self.sources: list[SourceFile] = []
        self.warnings: list[str] = []
        self._money_totals = [Decimal(0)] * len(MONEY_COLUMNS)  # every cost read so far, either sign (_check_limits)
        self.entities: dict[tuple, list] = {}  # built once each, by type and window (tables/entities.py)
        self.shared_gpus: dict[Window, tuple[list, list]] = {}  # nodes and slices, once a window (entities.py)
        # the attribution table's name, by window, team key and project key (tables/breakdown.py attributed)
        self.attributions: dict[tuple[Window, str, str], str] = {}
        self.has_split: bool | None = None  # the billing has a provider split (tables/split.py); None: not looked up
        # machines (ids, lower case) that findings say to stop or shrink: left out of the commitment baseline
        self.freed: set[str] = set()
        self._tag_sets_made = False  # `tag_sets` and costs.x_TagSet, made when first asked for (tag_set_ids)
        self._tags: dict[int, dict[str, str]] = {}  # each tag set's dict asked for so far, by id (tags)
        self._words: dict[str, str] = {}  # each key and value one string, however many sets hold it (tags)
        # Files read as one scan (the parts of an export): label -> their paths and the figures of them all.
        self.parts: dict[str, dict[str, Any]] = {}
        self._part_odd: dict[str, tuple] = {}  # per file read in a scan: its odd dates (parts.FileFigures.odd)
        # Per file read: the SELECT of its lines, for the `lines` view, written when the view is made.
        self._line_sql: dict[str, Callable[[], str]] = {}

    # ---- billing -------------------------------------------------------------------------------------
    def load_billing(self, paths: list[Path], progress: Callable[[str], None] | None = None) -> list[SourceFile]:
        files = list(self.distinct_files(paths))
        batches = parts.batches(files, self.con)
        workers = side_by_side(batches)
        cons = [self.con.cursor() for _ in range(workers)]
        free = list(cons)
        firsts = [sum(len(b) for b in batches[:i]) + 1 for i in range(len(batches))]
        turns = Turns()

        def read(i: int) -> list[tuple[SourceFile, str]]:
            batch, first = batches[i], firsts[i]
            with turns.turn():
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
        read_by: dict[int, list[tuple[SourceFile, str]]] = {}
        alone: list[int] = []  # out of memory beside the others: read again once they are done, one at a time
        try:
            futures = [pool.submit(read, i) for i in range(len(batches))]
            for i, future in enumerate(futures):
                try:
                    read_by[i] = future.result()
                except OutOfMemory:
                    if workers == 1:
                        raise
                    alone.append(i)
            for i in alone:  # its transaction was rolled back: nothing of it is in the tables
                read_by[i] = read(i)
        except BaseException:  # Ctrl-C, or a bad file: the files still being read stop now
            turns.stop()
            for con in cons:
                con.interrupt()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for con in cons:
                con.close()
        loaded = self._register_all([pair for i in range(len(batches)) for pair in read_by[i]])
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
                self.warnings.append(f"{shown(path)}: same content as {seen[digest]}; read once")
                self.sources.append(SourceFile(shown(path), "duplicate", digest, duplicate_of=seen[digest]))
                continue
            seen[digest] = shown(path)
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
        self.con.execute("INSERT INTO __units SELECT unnest($1), unnest($2)", [list(unit), list(unit.values())])
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
        self.con.execute(f"DELETE FROM costs WHERE {stats.among([s.path for s in drop])}")
        self._line_sql.pop(dropped, None)
        for s in drop:
            s.duplicate_of = kept
        self.parts.pop(dropped, None)
        self.warnings.append(f"{dropped}: {shared:,} of its {rows(drop):,} lines are also in {kept} "
                             "(a re-delivered export?); counted once, from the latter")

    def reader_sql(self, fmt: str, cols: Columns) -> tuple[dict[str, str], list[tuple[str, str]]]:
        """The reader's SQL expressions for the `costs` columns (shared by DuckDB and Spark), and its checks."""
        cols.tag_keys = self.tag_keys
        exprs, checks = reader_for(fmt)(cols, self.catalog)
        exprs["Tags"] = f"COALESCE({exprs['Tags']}, CAST(MAP() AS MAP(VARCHAR, VARCHAR)))"  # no tags: an empty map
        if self.tag_keys is not None:
            exprs["Tags"] = kept_tags_sql(exprs["Tags"], self.tag_keys)
        # Presigned and SAS URLs in tags lose their query strings before they are stored (redact.py); the map is
        # built once per distinct tag set (normalize.py). Resource ids: see _redact_ids.
        exprs["Tags"] = (f"map_from_entries(list_transform(map_entries({exprs['Tags']}), lambda e: "
                         f"{{'key': e.key, 'value': {redact_sql('e.value')}}}))")
        return exprs, checks

    def load_file(self, path: Path, digest: str | None = None) -> SourceFile:
        """Read one billing file into `costs`."""
        [pair] = self._read([(sniff(path, self.con), digest or sha256_of(path))], self.con)
        return self._register_all([pair])[0]

    def _read(self, batch: list[tuple[Sniffed, str]], con: duckdb.DuckDBPyConnection,
              copy: csv_dialect.Normalized | None = None) -> list[tuple[SourceFile, Callable[[], str]]]:
        """Read, group and classify a batch of files (of one format and columns) into `costs` on `con`, in one
        transaction and one scan; with the SELECT of each file's lines, for the `lines` view. Should the batch
        fail, or its files share lines, its files are read one by one, as files read alone are: that names the
        file, line and column at fault, and finds a file delivered twice. A CSV file DuckDB refuses is read
        again from its normalized `copy` where it has one (mixed line endings, a repeated header: csv_dialect)."""
        sniffed = batch[0][0]
        paths = [shown(s.path) for s, _ in batch]  # each file's name in `costs` and every message
        cols = Columns(sniffed.columns, sniffed.fields, sniffed.types)
        exprs, checks = self.reader_sql(sniffed.format, cols)
        check_types(cols, checks, paths[0])  # a BOOLEAN cost column: refused, not summed as 1 a line
        cost_column = next((c for c, kind in checks if kind == "money"), None)
        many = len(batch) > 1
        notes = csv_dialect.copy_note(paths[0], copy) if copy else []
        relation = self._relation(sniffed, paths if many else None, copy.path if copy else None)
        first_row = 2 if sniffed.container == "csv" else 1  # CSV rows are counted as lines, after the header
        one_by_one = lambda: [pair for one in batch for pair in self._read([one], con)]  # noqa: E731
        if sniffed.container == "csv" and "" in sniffed.columns:  # a delimiter ends every line
            if many:
                return one_by_one()
            csv_dialect.check_trailing(con, relation, first_row, paths[0], copy)
        figures: dict[str, parts.FileFigures] = {}
        # One INSERT ... SELECT of the lines summed per day; classification runs on those sums (normalize.py).
        # A Parquet file numbers its rows itself, which keeps the scan parallel; row_number() OVER () reads in
        # order (several files: one after another, their groups kept first with each file's figures).
        parquet = sniffed.container == "parquet" and not many
        numbers = "(file_row_number + 1)" if parquet else "row_number() OVER ()"
        # Grouped by hashes of the keys, on a CLASH by the columns themselves. A scan's groups list their lines'
        # hashes (parts.repeated), which DuckDB cannot spill: out of memory, the scan is made again without them,
        # and its files are asked whether two share a line (parts.shared).
        attempts = [(True, many), (False, many)]  # (by_hash, listed)
        while attempts:
            by_hash, listed = attempts.pop(0)
            if many:
                scan = scan_rollup_sql(exprs, cols, relation, first_row, paths[0], sniffed.format,
                                       [*COSTS, TAG_KEY], keys_by_hash=by_hash, keys_apart=by_hash, listed=listed)
                sets, sql = f"CREATE TEMP TABLE {SCAN} AS {scan.sets}", "INSERT INTO costs BY NAME " + scan.select
            else:
                sets, sql = None, "INSERT INTO costs BY NAME " + rollup_sql(
                    exprs, cols, relation, first_row, paths[0], sniffed.format, [*COSTS, TAG_KEY], numbers,
                    by_hash and parquet, parquet, keys_by_hash=by_hash, keys_apart=by_hash and not parquet)
            try:
                con.execute("BEGIN")
                if sets:
                    con.execute(sets)
                    if (not listed or parts.repeated(con)) and parts.shared(relation, con):  # which, alone says
                        con.execute("ROLLBACK")
                        return one_by_one()
                    figures = parts.figures(con)
                con.execute(sql)
                if many:
                    con.execute(f"DROP TABLE {SCAN}")
                    parts.number_in_files(figures, first_row, con)
                self._check_values(paths, con, copy)
                if copy and (note := csv_dialect.check_total(con, relation, copy, sniffed.columns, cost_column,
                                                             paths[0])):
                    notes.append(note)
                self._redact_ids(paths, con)
                con.execute("COMMIT")
                self.warnings += notes
                break
            except duckdb.InterruptException:  # Ctrl-C, or another file failed: stop, without a diagnosis
                con.execute("ROLLBACK")
                raise KeyboardInterrupt from None
            except duckdb.Error as e:
                con.execute("ROLLBACK")
                if by_hash and CLASH in str(e):
                    continue  # two keys shared a hash: group by the key columns themselves
                if listed and isinstance(e, duckdb.OutOfMemoryException):
                    attempts = [(b, False) for b, _ in [(by_hash, listed), *attempts]]
                    continue
                if many:  # which file? each on its own says
                    return one_by_one()
                if copy is None and (long_line := long_gzip_line(sniffed)):
                    raise long_line from None
                if (again := self._normalized(sniffed, copy)) is not None:
                    return self._read(batch, con, again)
                error = diagnose(con, sniffed, cols, relation, checks, first_row, e)
                error.line = copy.original_line(error.line) if copy else error.line
                raise not_utf8(error, sniffed) if isinstance(error, InputError) else error from None
            except InputError:  # a line without a cost or a time: a spreadsheet's empty or total row?
                con.execute("ROLLBACK")
                if many:
                    return one_by_one()
                if (again := self._normalized(sniffed, copy)) is not None:
                    return self._read(batch, con, again)
                raise
            except AuditorError:  # bad input or out of memory: nothing of this batch is kept
                con.execute("ROLLBACK")
                raise
            except RuntimeError as e:  # DuckDB answers Ctrl-C during a query with RuntimeError('Query interrupted')
                con.execute("ROLLBACK")
                if "interrupted" in str(e).lower():
                    raise KeyboardInterrupt from None
                raise
        read = set(figures) or {f for (f,) in con.execute(
            f"SELECT DISTINCT x_SourceFile FROM costs WHERE {stats.among(paths)}").fetchall()}
        if empty := next((p for p in paths if p not in read), None):
            raise InputError("the file has a header but no billing lines", path=empty)
        label = f"{Path(paths[0]).parent}: {len(paths):,} files, {Path(paths[0]).name} to {Path(paths[-1]).name}"
        # The files, line by line (nothing is read until the view is queried): the lines of a scan of several
        # are numbered in the read, and in each file from the position of its first line.
        by_line = {**exprs, "x_Lines": "1", "ResourceId": self._redacted_id(exprs["ResourceId"])}
        lines = partial(select_sql, by_line, cols, relation, first_row, paths[0], sniffed.format, list(COSTS), numbers,
                        many)
        if many:
            lines = partial(parts.numbered_in_files, lines, parts.starts(figures), first_row)
            self._part_odd.update({f: d.odd for f, d in figures.items()})
        return [(SourceFile(shown(s.path), s.format, digest, cost_column=cost_column,
                            stats=figures[shown(s.path)].stats if many else {}, part_of=label if many else None),
                 lines)
                for s, digest in batch]

    def _normalized(self, sniffed: Sniffed, copy: csv_dialect.Normalized | None) -> csv_dialect.Normalized | None:
        """A CSV's normalized copy, where DuckDB refused the original and it needs one (csv_dialect.normalized)."""
        if sniffed.container != "csv" or copy is not None:
            return None
        return csv_dialect.normalized(sniffed.path, sniffed.compression, sniffed.columns, self._spill.name)

    def _register(self, source: SourceFile, line_sql: Callable[[], str] | None) -> SourceFile:
        """A file read into `costs` by Spark (see _register_all)."""
        return self._register_all([(source, line_sql)])[0]

    def _register_all(self, read: list[tuple[SourceFile, Callable[[], str] | None]]) -> list[SourceFile]:
        """Files read into `costs` (by DuckDB or Spark): their figures (one scan for all), their warnings, and the
        SELECT of their lines for the `lines` view where DuckDB can read the file itself."""
        self._check_limits([source.path for source, _ in read])
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
            self.parts[label] = {"files": paths, "stats": stats.scan_stats(self.con, paths)}
        self._note_odd([source for source, _ in read])
        self._forget_tag_sets()  # new lines, new tag sets: the table is made again when next asked for
        return [source for source, _ in read]

    def _check_limits(self, paths: list[str]) -> None:
        """Refuse, before anything is summed, a file whose costs (of either sign, all added) reach what an amount
        holds (DECIMAL(38,18): under 10^20), alone or with the files read before it, since each cost within the
        limit does not make their sum so; and a line charged outside the days a window may cover."""
        try:  # exact sums of the costs' sizes: a fiftieth of the CPU of casting every row's to DOUBLE
            rows = self._limit_rows(paths, "abs({})")
        except duckdb.OutOfRangeException:  # a sum beyond even what the engine adds up in: which file, as DOUBLEs
            rows = self._limit_rows(paths, "abs(CAST({} AS DOUBLE))")
        for path, *totals, early, late in rows:
            if early or late:
                day = (early or late).split(" ")[0]
                raise InputError(f"a line is charged on {day}, outside the days gpu-auditor reads ({FIRST_DAY.date()} "
                                 f"to {LAST_DAY.date()}): check the export's dates", path=path)
            totals = [Decimal(t) for t in totals]  # a DOUBLE exactly as it is
            self._money_totals = [a + b for a, b in zip(self._money_totals, totals, strict=True)]
            if max(self._money_totals) >= AMOUNT_LIMIT:
                before = " with the files read before it" if max(totals) < AMOUNT_LIMIT else ""
                raise InputError(f"the costs add up{before} to {SUM_TOO_LARGE}", path=path)

    def _limit_rows(self, paths: list[str], size: str) -> list[tuple]:
        """Per file: the sum of each money column's `size` (SQL of a cost's size, `{}` the column), and its
        first charge before the first day read and last end after the last, if any."""
        first, after = (lit(d.isoformat(" ")) for d in (FIRST_DAY, LAST_DAY + timedelta(days=1)))
        ends = "greatest(ChargePeriodStart, coalesce(ChargePeriodEnd, ChargePeriodStart))"
        return self.con.execute(f"""
            SELECT x_SourceFile, {", ".join(f"coalesce(sum({size.format(c)}), 0)" for c in MONEY_COLUMNS)},
                   CAST(min(ChargePeriodStart) FILTER (ChargePeriodStart < CAST({first} AS TIMESTAMP)) AS VARCHAR),
                   CAST(max({ends}) FILTER ({ends} >= CAST({after} AS TIMESTAMP)) AS VARCHAR)
            FROM costs WHERE {stats.among(paths)} GROUP BY ALL ORDER BY x_SourceFile""").fetchall()

    def _note_odd(self, sources: list[SourceFile]) -> None:
        """Legal but odd: lines in several currencies (each totalled on its own), and charges dated before 2000
        or after today (UTC), which an export should not have. Read and counted as they are, with a warning."""
        # fetchall: a result left open (fetchone) blocks the next con.register, as Spark's next file does
        alone = [s.path for s in sources if s.part_of is None]
        odd = {f: rest for f, *rest in self.con.execute(
            "SELECT x_SourceFile, sum(x_Lines) FILTER (WHERE ChargePeriodStart < TIMESTAMP '2000-01-01'), "
            "min(ChargePeriodStart), sum(x_Lines) FILTER (WHERE ChargePeriodStart >= "
            "CAST(current_date + 1 AS TIMESTAMP)), max(ChargePeriodStart) FROM costs "
            f"WHERE {stats.among(alone)} GROUP BY ALL").fetchall()} if alone else {}
        for source in sources:
            found = self._part_odd if source.part_of else odd
            self._note_odd_file(source, *found.get(source.path, (None, None, None, None)))

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

    def _relation(self, s: Sniffed, paths: list[str] | None = None, copy: str | None = None) -> str:
        """The read of a sniffed file (from its normalized `copy` where it has one: csv_dialect.py); or of several
        like it, as one scan naming each line's file (FILE)."""
        p = lit(copy or readable(s.path)) if paths is None else "[" + ", ".join(lit(x) for x in paths) + "]"
        named = "" if paths is None else f", filename = {lit(FILE)}"
        if s.container == "parquet":  # a file numbers its own rows; a scan numbers them in its read (and a line's
            # place in its file is not the line: two files share a line wherever it stands in each)
            return f"read_parquet({p}{', file_row_number = true' if paths is None else ''}{named})"
        if s.container == "json":
            return f"read_ndjson({p}{named})"
        if s.container == "avro":  # DuckDB reads Avro only with a downloaded extension: a Parquet copy (avro.py)
            from auditor.providers.billing.avro import to_parquet

            return f"read_parquet({lit(str(to_parquet(s.path, self._spill.name)))})"
        nulls = "[" + ", ".join(lit(n) for n in csv_dialect.NULLS) + "]"
        # The header was read already; naming the columns turns DuckDB's sniffer off, so a ragged or
        # unquoted row is an error with its line rather than a guess.
        columns = "{" + ", ".join(f"{lit(c)}: 'VARCHAR'" for c in csv_dialect.read_names(s.columns)) + "}"
        compression = "none" if copy else s.compression
        # A gzip file cannot be checked for long lines before it is read (detect.first_line_over): DuckDB's
        # buffer kept to twice the longest line makes it stop at one within a few MB inflated, where its
        # default buffer inflated all of a 4 GiB bomb first (1.5 s against 15 s; the same speed otherwise).
        buffer = f", max_line_size = {MAX_LINE}, buffer_size = {2 * MAX_LINE}" if compression == "gzip" else ""
        return (f"read_csv({p}, header = true, auto_detect = false, columns = {columns}, delim = ',', "
                f"quote = '\"', escape = '\"', nullstr = {nulls}, compression = {lit(compression)}, "
                f"strict_mode = true, encoding = 'utf-8'{', parallel = false' if s.serial else ''}{buffer}{named})")

    def lines(self) -> duckdb.DuckDBPyConnection:
        """The connection, with the view `lines` over the files read so far: their billing lines, one row each,
        normalized as `costs` is but not summed (for looking a line up; nothing the audit reports reads it).
        Made when asked for: defining it binds every file's SELECT, tens of milliseconds a file."""
        body = " UNION ALL BY NAME ".join(f"({sql()})" for sql in self._line_sql.values())
        empty = f"SELECT {', '.join(COSTS)} FROM costs WHERE false"
        self.con.execute(f"CREATE OR REPLACE VIEW lines AS {body or empty}")
        return self.con

    @staticmethod
    def _redacted_id(expr: str) -> str:
        return (f"CASE WHEN contains({expr}, '://') OR contains({expr}, '=') THEN {redact_sql(expr)} "
                f"ELSE {expr} END")

    def _redact_ids(self, paths: list[str], con: duckdb.DuckDBPyConnection) -> None:
        """Resource ids that hold a URL or a credential parameter, redacted (redact.py) in the few lines that
        do: an UPDATE after the INSERT, so the common id stays a plain per-line column there."""
        con.execute(f"UPDATE costs SET ResourceId = {redact_sql('ResourceId')} WHERE {stats.among(paths)} "
                    "AND (contains(ResourceId, '://') OR contains(ResourceId, '='))")

    def _check_values(self, paths: list[str], con: duckdb.DuckDBPyConnection,
                      copy: csv_dialect.Normalized | None = None) -> None:
        """Lines whose cost or time is missing cannot be counted: say which (by the original's line number, where
        the lines were read from a normalized `copy`), rather than drop them."""
        bad = con.execute(
            "SELECT x_SourceFile, x_SourceRow, BilledCost IS NULL, ChargePeriodStart IS NULL FROM costs "
            f"WHERE {stats.among(paths)} AND (BilledCost IS NULL OR ChargePeriodStart IS NULL) "
            "QUALIFY row_number() OVER (PARTITION BY x_SourceFile ORDER BY x_SourceRow) = 1").fetchall()
        if bad:
            order = {p: i for i, p in enumerate(paths)}
            path, row, no_cost, _ = min(bad, key=lambda b: (order[b[0]], b[1]))
            what = "the cost is empty" if no_cost else "the charge period start is empty"
            raise InputError(f"{what}; every billing line needs a cost and a start time", path=path,
                             line=copy.original_line(row) if copy else row)

    def tag_set_ids(self) -> None:
        """The tag set id of every row of `costs` (its column x_TagSet), each set one row of the table `tag_sets`.
        A resource carries a few tag sets and hundreds of thousands of resources carry a few thousand: every query
        that groups or chooses by tags does so by this integer, and a tag or team is looked up once per tag set
        (tables/sql.py TAG_SET_MAPS), never per row; Python holds a set's dict only where asked for it (`tags`).

        A tag set is its entries sorted: maps that hold the same entries in another order (an export's column
        order, Spark's sorted keys) are one set. Ids number the sets in that sorted order, so a choice broken by
        the id is broken by the entries, the same whatever engine read the lines and in whatever order. The table
        `tag_sets` (key, Tags, tag_set, entries) holds each set once (Tags: its map, sorted), by its key
        (costs.x_TagKey, written by the load once per distinct tag key: normalize.TAG_KEY): the sets are found by
        grouping that number, and x_TagSet written by joining it, never by comparing MAPs."""
        if self._tag_sets_made:
            return
        self.con.execute("BEGIN")
        # Rows the load did not key (Spark's, a test's own): keyed from their tags here. Each set's map is read
        # from its first row (grouping the MAPs themselves, or any_value of them, costs several times more).
        self.con.execute(f"UPDATE costs SET {TAG_KEY} = {tag_key_sql('Tags')} WHERE {TAG_KEY} IS NULL")
        self.con.execute(f"""
            CREATE OR REPLACE TABLE tag_sets AS
            SELECT key, map_from_entries(entries) AS Tags,
                   CAST(dense_rank() OVER (ORDER BY entries) AS INTEGER) AS tag_set, entries
            FROM (SELECT {TAG_KEY} AS key, COALESCE(list_sort(map_entries(Tags)), []) AS entries
                  FROM costs WHERE rowid IN (SELECT min(rowid) FROM costs GROUP BY {TAG_KEY}))""")
        self.con.execute(f"UPDATE costs SET x_TagSet = ts.tag_set FROM tag_sets ts WHERE ts.key = costs.{TAG_KEY}")
        self.con.execute("COMMIT")
        self._tag_sets_made = True

    def tags(self, ids: Iterable[int]) -> dict[int, dict[str, str]]:
        """The tag sets of these ids (costs.x_TagSet), each as one dict of its entries in their sorted order, by
        id (read-only: an id's dict is one object until new lines are loaded, so rules fold a set's keys once:
        Context.tag). Only the sets asked for are made, those not made before read from `tag_sets` in one query:
        where tags churn, an audit holds hundreds of thousands of sets and its entities show a few thousand."""
        asked = set(ids)
        self.tag_set_ids()
        if new := sorted(asked - self._tags.keys()):
            # Keys and values as two lists of text: Python builds them several times faster than a list of
            # structs. Each key and value is one string however many sets hold it (`word`, a dict's setdefault,
            # called from C by map): thousands of sets repeat a few keys and owners.
            word = self._words.setdefault
            for i, keys, values in self.con.execute(
                    "SELECT tag_set, list_transform(entries, lambda x: x.key), "
                    "list_transform(entries, lambda x: x.value) FROM tag_sets "
                    "WHERE tag_set IN (SELECT unnest(CAST($ids AS INTEGER[])))", {"ids": new}).fetchall():
                self._tags[i] = dict(zip(map(word, keys, keys), map(word, values, values), strict=True))
        return {i: self._tags[i] for i in asked}

    def _forget_tag_sets(self) -> None:
        self._tag_sets_made = False
        self._tags.clear()
        self._words.clear()

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

    def value(self, sql: str) -> Any:
        """The one value of a query that answers one row (an aggregate, a count)."""
        row = self.con.execute(sql).fetchone()
        if row is None:
            raise ValueError(f"no row from a query that answers one: {sql}")
        return row[0]

    def load_snapshot(self, doc: dict[str, Any]) -> None:
        for table in ("assets", "gpu_usage", "jobs", "gpu_units", "gpu_allocations", "slice_usage"):
            self._insert_rows(table, doc.get(table) or [])

    def keep_entities(self, types: Iterable[type]) -> None:
        """Let go of every entity built but those of `types` (a type let go is built again if asked for)."""
        keep = set(types)
        self.entities = {k: v for k, v in self.entities.items() if k[0] in keep}

    def close(self) -> None:
        """The audit is done with the tables: their memory (DuckDB's, and the entities built from them) is
        freed before the outputs are written, which hold every finding."""
        self.entities.clear()
        self.shared_gpus.clear()
        self.attributions.clear()
        self.has_split = None
        self._forget_tag_sets()
        self.con.close()

    # ---- summaries -----------------------------------------------------------------------------------
    def audit_window(self, window: Window | None, what: str) -> Window:
        """The window asked for, else the billing's own, from its first charge to its last (`data_window`)."""
        if window is not None:
            return window
        data = self.data_window()
        if data is None:
            raise InputError(f"no billing lines to {what}")
        return Window.of(data.start, data.end)

    def data_window(self) -> Window | None:
        start, end, last = self.con.execute(
            "SELECT min(ChargePeriodStart), max(ChargePeriodEnd), max(ChargePeriodStart) FROM costs").fetchone()
        if start is None:
            return None
        if end is None or end <= last:  # lines without an end (or ending as they start): to the end of their day
            end = max(end or last, datetime.combine(last.date(), datetime.min.time()) + timedelta(days=1))
        return Window(start, end, "")


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


# What makes two billing lines the same line, for finding a month exported twice.
LINE_KEY = ("x_Provider, BillingAccountId, SubAccountId, ChargePeriodStart, ChargePeriodEnd, ResourceId, "
            "x_UsageType, SkuId, ChargeDescription, BilledCost, ConsumedQuantity, ChargeCategory")

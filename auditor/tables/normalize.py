"""The SELECTs that turn a billing file into normalized rows, built from a reader's column expressions
(auditor/providers/): `select_sql`, one row per billing line (the `lines` view; Spark runs the same text,
translated, in auditor/tables/spark.py), and `rollup_sql`, the rows of the `costs` table, which stand for
all lines of one file and one UTC day that agree on everything but their amounts and times.

Most of a reader's work is classification: regular expressions over usage types and descriptions, tag maps
built from tag columns, CASEs over region names. Its inputs repeat from line to line (an export of ten million
lines has a few thousand distinct resources, usage types and tag sets), so those expressions are computed once
per distinct combination of the columns they read, and joined back to the lines. Only the amounts and times,
which differ on every line, are computed line by line.
"""

from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from auditor.providers.billing.columns import Columns
from auditor.providers.catalog import GPU_COUNT, family_sql
from auditor.sql import lit, q

# Amounts differ on nearly every line: computed per line, and the source columns they read are never part of
# a distinct key. Times repeat (hourly or daily lines), so they get distinct keys of their own.
PER_LINE = ("BilledCost", "EffectiveCost", "ListCost", "ConsumedQuantity", "CommitmentDiscountQuantity", "x_SplitCost",
            "x_SplitUnusedCost")
TIMES = ("ChargePeriodStart", "ChargePeriodEnd")
# Work worth doing once per distinct value rather than once per line.
COSTLY = re.compile(r"(?i)regexp|\blike\b|\bilike\b|similar|lambda|json|map|list_|strptime|\bcase\b|split_part|"
                    r"timezone|timestamptz")
ENRICHED = ("x_GpuModel", "x_GpuCount", "x_CostCategory", "x_SourceFile", "x_SourceRow", "x_SourceFormat")
LINES = "x_Lines"  # how many billing lines a row stands for
# The column a read of several files at once names each line's file by (DuckDB's `filename` option).
FILE = "__gpu_auditor_file"
# A line's free text (an AWS line item description names the hour and its price: unique per line). A source
# column read only by these outputs is never a grouping key: the instance type some exports name only there is
# computed line by line and grouped by its value, and the description of a group is that of its first line.
FREE_TEXT = "ChargeDescription"
FREE_TEXT_READERS = (FREE_TEXT, "x_InstanceType")
TAGS = "Tags"
# A row's tag set as a number computed where its tags are, once per distinct tag key (not a column the reader
# writes): what Store.tag_set_ids groups by to number the sets, rather than comparing every row's MAP. Two 64-bit
# hashes of the sorted entries, forward and reversed, as one 128-bit number: the same entries in any order are
# one key, and two sets share a key only where both hashes clash (the standard of the rollup's CLASH check).
TAG_KEY = "x_TagKey"


def tag_key_sql(tags: str) -> str:
    """The TAG_KEY of a tag map (an SQL expression): NULL and empty maps are the one empty set."""
    entries = f"COALESCE(list_sort(map_entries({tags})), [])"
    return (f"((CAST(hash({entries}) AS UHUGEINT) << 64) | "
            f"CAST(hash(list_reverse({entries})) AS UHUGEINT))")
EXTRA = ("_kind", "_gpu", "_gpu_count")
DEFAULTS = {"_gpu": "CAST(NULL AS VARCHAR)", "_gpu_count": f"CAST(NULL AS {GPU_COUNT})"}


# Groups keyed by a hash of their key columns carry a second hash, in reverse column order, to catch the
# (~1e-9) chance of two different keys sharing the first; a test forces clashes by replacing KEY_HASH.
KEY_HASH = "hash({})"
CLASH = "gpu-auditor: grouping hash clash"


def unique(column: str, rows: str) -> str:
    """A condition true on every row of a query whose `rows` (distinct keys) hold no `column` hash twice, else
    the query fails with CLASH: the hashes counted once, not a window per key."""
    return (f"CASE WHEN (SELECT count(*) - count(DISTINCT {column}) FROM {rows}) > 0 THEN error({lit(CLASH)}) "
            "ELSE true END")


def referenced(expr: str, top: list[str]) -> set[str]:
    """The source columns an expression reads: quoted (`"lineItem/UsageType"`, `"product"."region"`) or bare
    (`resource_tags`). A bare match may be a false positive (a word in a literal), which only costs speed. A bare
    name is looked for as a word only where it is in the text at all: a file of hundreds of columns read by dozens
    of expressions made thousands of searches a file."""
    found = set()
    lower = expr.lower()
    for name in top:
        if q(name) in expr or (name.lower() in lower and (word := _bare_word(name)) and word.search(expr)):
            found.add(name)
    return found


@cache
def _bare_word(name: str) -> re.Pattern[str] | None:
    """A bare column name as a word of an expression, in any case; None for a name that must be quoted."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return None
    return re.compile(rf"(?<![\w.\"']){re.escape(name)}(?![\w\"'])", re.IGNORECASE)


def split(exprs: dict[str, str], cols: Columns) -> list[tuple[list[str], list[str]]]:
    """Groups of (outputs computed once per distinct key, the source columns that make the key): one for the
    times, one for everything else worth it; the rest is computed per line."""
    top = cols.top
    refs = {c: referenced(e, top) for c, e in exprs.items()}
    per_line = set().union(*(refs[c] for c in PER_LINE if c in refs))

    def worth(c: str) -> bool:
        return c not in PER_LINE and bool(refs[c]) and not refs[c] & per_line and bool(COSTLY.search(exprs[c]))

    times = [c for c in TIMES if c in exprs and worth(c)]
    time_cols = set().union(*(refs[c] for c in times)) if times else set()
    rest = [c for c in exprs if c not in TIMES and worth(c) and not refs[c] & time_cols]
    # Tags churn apart from everything else (a run or owner tag that changes by the hour on the same resource and
    # usage type): keyed by their own columns, where no other output reads them, their distinct values are far
    # fewer than those of every column together, and the rest's key stays as small as the resources and usage
    # types are many (1M lines of tag churn: 200,000 distinct keys a file classified, against a few thousand).
    others = set().union(*(refs[c] for c in rest if c != TAGS))
    tags = [TAGS] if TAGS in rest and not refs[TAGS] & others else []
    rest = [c for c in rest if c not in tags]
    groups = []
    for outputs in (times, tags, rest):
        if outputs:
            groups.append((outputs, sorted(set().union(*(refs[c] for c in outputs)))))
    return groups


def select_sql(exprs: dict[str, str], cols: Columns, relation: str, first_row: int, path: str, fmt: str,
               costs: list[str], row_number: str = "row_number() OVER ()", files: bool = False,
               materialized: bool = True, by_hash: bool = False, per_line: bool = False) -> str:
    """The SELECT of one file's `costs` rows (the columns in `costs` order), or of several files' where
    `files`: the relation then names each row's file in its FILE column. `materialized`: each distinct key's
    classification is a materialized CTE (DuckDB; Spark plans its own and knows no such CTE). `exprs` are the reader's
    expressions by output column; the catalog tables `catalog_instance_types` and `catalog_gpu_families` add
    the GPU model and count.

    `by_hash`: each classified key is joined back by a hash of its columns (one integer), not by the columns
    themselves (a dozen texts compared NULL-safe on every row: most of the join's time where keys are many).
    Should two distinct keys share a hash, the query fails with CLASH, and the caller reads the file again
    without it, as for the rollup's own hash.

    `per_line`: every expression computed on each row of `relation`, no key joined back (Spark, over the rows of
    rollup_sql's grouping: it would join each key's classification back by a shuffle of every row, costlier than
    classifying the row where it is, and cannot take the DISTINCT of a MAP column or compare two)."""
    outputs_all = [c for c in costs if c not in ENRICHED and c != TAG_KEY] + list(EXTRA)
    exprs = {c: exprs.get(c) or DEFAULTS.get(c, "NULL") for c in outputs_all}
    groups = [] if per_line else split(exprs, cols)
    tag_key = TAG_KEY in costs  # computed from the tags, where they are (per distinct key, or per line)
    it_key = "lower(regexp_replace(n.x_InstanceType, '^ml\\.', ''))"
    fam_key = f"lower({family_sql('n.x_Provider', 'n.x_InstanceType')})"
    keyed = {c: f"d{i}" for i, (outputs, _) in enumerate(groups) for c in outputs}
    hashes = "".join(f", {KEY_HASH.format(', '.join(q(k) for k in key))} AS __kh{i}"
                     for i, (_, key) in enumerate(groups)) if by_hash else ""
    source = f"(SELECT *, {row_number} + {first_row - 1} AS __row{hashes} FROM {relation}) s"
    for i, (outputs, key) in enumerate(groups):
        names = {k: f"__k{j}" for j, k in enumerate(key)}
        dims = (f"SELECT {', '.join(f'{q(k)} AS {names[k]}' for k in key)}, * FROM "
                f"(SELECT DISTINCT {', '.join(q(k) for k in key)} FROM {relation})")
        computed = ", ".join(f"{exprs[c]} AS {q('__' + c)}" for c in outputs)
        if by_hash:  # one key a hash, else CLASH
            hashed = KEY_HASH.format(", ".join(names.values()))
            dims = (f"WITH __h{i} AS MATERIALIZED (SELECT {hashed} AS __kh, {computed} FROM ({dims})) "
                    f"SELECT * FROM __h{i} WHERE {unique('__kh', f'__h{i}')}")
            on = f"s.__kh{i} = d{i}.__kh"
        else:
            dims = f"SELECT {', '.join(names.values())}, {computed} FROM ({dims})"
            on = " AND ".join(f"s.{q(k)} IS NOT DISTINCT FROM d{i}.{names[k]}" for k in key)
        if tag_key and TAGS in outputs:
            dims = f"SELECT *, {tag_key_sql(q('__' + TAGS))} AS {q('__' + TAG_KEY)} FROM ({dims})"
            keyed[TAG_KEY] = f"d{i}"
        # Materialized: left to itself, DuckDB moves the computed expressions above the join, and classifies
        # every row instead of every distinct key (1M lines of tag churn: 206,256 rows a file, for 5,072 keys).
        if materialized:
            dims = f"WITH __d{i} AS MATERIALIZED ({dims}) SELECT * FROM __d{i}"
        source += f" JOIN ({dims}) d{i} ON {on}"
    inner = ", ".join(f"{keyed[c]}.{q('__' + c)} AS {q(c)}" if c in keyed else f"{exprs[c]} AS {q(c)}"
                      for c in outputs_all) + (f", s.{FILE}" if files else "")
    if tag_key:
        inner += (f", {keyed[TAG_KEY]}.{q('__' + TAG_KEY)} AS {TAG_KEY}" if TAG_KEY in keyed
                  else f", {tag_key_sql(exprs[TAGS])} AS {TAG_KEY}")
    outputs_all += [TAG_KEY] if tag_key else []
    return f"""
        SELECT {', '.join(f'n.{q(c)}' for c in outputs_all if c not in EXTRA)}, n.x_SourceRow,
            COALESCE(n._gpu, t.gpu_model, f.gpu_model) AS x_GpuModel,
            COALESCE(n._gpu_count, t.gpu_count) AS x_GpuCount,
            CASE WHEN n.ChargeCategory = 'Tax' THEN 'tax'
                 WHEN n._kind = 'compute' AND (COALESCE(n._gpu, t.gpu_model, f.gpu_model) IS NOT NULL
                                               OR n._gpu_count > 0)
                 THEN 'gpu_compute'
                 WHEN n._kind = 'compute' THEN 'other_compute' ELSE n._kind END AS x_CostCategory,
            {f"n.{FILE}" if files else lit(path)} AS x_SourceFile,
            {lit(fmt)} AS x_SourceFormat
        FROM (SELECT {inner}, __row AS x_SourceRow FROM {source}) n
        LEFT JOIN catalog_instance_types t
            ON t.provider = n.x_Provider AND t.instance_type = {it_key}
        LEFT JOIN catalog_gpu_families f
            ON f.provider = n.x_Provider AND f.family = {fam_key}"""


class Scan(NamedTuple):
    """A scan of several files (an export's parts) in two statements: `sets` (the SELECT to keep as table SCAN)
    groups their lines once, into the groups `costs` is made of (each with the hashes of its lines, `__lhs`, where
    a line two files share would be twice) and each file's own figures (FILE_SET); `select` makes the `costs`
    rows from the groups."""

    sets: str
    select: str


# The table a scan of several files keeps its groups in (a temporary table: one per connection), and its grouping
# sets by their GROUPING(__day, FILE): the groups of `costs` rows, each key hash's columns (grouped apart), each
# file's figures by currency (parts.figures reads them).
SCAN = "__scan"
GROUPS_SET, KEYS_SET, FILE_SET = 1, 3, 2
FIGURES = ("__pos", "__t0", "__t1", "__billed", "__old", "__future", "__last", "__cur", "__lhs")


def scan_rollup_sql(exprs: dict[str, str], cols: Columns, relation: str, first_row: int, path: str, fmt: str,
                    costs: list[str], keys_by_hash: bool = False, keys_apart: bool = False,
                    listed: bool = True) -> Scan:
    """rollup_sql of several files read as one scan, in order (DuckDB), whose figures per file (lines, costs and
    dates) come from the same read as the groups, a grouping set of their own: the ordered read of every line
    once, not twice (a CUR of 2,000 gzip parts at 1M lines: 7.2 and 7.2 CPU s, now 9.3 for both). `listed`: each
    group lists its lines' hashes (`__lhs`), a list a line, which DuckDB cannot spill to disk."""
    sets, select = _rollup(exprs, cols, relation, first_row, path, fmt, costs, files=True,
                           keys_by_hash=keys_by_hash, keys_apart=keys_apart, scan=True, listed=listed)
    assert sets is not None
    return Scan(sets, select)


def rollup_sql(exprs: dict[str, str], cols: Columns, relation: str, first_row: int, path: str, fmt: str,
               costs: list[str], row_number: str = "row_number() OVER ()", by_hash: bool = False,
               rescan: bool = False, files: bool = False, keys_by_hash: bool = False, ordered: bool = True,
               keys_apart: bool = False) -> str:
    """The SELECT of one file's `costs` rows: its lines summed per UTC day and per distinct value of every
    source column the reader classifies from (resource, usage type, tags, ...), before anything is classified.
    Free text (FREE_TEXT: a description that can differ on every line) is no key: what is classified from it
    alone (an instance type named only there) is computed line by line and grouped by its value, and the
    group keeps the description of its first line.

    Grouping the export's own columns first is what makes a large export cheap: a quarter of hourly lines
    collapses about twentyfold, and the classification then runs on the groups (with `select_sql`, as for
    lines). What stays exact: every amount (DECIMAL sums of each line's own amount expression), the line
    count (x_Lines), the first and last charge time of each group, and x_SourceRow, the group's first line,
    or its first line without a cost or start time, whose group then keeps a NULL cost or start so that such
    a line is still reported by its number.

    For Parquet, which is cheap to read again column by column (`rescan`), the times are parsed once per
    distinct value and joined back; text files would be parsed twice for that, so there each line's times are
    parsed. `by_hash` (Parquet too): the lines are grouped by a hash of the key columns, and each group's key
    columns are read back from its first line, several times faster than grouping by a few dozen text
    columns. Should two different keys share a hash, the query fails with CLASH and the caller groups by the
    columns themselves. `keys_apart` (a file read once: a CSV would be parsed twice to read keys back): the
    lines are grouped by a hash of the key columns too, and each hash's key columns are a grouping set of their
    own in the same scan (as few rows as there are resources and usage types), joined back; the same CLASH.
    Grouped by a dozen text columns a day, the grouping was as wide as the lines: 3.3M shuffled lines of a gzip
    CUR spilled 4.2 GB under the 384 MB limit (25.7 CPU s), against 1.6 GB grouped by hash (16.1).
    `keys_by_hash` (any file): the classified keys are joined back to the groups by a hash too (select_sql's
    `by_hash`), with the same CLASH.

    `files`: the relation is several files read as one scan (the parts of one export), naming each line's file
    in its FILE column, and `row_number` numbers all their lines in the order read, files one after another.
    A group can then hold lines of several files (a part holds a few hours of many resources' lines: grouped
    per file, nearly every line would be a group of its own). It is named by the file of its first line
    (x_SourceFile), and its x_SourceRow is that line's position in the read: the caller turns it into the
    line's number in its file.

    Not `ordered` (Spark: lines have no order, `row_number` is NULL): a group's description is the least of its
    lines', a scan of several files is grouped per file too, each row counts its lines without a cost (no_cost)
    and without a start (no_start), and every row is classified where it is (select_sql's `per_line`)."""
    return _rollup(exprs, cols, relation, first_row, path, fmt, costs, row_number, by_hash, rescan, files,
                   keys_by_hash, ordered, keys_apart)[1]


def _rollup(exprs: dict[str, str], cols: Columns, relation: str, first_row: int, path: str, fmt: str,
            costs: list[str], row_number: str = "row_number() OVER ()", by_hash: bool = False, rescan: bool = False,
            files: bool = False, keys_by_hash: bool = False, ordered: bool = True, keys_apart: bool = False,
            scan: bool = False, listed: bool = False) -> tuple[str | None, str]:
    """rollup_sql's SELECT; with `scan` (several files, in order) as a Scan's two statements."""
    top = cols.top
    refs = {c: referenced(e, top) for c, e in exprs.items()}
    amounts = [c for c in PER_LINE if c in exprs]
    times = [c for c in TIMES if c in exprs]
    classified = [c for c in exprs if c not in PER_LINE and c not in TIMES]
    free = set(refs.get(FREE_TEXT, set())).difference(*(refs[c] for c in classified if c not in FREE_TEXT_READERS))
    per_line = [c for c in classified if c != FREE_TEXT and refs[c] & free]  # grouped by their value
    free_cols = sorted(free)
    keys = sorted(set().union(*(refs[c] for c in classified if c not in per_line)) - free)
    time_cols = sorted(set().union(*(refs[c] for c in times)))

    def u(c: str) -> str:  # the name a line's amount, time or per-line value goes by until rows are classified
        return q("__" + c)

    key_sql = ", ".join(q(c) for c in keys)
    by_hash = by_hash and bool(keys)
    keys_apart = keys_apart and bool(keys) and ordered
    assert not (files and by_hash), "a read of several files is read once: its keys are grouped apart"
    assert not (by_hash and keys_apart), "keys are read back or grouped apart"
    line_sql = ", ".join(f"{exprs[c]} AS {u(c)}" for c in amounts + per_line)
    if by_hash:
        line_sql += (f", {KEY_HASH.format(key_sql)} AS __h, "
                     f"{KEY_HASH.format(', '.join(q(c) for c in reversed(keys)))} AS __h2")
    time_sql = ", ".join(f"{exprs[c]} AS {u(c)}" for c in times)
    assert not scan or (files and ordered), "a scan's figures come from several files read in order"
    # A scan's lines, each hashed by every column but its file's name and the keys, which a group's lines share: a
    # line two files share is in one group, its hash twice there.
    whole = f", hash(*COLUMNS(* EXCLUDE ({', '.join([FILE, *map(q, keys)])}))) AS __lh" if listed else ""
    numbered = f"(SELECT *, {row_number} + {first_row - 1} AS __row{whole} FROM {relation})"
    if time_cols and rescan:  # times repeat (hourly, daily): parsed once per distinct value and joined back
        raw = ", ".join(q(c) for c in time_cols)
        named = ", ".join(f"{q(c)} AS __t{i}" for i, c in enumerate(time_cols))
        tm = f"SELECT {named}, {time_sql} FROM (SELECT DISTINCT {raw} FROM {relation})"
        on = " AND ".join(f"s.{q(c)} IS NOT DISTINCT FROM tm.__t{i}" for i, c in enumerate(time_cols))
        lines = (f"SELECT s.*, {line_sql}, {', '.join('tm.' + u(c) for c in times)} "
                 f"FROM {numbered} s JOIN ({tm}) tm ON {on}")
    else:
        lines = f"SELECT *, {line_sql}, {time_sql} FROM {numbered}"
    start = u("ChargePeriodStart")
    bad = f"{u('BilledCost')} IS NULL OR {start} IS NULL"
    # A group with a line that lacks its cost or start has neither: the store names its first such line, and
    # which it lacks by whether the cost is there.
    no_cost = f"arg_min({u('BilledCost')} IS NULL, __row) FILTER ({bad})"
    sums = [f"CASE WHEN count(*) FILTER ({bad}) = 0 OR NOT {no_cost} THEN sum({u(c)}) END AS {u(c)}"
            if c == "BilledCost" else f"sum({u(c)}) AS {u(c)}" for c in amounts]
    spans = [f"CASE WHEN count(*) FILTER ({bad}) = 0 THEN min({start}) END AS {start}"] + \
            [f"max({u(c)}) AS {u(c)}" for c in times if c != "ChargePeriodStart"]
    aggregates = (f"{', '.join(sums + spans)}, count(*) AS __lines, "
                  f"COALESCE(min(__row) FILTER ({bad}), min(__row)) AS __first"
                  + (f", COALESCE(arg_min({FILE}, __row) FILTER ({bad}), arg_min({FILE}, __row)) AS {FILE}"
                     if files and ordered else ""))
    counts = [] if ordered else ["no_cost", "no_start"]
    if counts:
        aggregates += (f", count(*) FILTER ({u('BilledCost')} IS NULL) AS __no_cost, "
                       f"count(*) FILTER ({start} IS NULL) AS __no_start")
    day = f"date_trunc('day', {start})"
    values = "".join(f"{u(c)}, " for c in per_line) + (f"{FILE}, " if files and not ordered else "")
    # A scan's set beside the groups: each file's figures (parts.figures) by file and currency; and each group's
    # line hashes (parts.repeated), a few bytes a line where a set of its own, a group a line, took all the
    # aggregates' room (a scan of 3.3M lines: 15.3 CPU s, 36.0 with it, 20.4 with the hashes listed).
    figures, file_set, currency = "", "", ""
    figure_columns = [c for c in FIGURES if listed or c != "__lhs"] if scan else []
    if scan:
        figures = (f", min(__row) AS __pos, min({start}) AS __t0, max({u('ChargePeriodEnd')}) AS __t1, "
                   f"sum({u('BilledCost')}) AS __billed, count(*) FILTER ({start} < TIMESTAMP '2000-01-01') AS __old, "
                   f"count(*) FILTER ({start} >= CAST(current_date + 1 AS TIMESTAMP)) AS __future, "
                   f"max({start}) AS __last, __cur{', list(__lh) AS __lhs' if listed else ''}, "
                   f"GROUPING(__day, {FILE}) AS __set")
        file_set = f", ({FILE}, __cur)"
        currency = f", {exprs['BillingCurrency']} AS __cur"
    group_set, key_set = (GROUPS_SET, KEYS_SET) if scan else (0, 1)
    src = SCAN if scan else "__s"
    sets = None
    if keys_apart:  # each hash's key columns a grouping set of their own (its rows' amounts unused)
        firsts = "".join(f"arg_min({q(c)}, __row) AS {q(c)}, " for c in free_cols)
        sets = (f"SELECT __h, __day, {key_sql}, {values}{firsts}{aggregates}"
                f"{figures or ', GROUPING(__day) AS __set'} "
                f"FROM (SELECT *, {KEY_HASH.format(key_sql)} AS __h, {day} AS __day{currency} FROM ({lines})) "
                f"GROUP BY GROUPING SETS (({values}__h, __day), (__h, {key_sql}){file_set})")
        keyed = f"SELECT __h, {key_sql} FROM {src} WHERE __set = {key_set}"
        grouped = ("" if scan else f"WITH __s AS MATERIALIZED ({sets}) ") + (
                   f"SELECT k.* EXCLUDE (__h), "
                   f"g.* EXCLUDE ({key_sql}, __h, __day, __set{_excluded(figure_columns)}) "
                   f"FROM (SELECT * FROM {src} WHERE __set = {group_set}) g JOIN ({keyed}) k USING (__h) "
                   f"WHERE {unique('__h', f'({keyed})')}")
    elif by_hash:  # the key columns and the free text are read back from the group's first line
        grouped = (f"SELECT {values}{aggregates}, min(__row) AS __rep, min(__h2) <> max(__h2) AS __clash "
                   f"FROM ({lines}) GROUP BY {values}__h, {day}")
        back = ", ".join(q(c) for c in keys + free_cols)
        grouped = (f"SELECT r.* EXCLUDE (__rep), g.* EXCLUDE (__rep, __clash) FROM ({grouped}) g "
                   f"JOIN (SELECT __row AS __rep, {back} FROM {numbered}) r USING (__rep) "
                   f"WHERE CASE WHEN g.__clash THEN error({lit(CLASH)}) ELSE true END")
    else:
        firsts = "".join(f"arg_min({q(c)}, __row) AS {q(c)}, " if ordered else f"min({q(c)}) AS {q(c)}, "
                         for c in free_cols)
        by = f"{key_sql + ', ' if keys else ''}{values}"
        if scan:
            sets = (f"SELECT {by}{firsts}{aggregates}, __day{figures} "
                    f"FROM (SELECT *, {day} AS __day{currency} FROM ({lines})) "
                    f"GROUP BY GROUPING SETS (({by}__day){file_set})")
            grouped = (f"SELECT * EXCLUDE (__day, __set{_excluded(figure_columns)}) "
                       f"FROM {SCAN} WHERE __set = {group_set}")
        else:
            grouped = f"SELECT {by}{firsts}{aggregates} FROM ({lines}) GROUP BY {by}{day}"
    # The classification reads the grouped rows: the key columns keep their names, so the reader's expressions
    # apply unchanged; amounts and times are the group's.
    over = {c: u(c) for c in amounts + times + per_line}
    over[LINES] = "__lines"
    over.update({c: f"__{c}" for c in counts})
    rows = Columns(keys + free_cols + [f"__{c}" for c in amounts + times + per_line + counts] + ["__lines", "__first"],
                   tuple((k, v) for k, v in cols.fields.items() if k.split(".")[0] in keys + free_cols))
    if not ordered:
        return None, f"WITH __g AS ({grouped}) " + select_sql({**exprs, **over}, rows, "__g", 1, path, fmt,
                                                              costs + counts, "__first", files, materialized=False,
                                                              per_line=True)
    # Materialized: the classification reads the groups twice (rows and distinct keys), and the grouping is the
    # costly part.
    return (sets if scan else None), f"WITH __g AS MATERIALIZED ({grouped}) " + select_sql(
        {**exprs, **over}, rows, "__g", 1, path, fmt, costs, "__first", files, by_hash=keys_by_hash)


def _excluded(columns: list[str]) -> str:
    """The columns of a scan's figures, left out of its groups' rows."""
    return "".join(f", {c}" for c in columns)

"""`--engine spark`: the heavy stage on a Spark cluster. Spark reads each billing export, normalizes it with the
very SELECT DuckDB runs (auditor/tables/normalize.py's rollup over the readers' expressions, translated from
DuckDB's dialect to Spark's in tables/spark_sql.py): the lines summed per file, UTC day and distinct value of the
columns the reader classifies from, where they are read (a partial aggregation before any shuffle), then each such
row classified where it is (rather than each distinct key classified and joined back, which on Spark is a shuffle),
and the rows reduced to one per file, day and distinct everything-else (resource, usage type, tags, ...). The
small files of one folder, format and columns (an export's parts) are one scan, as DuckDB batches them
(tables/parts.py). Every file's rows come back to the driver in one Spark job (never one row per line: the
free-text description is no key), into the DuckDB `costs` table, where the rules, summaries and reports run as usual.

What the reduction keeps exact: every amount (sums of DECIMAL(38,18), a DOUBLE amount converted as DuckDB
converts it, spark_sql._double_to_decimal, so the sums are DuckDB's to the last digit), per currency, and every
grouping the summaries use, for windows that start and end on UTC days (quarters, --since/--until dates). What
it does not keep: x_SourceRow (NULL; DuckDB keeps each row's first line). Nor does Spark
diagnose a malformed file line by line as the DuckDB reader does: a line without a cost or a start time stops
the audit with the file named, and `--engine duckdb` names the line. Spark tells gzip from the `.gz` suffix.
A date none of Azure's formats reads is such an empty start time on Spark (DuckDB stops at it). Avro exports
are read through the Parquet copy DuckDB reads, written to the store's temporary folder.

Which files, local or URIs, and how each is sniffed: tables/spark_files.py.

PySpark, sqlglot and pyarrow are imported by these three modules only (the `spark` extra).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from auditor.errors import InputError
from auditor.providers.billing import csv_dialect
from auditor.providers.billing.columns import Columns, check_types
from auditor.sql import q
from auditor.tables.normalize import FILE, FREE_TEXT, PER_LINE, TAG_KEY, rollup_sql, tag_key_sql
from auditor.tables.spark_files import billing_batches, check_gzip_name
from auditor.tables.spark_sql import to_spark

if TYPE_CHECKING:
    from auditor.tables.store import SourceFile, Store

# Summed when lines are reduced, as DuckDB's rollup sums them: the split and commitment amounts too (kept as keys,
# the provider's split of hourly lines came out 1/24 of DuckDB's).
AMOUNTS = PER_LINE
CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "false",  # out-of-range list index and the like read as NULL, as in DuckDB
    "spark.sql.legacy.timeParserPolicy": "CORRECTED",  # a date that does not fit a format is NULL (Spark 3's default
    # raises where its old parser would have read it), so the next of strptime's formats is tried
    "spark.sql.variant.allowDuplicateKeys": "true",  # json_valid: DuckDB takes JSON with a key twice as valid
    # DECIMAL(38,18) + DECIMAL(38,18) is DECIMAL(38,18), as in DuckDB, not DECIMAL(38,17) (an 18th decimal lost)
    "spark.sql.decimalOperations.allowPrecisionLoss": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


# Local mode runs the executors inside the driver's JVM: the heap holds the shuffle of a file's lines and the
# reduced rows it sends back (Spark's default, 1g, loses task results on ten million high-churn lines), and a
# few shuffle partitions suit a few cores (a cluster's default is 200). --spark-conf overrides either.
LOCAL = {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "4"}


def parse_conf(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """--spark-conf KEY=VALUE settings as a dict; a setting that is not KEY=VALUE is the user's error."""
    conf = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().startswith("spark."):
            raise InputError(f"--spark-conf {item!r}: expected a Spark setting as KEY=VALUE, e.g. "
                             "spark.driver.memory=8g")
        conf[key.strip()] = value.strip()
    return conf


def session(master: str | None = None, quiet: bool = True, conf: dict[str, str] | None = None):
    """The active SparkSession (a notebook's), or a new one on `master` (default: spark-submit's, where it started
    this program, else local[2]). A new one is `quiet`:
    its JVM logs no start-up noise (auditor/data/spark-log4j2.properties) and a local one binds to loopback.
    `conf` (--spark-conf) is applied over CONF and, in local mode, LOCAL; an active session takes only its
    spark.sql.* settings (the others are fixed when a session starts)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError("--engine spark needs PySpark: pip install 'gpu-auditor[spark]'") from None
    conf = conf or {}
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        for k, v in {**CONF, **conf}.items():
            if k.startswith("spark.sql."):
                active.conf.set(k, v)
        return active
    builder = SparkSession.builder.appName("gpu-auditor")
    if master is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        # Started by spark-submit, whose JVM is running: its --master and --conf (and spark-defaults.conf) hold.
        master = "submitted"
    else:
        master = master or "local[2]"
        builder = builder.master(master)
    for k, v in {**CONF, **(LOCAL if master.startswith("local") else {}), **conf}.items():
        builder = builder.config(k, v)
    if quiet:
        config = Path(__file__).resolve().parents[1] / "data" / "spark-log4j2.properties"
        options = f"-Dlog4j2.configurationFile={config.as_uri()}"
        builder = builder.config("spark.driver.extraJavaOptions",
                                 f"{options} {conf['spark.driver.extraJavaOptions']}"
                                 if "spark.driver.extraJavaOptions" in conf else options)
        if master.startswith("local"):  # else Spark warns that the host name resolves to a loopback address
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support", category=FutureWarning)
    return builder.getOrCreate()


def _register_catalog(spark, catalog) -> None:
    """The GPU catalog's two small tables as views, marked for broadcast: Spark cannot size a DataFrame made
    from Python rows, and would otherwise shuffle every billing line to join them."""
    from pyspark.sql.functions import broadcast

    fams = [(p, fam, model) for p, fs in catalog.families.items() for fam, model in fs.items()]
    types = [(t.provider, t.name.lower(), t.gpu_model, t.gpus) for t in catalog.types.values()]
    broadcast(spark.createDataFrame(fams, "provider string, family string, gpu_model string")) \
        .createOrReplaceTempView("catalog_gpu_families")
    broadcast(spark.createDataFrame(types, "provider string, instance_type string, gpu_model string, "
                                           "gpu_count decimal(10,6)")) \
        .createOrReplaceTempView("catalog_instance_types")


def _read(spark, s, view: str, scratch: str, paths: list[str]) -> None:
    """The files at `paths` (URIs; several: one format and columns, `s` sniffed from the first) as a Spark view
    with the columns DuckDB sees: CSV as text, Parquet, JSON and Avro typed. An Avro file is read through the
    Parquet copy DuckDB reads too (avro.py), written to `scratch`, the store's own temporary folder (on a
    cluster, a folder every node mounts: TMPDIR)."""
    # The names DuckDB reads (a CSV's twins in ASCII case renamed by their places, below): Spark compares names in
    # any case, beyond ASCII too (`É` is `é` to it, two names to DuckDB).
    names = csv_dialect.read_names(s.columns) if s.container == "csv" else list(s.columns)
    if len({n.lower() for n in names}) < len(names):  # two AWS tags in case, in a Parquet or JSON file
        raise InputError("two columns differ only in case (two tags?), which Spark cannot read apart: read the file "
                         "with --engine duckdb", path=str(s.path))
    if s.container == "avro":
        from auditor.providers.billing.avro import to_parquet

        df = spark.read.parquet(to_parquet(s.path, scratch).resolve().as_uri())
    elif s.container == "parquet":
        df = spark.read.parquet(*paths)
    elif s.container == "json":
        df = spark.read.json(paths)
    else:
        reader = spark.read.option("header", True).option("inferSchema", False).option("multiLine", False) \
            .option("escape", '"').option("encoding", "UTF-8").option("nullValue", "NULL")  # as csv_dialect.NULLS
        df = reader.csv(paths)
        if s.has_bom and df.columns:
            df = df.withColumnRenamed(df.columns[0], s.columns[0])
    # Two AWS tag columns of a CSV in case (`...:team`, `...:Team`): named by their places as DuckDB names them
    # (`...:Team_1`), which the reader's SQL reads; Spark names them its own way.
    if s.container == "csv" and names != list(s.columns) and len(df.columns) == len(s.columns):
        df = df.toDF(*names)
    df.createOrReplaceTempView(view)


def reduced_sql(select: str, costs: list[str]) -> str:
    """The normalized rows (normalize.rollup_sql's, each the sum of lines that agree on every column read) reduced
    to one row per UTC day and distinct everything else, amounts and counts summed (DuckDB's dialect, like
    `select`). Spark cannot group by a MAP, so Tags travel as their sorted entries. The description, which can
    differ on every line, is no key (as in normalize.rollup_sql): Spark keeps no line order, so a row's
    description is the least of its lines'."""
    keys = [c for c in costs if c not in AMOUNTS + ("ChargePeriodStart", "ChargePeriodEnd", "x_SourceRow", "Tags",
                                                    "x_Lines", FREE_TEXT)]
    cols = ", ".join(q(c) for c in keys)
    sums = ", ".join(f"sum({q(c)}) AS {q(c)}" for c in AMOUNTS)
    return f"""
        SELECT {cols}, {sums}, min(ChargePeriodStart) AS ChargePeriodStart, max(ChargePeriodEnd) AS ChargePeriodEnd,
               min({FREE_TEXT}) AS {FREE_TEXT}, map_from_entries(tag_entries) AS Tags,
               CAST(NULL AS BIGINT) AS x_SourceRow,
               sum(x_Lines) AS x_Lines, sum(no_cost) AS no_cost, sum(no_start) AS no_start
        FROM (SELECT *, array_sort(map_entries(Tags)) AS tag_entries, date_trunc('DAY', ChargePeriodStart) AS day
              FROM ({select}))
        GROUP BY {cols}, tag_entries, day"""


def load_billing(store: Store, paths: list[Path | str], master: str | None = None,
                 progress: Callable[[str], None] | None = None, spark: Any = None) -> list[SourceFile]:
    """Read, normalize and reduce the billing files (local paths, and URIs as text) on Spark, into `store`'s
    costs table. Every file's reduced rows come back in one Spark job (the union of each batch's query: a file,
    or the small files of one folder, format and columns read as one scan, as parts.py batches them for
    DuckDB), the lines summed and classified where they are read; then each file's lines are checked and counted."""
    import pyarrow as pa

    from auditor.tables.schema import COSTS
    from auditor.tables.store import SourceFile

    spark = spark or session(master)
    _register_catalog(spark, store.catalog)
    frames, sources, named = [], [], {}
    for i, batch in enumerate(billing_batches(spark, store, paths, progress), 1):
        name, _, sniffed, _ = batch[0]
        for path, _, s, _ in batch:
            check_gzip_name(s, path)
        cols = Columns(sniffed.columns, sniffed.fields, sniffed.types)
        exprs, checks = store.reader_sql(sniffed.format, cols)
        check_types(cols, checks, name)
        view = f"billing_{i}"
        _read(spark, sniffed, view, store._spill.name, [location for *_, location in batch])
        several = len(batch) > 1  # then each line names its file, by the URI Spark read it by
        relation = f"(SELECT *, input_file_name() AS {FILE} FROM {q(view)})" if several else q(view)
        # The lines first summed per day and distinct value of the columns read, on the executors where they are
        # read, then each such row classified (per line, a million high-churn lines took ~5x the CPU).
        select = rollup_sql(exprs, cols, relation, 1, name, sniffed.format, list(COSTS),
                            row_number="CAST(NULL AS BIGINT)", files=several, ordered=False)
        frames.append(spark.sql(to_spark(reduced_sql(select, list(COSTS)))))
        money = next((c for c, kind in checks if kind == "money"), None)
        sources += [SourceFile(path, s.format, digest, cost_column=money) for path, digest, s, _ in batch]
        named.update({_uri_path(location): path for path, *_, location in batch if several})
    if not frames:
        return []
    table = reduce(lambda a, b: a.unionByName(b), frames).toArrow()
    if named:  # a file of a scan of several by its name, as every other view names it
        files = table.column("x_SourceFile").combine_chunks().dictionary_encode()
        shown = pa.array([named.get(_uri_path(u), u) for u in files.dictionary.to_pylist()], pa.string())
        table = table.set_column(table.schema.get_field_index("x_SourceFile"), "x_SourceFile",
                                 pa.DictionaryArray.from_arrays(files.indices, shown).cast(pa.string()))
    store.con.register("spark_reduced", table)
    counted = {path: (lines, no_cost, no_start) for path, lines, no_cost, no_start in store.con.execute(
        "SELECT x_SourceFile, sum(x_Lines), sum(no_cost), sum(no_start) FROM spark_reduced GROUP BY ALL").fetchall()}
    # Spark reads a byte that is not UTF-8 (a spreadsheet's Windows-1252 save) as U+FFFD where DuckDB refuses the
    # line: the files whose rows hold one are refused too.
    text = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_map(f.type)]
    mangled = {path for (path,) in store.con.execute(
        "SELECT DISTINCT x_SourceFile FROM spark_reduced WHERE "
        + " OR ".join(f"contains(CAST({q(c)} AS VARCHAR), '\ufffd')" for c in text)).fetchall()} if text else set()
    for source in sources:  # in the order read: the first file that is wrong is named
        if source.path in mangled:
            raise InputError("the file is not UTF-8 text (Latin-1 or Windows-1252?): Spark reads such a byte as "
                             "'\ufffd'; save the file as UTF-8 (read it with --engine duckdb for the line and "
                             "column)", path=source.path)
        lines, no_cost, no_start = counted.get(source.path, (0, 0, 0))
        if no_cost or no_start:
            what = "the cost is empty" if no_cost else "the charge period start is empty"
            raise InputError(f"{what} on {no_cost or no_start} lines; every billing line needs a cost and a start "
                             "time (read the file with --engine duckdb for the line numbers)", path=source.path)
        if not lines:
            raise InputError("the file has a header but no billing lines", path=source.path)
    store.con.execute("INSERT INTO costs BY NAME SELECT * EXCLUDE (no_cost, no_start), "
                      f"{tag_key_sql('Tags')} AS {TAG_KEY} FROM spark_reduced")
    store.con.unregister("spark_reduced")
    store._redact_ids([s.path for s in sources], store.con)
    return store._register_all([(source, None) for source in sources])


def _uri_path(uri: str) -> str:
    """The local path a file: URI names, however Spark spells it (file:/a, file:///a, escapes or not)."""
    return unquote(urlparse(uri).path)


def billing_engine(master: str | None = None, debug: bool = False, conf: dict[str, str] | None = None
                   ) -> Callable[..., list[SourceFile]]:
    """Store.load_billing's stand-in for `--engine spark` (run_audit's `engine`); Spark's logs are quiet unless
    `debug`; `conf`: --spark-conf's settings."""
    spark = session(master, quiet=not debug, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    return lambda store, paths, progress=None: load_billing(store, paths, progress=progress, spark=spark)

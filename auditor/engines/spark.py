"""`--engine spark`: the heavy stage on a Spark cluster. Spark reads each billing export, normalizes it with the
very SELECT DuckDB runs (auditor/engines/normalize.py over the readers' expressions, translated from DuckDB's
dialect to Spark's by sqlglot plus the few rewrites below), and reduces the lines to one row per day and per
distinct everything-else (resource, usage type, tags, ...), summing the amounts. Only those rows come back to
the driver, into the DuckDB `costs` table, where the rules, summaries and reports run as usual.

What the reduction keeps exact: every amount (sums of DECIMAL(38,18)), per currency, and every grouping the
summaries use, for windows that start and end on UTC days (quarters, --since/--until dates). What it does not
keep: x_SourceRow (NULL; DuckDB keeps each row's first line). Nor does Spark
diagnose a malformed file line by line as the DuckDB reader does: a line without a cost or a start time stops
the audit with the file named, and `--engine duckdb` names the line. Spark tells gzip from the `.gz` suffix.
A date none of Azure's formats reads is such an empty start time on Spark (DuckDB stops at it). Avro exports
are read through the Parquet copy DuckDB reads, written to the store's temporary folder.

Billing given as a URI (s3a://bucket/prefix, gs://, abfss://, hdfs://, file:///) is listed and read through
Spark's own Hadoop file systems, so nothing is mounted or downloaded: the driver lists a folder recursively (the
suffixes and CUR manifests `detect.expand` goes by), tells a file given twice by the file system's checksum, or
else by its size, modification time and name, and sniffs each file by its content as `detect.sniff` does, from a
small local sample: a CSV's first 64 KiB, a newline JSON's first 20,480 lines (what DuckDB infers types from), a
Parquet file's schema as Spark reads it, written as an empty Parquet file. Avro is not read from a URI yet.

The rewrites (`to_spark`) give DuckDB's semantics, not just a function of the same name: list functions
(list_sum as aggregate, len as array_size), JSON (json_valid, `$[*].field` over a list, to_json's nulls),
strptime with a list of formats, regexp_replace's first match and `\\1` groups. What has no faithful rewrite
raises ValueError rather than run with other semantics. Numbers inside JSON text are read as DOUBLE on both
engines; DOUBLE as text differs (`1e-05`, `1.0E-5`), the number it casts to does not. Spark 4 (try_parse_json).

PySpark, sqlglot and pyarrow are imported here only (the `spark` extra).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from auditor.engines.normalize import select_sql
from auditor.errors import InputError
from auditor.providers import avro
from auditor.providers.columns import Columns, q
from auditor.providers.detect import DATA_SUFFIXES, Sniffed, _is_sidecar, is_uri, manifest_keys, sniff
from auditor.providers.redact import redact

if TYPE_CHECKING:
    from auditor.store import SourceFile, Store

AMOUNTS = ("BilledCost", "EffectiveCost", "ListCost", "ConsumedQuantity")
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


def session(master: str | None = None):
    """The active SparkSession (a notebook's), or a new one on `master` (default local[2])."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError("--engine spark needs PySpark: pip install 'gpu-auditor[spark]'") from None
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        for k, v in CONF.items():
            if k.startswith("spark.sql."):  # the others are fixed when a session starts
                active.conf.set(k, v)
        return active
    master = master or "local[2]"
    builder = SparkSession.builder.master(master).appName("gpu-auditor")
    for k, v in CONF.items():
        builder = builder.config(k, v)
    if master.startswith("local"):  # one machine: a few shuffle partitions, not a cluster's 200
        builder = builder.config("spark.sql.shuffle.partitions", "4")
    return builder.getOrCreate()


def _template(sql: str, **parts):
    """A Spark SQL expression with `:name` placeholders filled by (copies of) already translated expressions."""
    import sqlglot
    from sqlglot import exp

    def fill(node):
        return parts[node.name].copy() if isinstance(node, exp.Placeholder) and node.name in parts else node

    return sqlglot.parse_one(sql, read="spark").transform(fill)


def _replacement(text: str, shift: int = 0) -> str:
    """A DuckDB (RE2) regexp_replace replacement in Java's terms: group `\\1` is `$1` (plus `shift`), a literal
    `$` is `\\$`, and `\\\\` stays a backslash."""
    def one(m: re.Match) -> str:
        if m.group(0) == "$":
            return "\\$"
        return f"${int(m.group(1)) + shift}" if m.group(1).isdigit() else m.group(0)

    return re.sub(r"\\(.)|\$", one, text)


def _element_type(node) -> str:
    """The Spark type of a list's elements, where the SQL says it: list_transform(l, lambda a: CAST(a AS T))."""
    from sqlglot import exp

    body = node.args.get("expression").this if isinstance(node, exp.Transform) and \
        isinstance(node.args.get("expression"), exp.Lambda) else None
    if isinstance(body, exp.Cast):
        return body.to.sql(dialect="spark")
    raise ValueError(f"cannot translate list_sum to Spark: the type of the list's elements is not in the SQL "
                     f"({node.sql(dialect='duckdb')[:80]}); cast them in a list_transform")


def to_spark(sql: str) -> str:
    """DuckDB SQL as Spark SQL: sqlglot's translation, plus rewrites for what it leaves in DuckDB's terms (or
    translates with other semantics). A construct with no faithful translation raises ValueError."""
    import sqlglot
    from sqlglot import exp

    def fix(node: exp.Expression) -> exp.Expression:
        # timezone('UTC', ts): Spark's session already runs in UTC.
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "timezone" and \
                len(node.expressions) == 2 and node.expressions[0].name.upper() == "UTC":
            return node.expressions[1]
        # x SIMILAR TO 'p' is a whole-string regular expression match.
        if isinstance(node, exp.SimilarTo) and isinstance(node.expression, exp.Literal):
            return exp.RegexpLike(this=node.this, expression=exp.Literal.string(f"^(?:{node.expression.name})$"))
        # regexp_extract(x, p, ['a', 'b']): a struct of the named groups.
        if isinstance(node, exp.RegexpExtract) and isinstance(node.args.get("group"), exp.Array):
            fields = []
            for i, name in enumerate(node.args["group"].expressions, 1):
                fields += [exp.Literal.string(name.name),
                           exp.RegexpExtract(this=node.this.copy(), expression=node.expression.copy(),
                                             group=exp.Literal.number(i))]
            return exp.Anonymous(this="named_struct", expressions=fields)
        # s[6:] on text: substring from the 6th character.
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1 and \
                isinstance(node.expressions[0], exp.Slice) and node.expressions[0].args.get("expression") is None:
            return exp.Substring(this=node.this, start=node.expressions[0].this)
        # list_sum(l): a sum that skips NULLs and is NULL for no values, as SQL's sum(), in the elements' type
        # (the cast keeps aggregate's accumulator in that type whatever Spark makes of a sum's type).
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "list_sum" and len(node.expressions) == 1:
            t = _element_type(node.expressions[0])
            return _template(f"aggregate(:l, CAST(NULL AS {t}), (__acc, __v) -> "
                             f"CAST(COALESCE(__acc + __v, __acc, __v) AS {t}))", l=node.expressions[0])
        # len(list), array_length(list): Spark's length() is for text only; array_size, unlike size, keeps NULL
        # as NULL. (len of a bare list column is not told from len of text: it fails on Spark, never misreads.)
        if isinstance(node, exp.ArraySize) or isinstance(node, exp.Length) and (
                isinstance(node.this, (exp.ArrayFilter, exp.Transform, exp.Array, exp.RegexpExtractAll, exp.Split))
                or id(node.this) in lists):
            return exp.Anonymous(this="array_size", expressions=[node.this])
        # json_valid(x): NULL stays NULL.
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "json_valid" and len(node.expressions) == 1:
            return _template("(try_parse_json(:x) IS NOT NULL OR NULLIF(:x IS NULL, TRUE))", x=node.expressions[0])
        # json_extract_string(j, '$[*].f'): the field of every element that is an object and has it, as a list
        # of text (a string as itself, anything else as its JSON text); [] where j is no array. Spark's
        # get_json_object unwraps a single match.
        if isinstance(node, exp.JSONExtractScalar) and isinstance(node.expression, exp.JSONPath) and \
                node.expression.find(exp.JSONPathWildcard):
            parts = node.expression.expressions
            if [type(p) for p in parts] != [exp.JSONPathRoot, exp.JSONPathSubscript, exp.JSONPathKey] or \
                    not isinstance(parts[1].this, exp.JSONPathWildcard):
                raise ValueError(f"cannot translate the JSON path {node.expression.sql(dialect='duckdb')} to Spark")
            found = _template("CASE WHEN :j IS NOT NULL THEN coalesce(transform(filter(transform("
                              "from_json(:j, 'array<string>'), __e -> from_json(__e, 'map<string, string>')), "
                              "__m -> map_contains_key(__m, :f)), __m -> __m[:f]), array()) END",
                              j=node.this, f=exp.Literal.string(parts[2].name))
            lists.add(id(found))
            return found
        # to_json(x): a NULL field written as null, as DuckDB writes it, not left out.
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "to_json" and len(node.expressions) == 1:
            return _template("to_json(:x, map('ignoreNullFields', 'false'))", x=node.expressions[0])
        # strptime(x, [formats]): the first format that reads the whole text.
        if isinstance(node, exp.StrToTime) and isinstance(node.args.get("format"), exp.Array):
            return exp.Coalesce(this=exp.StrToTime(this=node.this.copy(), format=node.args["format"].expressions[0]),
                                expressions=[exp.StrToTime(this=node.this.copy(), format=f)
                                             for f in node.args["format"].expressions[1:]])
        # regexp_replace: DuckDB replaces the first match unless told 'g', Spark every match; groups are $1.
        if isinstance(node, exp.RegexpReplace) and isinstance(node.expression, exp.Literal) and \
                isinstance(node.args.get("replacement"), exp.Literal):
            flags = node.args["modifiers"].name if isinstance(node.args.get("modifiers"), exp.Literal) else ""
            if set(flags) - set("gi"):
                raise ValueError(f"cannot translate regexp_replace with options {flags!r} to Spark")
            pattern, replacement = node.expression.name, node.args["replacement"].name
            if "i" in flags:
                pattern = f"(?i){pattern}"
            if "g" in flags:
                replacement = _replacement(replacement)
            else:  # the shortest prefix, then the pattern (group 2, and its groups after it): the first match only
                pattern = f"^(?s:(.*?))({pattern})"
                replacement = "$1" + _replacement(replacement, 2)
            return exp.RegexpReplace(this=node.this, expression=exp.Literal.string(pattern),
                                     replacement=exp.Literal.string(replacement))
        return node

    lists: set[int] = set()  # rewritten expressions that are lists, where sqlglot's node type no longer says so
    tree = sqlglot.parse_one(sql, read="duckdb")
    # Children first, so that a rewrite sees (and keeps) its arguments already in Spark's terms.
    for node in reversed(list(tree.walk(bfs=False))):
        new = fix(node)
        if new is not node:
            node.replace(new)
    return tree.sql(dialect="spark")


def _register_catalog(spark, catalog) -> None:
    fams = [(p, fam, model) for p, fs in catalog.families.items() for fam, model in fs.items()]
    types = [(t.provider, t.name.lower(), t.gpu_model, t.gpu_count) for t in catalog.types.values()]
    spark.createDataFrame(fams, "provider string, family string, gpu_model string") \
        .createOrReplaceTempView("catalog_gpu_families")
    spark.createDataFrame(types, "provider string, instance_type string, gpu_model string, gpu_count int") \
        .createOrReplaceTempView("catalog_instance_types")


def _read(spark, s, view: str, scratch: str, path: str) -> None:
    """The file at `path` (a URI) as a Spark view with the columns DuckDB sees: CSV as text, Parquet, JSON and Avro
    typed. An Avro file is read through the Parquet copy DuckDB reads too (avro.py), written to `scratch`, the
    store's own temporary folder (on a cluster, a folder every node mounts: TMPDIR)."""
    if s.container == "avro":
        from auditor.providers.avro import to_parquet

        df = spark.read.parquet(to_parquet(s.path, scratch).resolve().as_uri())
    elif s.container == "parquet":
        df = spark.read.parquet(path)
    elif s.container == "json":
        df = spark.read.json(path)
    else:
        reader = spark.read.option("header", True).option("inferSchema", False).option("multiLine", False) \
            .option("escape", '"').option("encoding", "UTF-8")
        if s.format.startswith("focus"):
            reader = reader.option("nullValue", "NULL")
        df = reader.csv(path)
        if s.has_bom and df.columns:
            df = df.withColumnRenamed(df.columns[0], s.columns[0])
    df.createOrReplaceTempView(view)


def reduced_sql(select: str, costs: list[str]) -> str:
    """The normalized lines reduced to one row per UTC day and distinct everything else, amounts summed
    (DuckDB's dialect, like `select`). Spark cannot group by a MAP, so Tags travel as their sorted entries."""
    keys = [c for c in costs if c not in AMOUNTS + ("ChargePeriodStart", "ChargePeriodEnd", "x_SourceRow", "Tags",
                                                    "x_Lines")]
    cols = ", ".join(q(c) for c in keys)
    sums = ", ".join(f"sum({q(c)}) AS {q(c)}" for c in AMOUNTS)
    return f"""
        SELECT {cols}, {sums}, min(ChargePeriodStart) AS ChargePeriodStart, max(ChargePeriodEnd) AS ChargePeriodEnd,
               map_from_entries(tag_entries) AS Tags, CAST(NULL AS BIGINT) AS x_SourceRow,
               count(*) AS x_Lines, count(*) - count(BilledCost) AS no_cost,
               count(*) - count(ChargePeriodStart) AS no_start
        FROM (SELECT *, array_sort(map_entries(Tags)) AS tag_entries, date_trunc('DAY', ChargePeriodStart) AS day
              FROM ({select}))
        GROUP BY {cols}, tag_entries, day"""


SAMPLE = 1 << 16  # bytes of a CSV read for its header, as detect._read_header reads them
JSON_SAMPLE = 20_480  # lines of newline JSON: DuckDB's read_ndjson infers the types from its first 20,480 records
JSON_SAMPLE_BYTES = 64 << 20


def _spark_errors() -> tuple[type[BaseException], ...]:
    """What Spark raises for a file or file system it cannot read: its own errors, and the JVM's through py4j."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return PySparkException, Py4JJavaError


def _reason(e: BaseException) -> str:
    """The first line of the JVM's (or Spark's) message, without URL secrets."""
    java = getattr(e, "java_exception", None)
    text = (java.toString() if java is not None else None) or str(e)
    return redact(text.strip().splitlines()[0] if text.strip() else type(e).__name__)[:300]


def _fs_error(e: BaseException, uri: str) -> InputError:
    """One line for a URI the cluster's file systems cannot list or read."""
    reason = _reason(e)
    if "FileNotFoundException" in reason:
        return InputError("no such file or folder", path=uri)
    if "No FileSystem for scheme" in reason or "ClassNotFoundException" in reason:
        scheme = uri.split(":", 1)[0]
        hint = " (outside EMR, S3 is s3a://)" if scheme == "s3" else ""
        return InputError(f"this Spark has no file system for {scheme}://{hint}: {reason}. EMR, Dataproc and "
                          "Databricks clusters have theirs; elsewhere add the connector's jars (hadoop-aws for "
                          "s3a://, the Cloud Storage connector for gs://, hadoop-azure for abfss://)", path=uri)
    return InputError(f"cannot list or read it: {reason}", path=uri)


def _head(fs, path) -> bytes:
    """The first bytes of a file, as many as sniffing needs: 64 KiB for a CSV header, a MiB where it is gzip (a
    MiB of deflate holds at least its first 64 KiB inflated), and newline JSON's first 20,480 whole lines (up to
    64 MiB)."""
    stream = fs.open(path)
    try:
        head = bytes(stream.readNBytes(SAMPLE))
        if head[:2] == b"\x1f\x8b":
            return head + bytes(stream.readNBytes((1 << 20) - len(head)))
        if head[:4].lstrip()[:1] != b"{" or len(head) < SAMPLE:
            return head
        lines = head.count(b"\n")
        while lines < JSON_SAMPLE and len(head) < JSON_SAMPLE_BYTES:
            chunk = bytes(stream.readNBytes(1 << 20))
            if not chunk:  # the whole file
                return head
            head += chunk
            lines += chunk.count(b"\n")
    finally:
        stream.close()
    first = head.split(b"\n", JSON_SAMPLE)
    if len(first) > JSON_SAMPLE:  # the sample's lines, without what follows them
        return b"\n".join(first[:JSON_SAMPLE]) + b"\n"
    end = head.rfind(b"\n")
    return head[:end + 1] if end >= 0 else head  # whole lines only (a line of 64 MiB: DuckDB says what it makes of it)


def _sniff_uri(spark, fs, path, uri: str, store: Store) -> Sniffed:
    """The file sniffed by its content as detect.sniff does, from a small local sample (see the module's
    docstring) in the store's temporary folder, without reading the file through."""
    import pyarrow.parquet as pq

    local = Path(store._spill.name) / f"sniff-{hashlib.sha256(uri.encode()).hexdigest()[:16]}"
    try:
        try:
            head = _head(fs, path)
        except _spark_errors() as e:
            raise _fs_error(e, uri) from None
        if head[:4] == b"PAR1":
            try:  # Spark reads the footer only; DuckDB then sees the types it would see in the file
                schema = spark.read.parquet(uri).limit(0).toArrow()
            except _spark_errors() as e:
                raise InputError(f"cannot read the Parquet file (cut short or damaged?): {_reason(e)}",
                                 path=uri) from None
            pq.write_table(schema, local)
        elif head[:4] == avro.MAGIC:
            raise InputError("Avro exports are not read from a URI yet: copy the file to a local path (or a "
                             "mount) and give that, or export the billing as Parquet or newline JSON", path=uri)
        else:
            local.write_bytes(head)
        return sniff(local, store.con)
    except InputError as e:
        e.path = uri  # the file, not its local sample
        raise
    finally:
        local.unlink(missing_ok=True)


def _list(spark, uri: str, notes: list[str]) -> list[tuple[Any, Any]]:
    """(file system, FileStatus) of the file at `uri`, or of the billing files under a folder, recursively: the
    names `detect.expand` reads, sorted, and only those a CUR manifest in the folder lists where there is one."""
    if getattr(spark, "_jvm", None) is None:  # Spark Connect (Databricks serverless, shared access) has no JVM here
        raise InputError("a URI is listed through the JVM of a classic Spark session, which Spark Connect does not "
                         "give: run on a dedicated (single user) cluster, or give the files' local paths", path=uri)
    try:
        path = spark._jvm.org.apache.hadoop.fs.Path(uri)
        fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        top = fs.getFileStatus(path)
        if top.isFile():
            return [(fs, top)]
        found = []
        it = fs.listFiles(path, True)
        while it.hasNext():
            found.append(it.next())
        name = lambda st: st.getPath().getName()  # noqa: E731
        files = sorted((st for st in found if name(st).lower().endswith(DATA_SUFFIXES) and
                        not name(st).startswith(".") and not _is_sidecar(PurePosixPath(name(st)))),
                       key=lambda st: st.getPath().toString().split("/"))
        listed: set[str] = set()
        for st in found:
            if name(st).lower().endswith("manifest.json"):
                stream = fs.open(st.getPath())
                try:
                    text = bytes(stream.readAllBytes()).decode("utf-8", errors="replace")
                finally:
                    stream.close()
                listed |= manifest_keys(text, st.getPath().toString())
    except _spark_errors() as e:
        raise _fs_error(e, uri) from None
    if listed:  # AWS re-delivers a month as a new assembly: only the manifest's files (as detect.expand)
        tail = lambda st: f"{st.getPath().getParent().getName()}/{name(st)}"  # noqa: E731
        kept = [st for st in files if tail(st) in listed] or [st for st in files if name(st) in listed]
        notes += [f"{st.getPath()}: not in the folder's CUR manifest (a superseded delivery); not read"
                  for st in files if st not in kept]
        files = kept
    if not files:
        raise InputError("folder holds no billing files (.csv, .csv.gz, .parquet, .json, .avro)", path=uri)
    return [(fs, st) for st in files]


def _distinct_uris(spark, store: Store, uris: list[str], progress: Callable[[str], None] | None
                   ) -> Iterator[tuple[str, str, Sniffed, str]]:
    """As Store.distinct_files, for URIs: a file listed twice is read once, with a warning. Files are told apart
    without reading them through: by the file system's checksum where it gives one (HDFS; S3A and the Cloud
    Storage connector when configured to), else by size, modification time and name."""
    from auditor.store import SourceFile

    files = [item for uri in uris for item in _list(spark, uri, store.warnings)]
    seen: dict[tuple, str] = {}
    for i, (fs, st) in enumerate(files, 1):
        path = st.getPath()
        uri = path.toString()
        try:
            checksum = fs.getFileChecksum(path)
        except _spark_errors():  # a file system that cannot say
            checksum = None
        key = ("checksum", checksum.getAlgorithmName(), bytes(checksum.getBytes()).hex(), st.getLen()) \
            if checksum is not None else ("stat", st.getLen(), st.getModificationTime(), path.getName())
        # audit.json's sha256 of a file read by URI is that of this identity, not of its bytes
        digest = hashlib.sha256(repr(key).encode()).hexdigest()
        if key in seen:
            same = "content (checksum)" if checksum is not None else "name, size and modification time"
            store.warnings.append(f"{uri}: same {same} as {seen[key]}; read once")
            store.sources.append(SourceFile(uri, "duplicate", digest, duplicate_of=seen[key]))
            continue
        seen[key] = uri
        if progress:
            progress(f"[{i}/{len(files)}] reading {uri} on Spark")
        yield uri, digest, _sniff_uri(spark, fs, path, uri, store), uri


def _files(spark, store: Store, paths: list, progress: Callable[[str], None] | None
           ) -> Iterator[tuple[str, str, Sniffed, str]]:
    """(name, digest, sniffed, URI Spark reads it by) of each billing file to read: local files (through
    Store.distinct_files), then URIs."""
    local = [p for p in paths if not is_uri(p)]
    if local:
        for path, digest in store.distinct_files(local, progress, " on Spark"):
            # file: URIs: every executor reads the same path from its own file system (a shared mount on a
            # cluster), rather than the cluster's default file system.
            yield str(path), digest, sniff(path, store.con), Path(path).resolve().as_uri()
    uris = [p for p in paths if is_uri(p)]
    if uris:
        yield from _distinct_uris(spark, store, uris, progress)


def _check_gzip_name(s: Sniffed, name: str) -> None:
    """Spark (Hadoop) inflates a text file by its name, where DuckDB goes by its content: a file whose name says
    otherwise would be read as noise."""
    if s.container != "csv" or (s.compression == "gzip") == name.lower().endswith(".gz"):
        return
    if s.compression == "gzip":
        raise InputError("the file is gzip-compressed but its name does not end in .gz, and Spark inflates a file "
                         "by its name: rename it (.csv.gz), or read it with --engine duckdb", path=name)
    raise InputError("the name ends in .gz but the file is not gzip-compressed, and Spark inflates a file by its "
                     "name: rename it, or read it with --engine duckdb", path=name)


def load_billing(store: Store, paths: list[Path | str], master: str | None = None,
                 progress: Callable[[str], None] | None = None, spark: Any = None) -> list[SourceFile]:
    """Read, normalize and reduce the billing files (local paths, and URIs as text) on Spark, into `store`'s
    costs table."""
    from auditor.store import COSTS, SourceFile

    spark = spark or session(master)
    _register_catalog(spark, store.catalog)
    loaded = []
    for i, (path, digest, sniffed, location) in enumerate(_files(spark, store, paths, progress), 1):
        _check_gzip_name(sniffed, path)
        cols = Columns(sniffed.columns, sniffed.fields, sniffed.types)
        exprs, checks = store.reader_sql(sniffed.format, cols)
        view = f"billing_{i}"
        _read(spark, sniffed, view, store._spill.name, location)
        select = select_sql(exprs, cols, q(view), 1, str(path), sniffed.format, list(COSTS),
                            row_number="CAST(NULL AS BIGINT)")
        table = spark.sql(to_spark(reduced_sql(select, list(COSTS)))).toArrow()
        store.con.register("spark_reduced", table)
        lines, no_cost, no_start = store.con.execute(
            "SELECT sum(x_Lines), sum(no_cost), sum(no_start) FROM spark_reduced").fetchone()
        if no_cost or no_start:
            what = "the cost is empty" if no_cost else "the charge period start is empty"
            raise InputError(f"{what} on {no_cost or no_start} lines; every billing line needs a cost and a start "
                             "time (read the file with --engine duckdb for the line numbers)", path=str(path))
        if not lines:
            raise InputError("the file has a header but no billing lines", path=str(path))
        store.con.execute("INSERT INTO costs BY NAME SELECT * EXCLUDE (no_cost, no_start) FROM spark_reduced")
        store.con.unregister("spark_reduced")
        store._redact_ids(path, store.con)
        source = SourceFile(str(path), sniffed.format, digest, rows=int(lines),
                            cost_column=next((c for c, kind in checks if kind == "money"), None))
        source.stats = store.file_stats(str(path))
        source.stats["rows"] = int(lines)
        store.sources.append(source)
        loaded.append(source)
    return loaded


def billing_engine(master: str | None = None) -> Callable[..., list[SourceFile]]:
    """Store.load_billing's stand-in for `--engine spark` (see store.BILLING_ENGINE)."""
    spark = session(master)
    spark.sparkContext.setLogLevel("ERROR")
    return lambda store, paths, progress=None: load_billing(store, paths, progress=progress, spark=spark)

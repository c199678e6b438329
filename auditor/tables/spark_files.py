"""Billing files for `--engine spark` (tables/spark.py): local paths and URIs.

Billing given as a URI (s3a://bucket/prefix, gs://, abfss://, hdfs://, file:///) is listed and read through
Spark's own Hadoop file systems, so nothing is mounted or downloaded: the driver lists a folder recursively (the
suffixes and CUR manifests `detect.expand` goes by), tells a file given twice by the file system's checksum, or
else by its size, modification time and name, and sniffs each file by its content as `detect.sniff` does, from a
small local sample: a CSV's first 64 KiB, a newline JSON's first 20,480 lines (what DuckDB infers types from), a
Parquet file's schema as Spark reads it, written as an empty Parquet file. Avro is not read from a URI yet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from auditor.errors import AuditorError, InputError
from auditor.files import readable, shown
from auditor.providers.billing import avro
from auditor.providers.billing.detect import DATA_SUFFIXES, Sniffed, _is_sidecar, is_uri, manifest_keys, sniff
from auditor.providers.redact import redact

if TYPE_CHECKING:
    from auditor.tables.store import Store

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
    except AuditorError as e:  # bad input or out of memory
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
    from auditor.tables.store import SourceFile

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


def billing_batches(spark, store: Store, paths: list, progress: Callable[[str], None] | None
                    ) -> Iterator[list[tuple[str, str, Sniffed, str]]]:
    """The billing files to read, in batches read as one scan each, each file as (name, digest, sniffed, URI
    Spark reads it by): local files (through Store.distinct_files) batched as parts.batches batches them for
    DuckDB (the small files of one folder, format and columns together), then URIs, one by one."""
    from auditor.tables.parts import batches

    local = [p for p in paths if not is_uri(p)]
    if local:
        # file: URIs: every executor reads the same path from its own file system (a shared mount on a
        # cluster), rather than the cluster's default file system.
        for batch in batches(list(store.distinct_files(local, progress, " on Spark")), store.con):
            yield [(shown(s.path), digest, s, _file_uri(s.path)) for s, digest in batch]
    uris = [p for p in paths if is_uri(p)]
    if uris:
        yield from ([file] for file in _distinct_uris(spark, store, uris, progress))


def _file_uri(path) -> str:
    """The file: URI Spark reads a local file by. A name that is not UTF-8 is read through its link of a UTF-8 name
    (files.readable), as DuckDB reads it: Hadoop decodes a URI's escapes as UTF-8 and would not find the file."""
    if shown(path) != str(path):
        return Path(readable(path)).as_uri()
    return Path(path).resolve().as_uri()


def check_gzip_name(s: Sniffed, name: str) -> None:
    """Spark (Hadoop) inflates a text file by its name, where DuckDB goes by its content: a file whose name says
    otherwise would be read as noise."""
    if s.container != "csv" or (s.compression == "gzip") == name.lower().endswith(".gz"):
        return
    if s.compression == "gzip":
        raise InputError("the file is gzip-compressed but its name does not end in .gz, and Spark inflates a file "
                         "by its name: rename it (.csv.gz), or read it with --engine duckdb", path=name)
    raise InputError("the name ends in .gz but the file is not gzip-compressed, and Spark inflates a file by its "
                     "name: rename it, or read it with --engine duckdb", path=name)

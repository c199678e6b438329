"""Avro object container files (GCP's BigQuery billing export as Avro), read through a Parquet copy.

DuckDB reads Avro only through an extension it downloads on first use, which an offline install cannot do, so
fastavro reads the records and pyarrow writes them to Parquet, one batch of records at a time: memory stays
bounded whatever the file's size. Nested records stay STRUCTs and repeated ones LISTs, as in BigQuery's Parquet
export, so the GCP reader reads the copy as it reads a Parquet export. Both come with `gpu-auditor[avro]`.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.errors import InputError
from auditor.files import shown

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

MAGIC = b"Obj\x01"
BATCH = 10_000  # records per Parquet row group: a few tens of MB of Python objects at most

# Logical types as fastavro returns them (aware UTC datetimes, dates, Decimals) and the Arrow type that holds them.
_LOGICAL: dict[str, tuple[Any, ...]] = {
            "timestamp-millis": ("timestamp", "ms", "UTC"), "timestamp-micros": ("timestamp", "us", "UTC"),
            "local-timestamp-millis": ("timestamp", "ms", None), "local-timestamp-micros": ("timestamp", "us", None),
            "date": ("date32",), "time-millis": ("time32", "ms"), "time-micros": ("time64", "us")}


def _modules(path: Path) -> tuple[Any, Any, Any]:
    try:
        import fastavro
        import pyarrow
        import pyarrow.parquet
    except ImportError as e:
        raise InputError(f"reading an Avro export needs {e.name}, which is not installed: "
                         "pip install 'gpu-auditor[avro]'", path=str(path)) from None
    return fastavro, pyarrow, pyarrow.parquet


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return re.sub(r"\s+", " ", f"{type(error).__name__}: {text}" if text else type(error).__name__)[:200]


def arrow_schema(schema: Any, path: Path) -> Any:
    """The Arrow schema for records of an Avro schema as fastavro parses it (named types by full name)."""
    _, pa, _ = _modules(path)
    named: dict[str, Any] = {}

    def arrow(t: Any, where: str) -> Any:
        if isinstance(t, list):  # a union: ["null", T] is a nullable T, as BigQuery writes every NULLABLE field
            branches = [b for b in t if b != "null"]
            if len(branches) > 1:
                raise InputError(f"the Avro field {where} holds values of several types, which gpu-auditor does "
                                 "not read", path=str(path))
            return arrow(branches[0], where) if branches else pa.null()
        if isinstance(t, str):
            simple = {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
                      "float": pa.float32(), "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}
            if t in simple:
                return simple[t]
            if t in named:
                return named[t]
            if t in stack:
                raise InputError(f"the Avro record {t} contains itself, which Parquet cannot hold", path=str(path))
            raise InputError(f"the Avro schema names a type it never defines ({t!r}, at {where})", path=str(path))
        kind, logical = t["type"], t.get("logicalType")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = t["precision"], t.get("scale", 0)
            out = (pa.decimal128 if precision <= 38 else pa.decimal256)(precision, scale)
        elif logical in _LOGICAL and kind in ("int", "long"):
            name, *args = _LOGICAL[logical]
            out = getattr(pa, name)(*args)
        elif kind == "record":
            stack.add(t["name"])
            out = pa.struct([pa.field(f["name"], arrow(f["type"], f"{where}.{f['name']}".lstrip(".")))
                             for f in t["fields"]])
        elif kind == "array":
            out = pa.list_(arrow(t["items"], f"{where}[]"))
        elif kind == "map":
            out = pa.map_(pa.string(), arrow(t["values"], f"{where}{{}}"))
        elif kind == "enum":
            out = pa.string()
        elif kind == "fixed":
            out = pa.binary(t["size"])
        else:
            out = arrow(kind, where)  # {"type": "string"} and the like
        if kind in ("record", "enum", "fixed"):
            named[t["name"]] = out
        return out

    stack: set[str] = set()
    if not (isinstance(schema, dict) and schema.get("type") == "record"):
        raise InputError("the Avro file holds single values, not records; it is no billing export", path=str(path))
    return pa.schema(list(arrow(schema, "")))


def _header(path: Path) -> Any:
    """The file's Arrow schema, from the Avro header alone."""
    fastavro, _, _ = _modules(path)
    try:
        with open(path, "rb") as f:
            schema = fastavro.reader(f).writer_schema
    except Exception as e:  # fastavro raises what it meets: EOFError, ValueError, SchemaParseException, ...
        raise InputError(f"cannot read the Avro file's header (cut short or damaged?): {_reason(e)}",
                         path=str(path)) from None
    return arrow_schema(schema, path)


def describe(path: Path, con: DuckDBPyConnection) -> list[tuple[str, str]]:
    """(column, DuckDB type) of each top-level field, as DuckDB will see the Parquet copy: an empty Arrow
    table of the file's schema, described on a cursor of the connection that reads the copy (a cursor of its
    own, so nothing registered is left on the connection and a result it holds is left alone)."""
    table = _header(path).empty_table()
    cursor = con.cursor()
    try:
        cursor.register("avro_schema", table)
        return [(name, dtype) for name, dtype, *_ in cursor.execute("DESCRIBE SELECT * FROM avro_schema").fetchall()]
    finally:
        cursor.close()


def to_parquet(path: Path, folder: str | Path) -> Path:
    """A Parquet copy of the Avro file in `folder`, written a batch of records at a time. A file cut short or
    damaged is one InputError naming the record where reading stopped; no half-written copy is left."""
    fastavro, pa, pq = _modules(path)
    schema = _header(path)
    fd, name = tempfile.mkstemp(prefix=f"{shown(Path(path).name)}-", suffix=".parquet", dir=folder)
    os.close(fd)
    out = Path(name)
    done, batch = 0, []
    row = pa.struct(list(schema))

    def write(records: list[dict]) -> None:  # one STRUCT array: four times faster than RecordBatch.from_pylist
        writer.write_batch(pa.RecordBatch.from_struct_array(pa.array(records, type=row)))

    try:
        with open(path, "rb") as f, pq.ParquetWriter(out, schema) as writer:
            for record in fastavro.reader(f):
                batch.append(record)
                if len(batch) == BATCH:
                    write(batch)
                    done, batch = done + len(batch), []
            if batch:
                write(batch)
    except BaseException as e:
        out.unlink(missing_ok=True)
        if not isinstance(e, Exception):
            raise  # Ctrl-C
        if isinstance(e, OSError):  # the copy could not be written (a full disk): no fault of the file
            raise InputError(f"cannot write the Parquet copy of the Avro file to {folder}: {e.strerror or e}",
                             path=str(path)) from None
        if m := re.search(r"(\w+) codec is supported but you need to install one of the following libraries: "
                          r"\(([^)]*)\)", str(e)):
            libs = " or ".join(re.findall(r"'([^']+)'", m.group(2)))
            raise InputError(f"the Avro file is {m.group(1)}-compressed, which fastavro reads only with {libs}: "
                             "pip install 'fastavro[codecs]'", path=str(path)) from None
        # fastavro raises what it meets in a cut or damaged file: EOFError, ValueError, zlib.error, ...
        at = f" after record {done + len(batch):,}" if done + len(batch) else ""
        raise InputError(f"cannot read the Avro file (cut short or damaged?){at}: {_reason(e)}",
                         path=str(path)) from None
    return out

"""GCP's BigQuery billing export as Avro, read through a Parquet copy (auditor/providers/avro.py), against the
same 19 lines as the CSV, JSON and Parquet fixtures of test_readers_gcp.py: reconciled to the cent with an
independent sum (fastavro and Decimal only: cost plus the credits' amounts) and classified line by line exactly
as those are.

fixtures/billing/gcp/gcp-detailed-export.avro is written by fixtures/billing/gcp/make_avro.py from
gcp-detailed-export.jsonl in BigQuery's Avro mapping of the detailed export's schema (see its docstring); a test
here checks that the fixture is what the script writes.
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import duckdb
import fastavro
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_readers_gcp import (
    CSV_ROWS,
    CSV_TOTAL,
    EXPECTED,
    GCP_CSV,
    GCP_JSON,
    JSON_ROWS,
    LINE,
    json_net,
    q10,
    totals,
)

from auditor.cli import cli
from auditor.errors import InputError
from auditor.providers.billing import avro
from auditor.providers.billing.detect import sniff
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
GCP_AVRO = REPO / "fixtures" / "billing" / "gcp" / "gcp-detailed-export.avro"
D = Decimal

spec = importlib.util.spec_from_file_location("make_avro", REPO / "fixtures" / "billing" / "gcp" / "make_avro.py")
make_avro = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_avro)


# ---- independent reading ----------------------------------------------------------------------------------

def read_avro(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        return list(fastavro.reader(f))


def avro_net(record: dict) -> Decimal:
    # FLOAT64 columns are Avro doubles; repr() of a double is the shortest text that is exactly it
    return D(repr(record["cost"])) + sum((D(repr(c["amount"])) for c in record["credits"]), D(0))


AVRO_ROWS = read_avro(GCP_AVRO)


def load(path: Path) -> tuple[Store, object]:
    store = Store()
    return store, store.load_file(path)


@pytest.fixture(scope="module")
def gcp_avro():
    return load(GCP_AVRO)


@pytest.fixture(scope="module")
def gcp_json():
    return load(GCP_JSON)


@pytest.fixture(scope="module")
def gcp_csv():
    return load(GCP_CSV)


def write_avro(path: Path, records, codec: str = "null") -> Path:
    with open(path, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(make_avro.schema()), records, codec=codec)
    return path


# ---- the fixture ------------------------------------------------------------------------------------------

def test_fixture_is_what_the_generator_writes():
    assert GCP_AVRO.read_bytes() == make_avro.write()


def test_fixture_is_a_bigquery_style_avro_export():
    data = GCP_AVRO.read_bytes()
    assert data[:4] == b"Obj\x01"
    with open(GCP_AVRO, "rb") as f:
        reader = fastavro.reader(f)
        schema, codec = reader.writer_schema, reader.codec
    assert codec == "deflate"
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert fields["cost"] == ["null", "double"]
    assert fields["usage_start_time"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert fields["labels"]["type"] == "array" and fields["credits"]["type"] == "array"  # REPEATED: never null
    price = {f["name"]: f["type"] for f in fields["price"][1]["fields"]}
    assert price["effective_price"][1]["logicalType"] == "decimal"  # NUMERIC
    assert fields["project"][1]["name"] == "root.project"
    # the same lines as the JSON fixture, every line of it
    assert len(AVRO_ROWS) == len(JSON_ROWS) == 19
    for a, j in zip(AVRO_ROWS, JSON_ROWS, strict=True):
        assert a["sku"]["description"] == j["sku"]["description"]
        assert avro_net(a) == json_net(j)
        assert a["usage_start_time"].isoformat(" ").replace("+00:00", " UTC") == j["usage_start_time"]
    kinds = {c["type"] for r in AVRO_ROWS for c in r["credits"]}
    assert "COMMITTED_USAGE_DISCOUNT" in kinds


# ---- reconciliation and classification --------------------------------------------------------------------

def test_avro_reconciles_to_the_cent(gcp_avro):
    store, source = gcp_avro
    expected = totals(AVRO_ROWS, avro_net, lambda r: r["currency"])
    assert expected == CSV_TOTAL == {"USD": D("14.408182")}
    gross = sum(D(repr(r["cost"])) for r in AVRO_ROWS)
    assert gross - expected["USD"] == D("1.540981")  # the credits really are taken off
    assert source.format == "gcp-billing" and source.cost_column == "cost"
    assert source.rows == source.stats["rows"] == len(AVRO_ROWS)
    assert q10(source.stats["billed_cost"]) == q10(expected)
    assert q10(source.stats["effective_cost"]) == q10(expected)
    listed = sum(D(repr(r["cost_at_list"] if r["cost_at_list"] is not None else r["cost"])) for r in AVRO_ROWS)
    assert q10(source.stats["list_cost"]) == q10({"USD": listed})


def test_avro_classifies_every_named_line(gcp_avro):
    store, _ = gcp_avro
    got = store.lines().execute(LINE.format(d=0)).fetchall()
    assert [g[0] for g in got] == list(range(1, len(AVRO_ROWS) + 1))  # records numbered from 1, in file order
    for g, r in zip(got, AVRO_ROWS, strict=True):
        sku = r["sku"]["description"]
        assert g[1] == sku
        assert g[2] == g[3] == avro_net(r), sku  # exact on every line, not only to the cent
        assert g[5:15] == EXPECTED[sku], sku
    rows = {g[1]: g for g in got}
    # GPU, spot, committed use and transfer lines, by name
    assert rows["Nvidia Tesla A100 GPU running in Americas"][5:10] == ("gpu_compute", "A100", 1, None, "Committed")
    assert rows["Spot Preemptible Nvidia L4 GPU running in Americas"][5:10] == (
        "gpu_compute", "L4", 1, None, "Dynamic")
    assert rows["Commitment v1: A2 Cpu in Americas for 1 Year"][9:11] == ("Committed", "Purchase")
    assert rows["Network Inter Region Egress from Iowa to Netherlands"][11:15] == (
        "inter_region", "out", "Iowa", "Netherlands")


@pytest.mark.heavy
@pytest.mark.parametrize("form", ["json", "csv"])
def test_avro_reads_exactly_as_json_and_csv(form, gcp_avro, gcp_json, gcp_csv):
    """Same costs (exactly), classification, tags, times, ids and quantities on every line, and the same totals."""
    store, _ = gcp_avro
    other, _ = gcp_json if form == "json" else gcp_csv
    d = 0 if form == "json" else 1  # CSV lines count the header
    assert store.lines().execute(LINE.format(d=0)).fetchall() == other.lines().execute(LINE.format(d=d)).fetchall()
    for key in ("billed_cost", "effective_cost", "list_cost", "gpu_cost", "spot_cost", "gpu_spot_cost",
                "by_category", "gpu_hours", "transfer_gb_out"):
        assert store.sources[0].stats[key] == other.sources[0].stats[key], key
    assert len(CSV_ROWS) == len(AVRO_ROWS)


def test_labels_become_tags_and_nested_records_stay_nested(gcp_avro):
    store, _ = gcp_avro
    got = dict(store.lines().execute("SELECT ChargeDescription, Tags FROM lines").fetchall())
    for r in AVRO_ROWS:
        assert got[r["sku"]["description"]] == {e["key"]: e["value"] for e in r["labels"]}
    assert got["Nvidia Tesla A100 GPU running in Americas"] == {"team": "nlp", "owner": "alice"}
    s = sniff(GCP_AVRO, store.con)
    types = dict(s.types)
    assert s.container == "avro" and s.format == "gcp-billing"
    assert types["sku"].startswith("STRUCT(") and types["credits"].startswith("STRUCT(")
    assert types["credits"].endswith("[]") and types["labels"].endswith("[]") and types["project.labels"].endswith("[]")
    assert types["usage_start_time"] == "TIMESTAMP WITH TIME ZONE" and types["cost"] == "DOUBLE"
    assert types["price.effective_price"] == "DECIMAL(38,9)"
    assert "sku.description" in s.columns and dict(s.fields)["sku.description"] == '"sku"."description"'


def test_the_copy_has_the_types_sniff_reported(tmp_path):
    """Columns and types come from the Avro header; the Parquet copy the store reads must agree."""
    con = duckdb.connect()
    s = sniff(GCP_AVRO, con)
    copy = avro.to_parquet(GCP_AVRO, tmp_path)
    top = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{copy}')").fetchall()
    assert [(n, t) for n, t, *_ in top] == [(n, t) for n, t in s.types if "." not in n]
    assert con.execute(f"SELECT count(*) FROM read_parquet('{copy}')").fetchone()[0] == len(AVRO_ROWS)


def test_the_copy_goes_to_the_store_private_folder():
    store, _ = load(GCP_AVRO)
    copies = list(Path(store._spill.name).glob("*.parquet"))
    assert len(copies) == 1 and copies[0].name.startswith("gcp-detailed-export.avro-"), copies
    assert not list(GCP_AVRO.parent.glob("*.parquet"))  # nothing beside the export


# ---- form, not name ---------------------------------------------------------------------------------------

def test_detected_by_magic_bytes_not_by_name(tmp_path):
    renamed = tmp_path / "billing.csv"
    renamed.write_bytes(GCP_AVRO.read_bytes())
    store, source = load(renamed)
    assert sniff(renamed, store.con).container == "avro"
    assert q10(source.stats["billed_cost"]) == q10(CSV_TOTAL)
    named_avro = tmp_path / "export.avro"
    named_avro.write_bytes(GCP_CSV.read_bytes())
    assert sniff(named_avro, duckdb.connect()).container == "csv"


def test_a_folder_of_avro_parts(tmp_path):
    """A BigQuery export of a large table is many Avro files (`billing-000000000000.avro`, ...)."""
    rows = read_avro(GCP_AVRO)
    write_avro(tmp_path / "billing-000000000000.avro", rows[:10])
    write_avro(tmp_path / "billing-000000000001.avro", rows[10:])
    store = Store()
    sources = store.load_billing([tmp_path])
    assert [Path(s.path).name for s in sources] == ["billing-000000000000.avro", "billing-000000000001.avro"]
    assert sum(s.rows for s in sources) == 19
    billed = sum((s.stats["billed_cost"]["USD"] for s in sources), D(0))
    assert q10({"USD": billed}) == q10(CSV_TOTAL)


@pytest.mark.heavy
@pytest.mark.parametrize("codec", ["null", "deflate", "snappy"])
def test_bigquery_compression_codecs(tmp_path, codec):
    """BigQuery writes Avro uncompressed, with DEFLATE or with SNAPPY."""
    path = write_avro(tmp_path / f"export-{codec}.avro", read_avro(GCP_AVRO), codec)
    store, source = load(path)
    assert source.rows == 19 and q10(source.stats["billed_cost"]) == q10(CSV_TOTAL)


@pytest.mark.slow
def test_a_large_file_is_written_in_batches(tmp_path, monkeypatch):
    """Records go to Parquet a batch at a time, never the whole file in Python: 2,500 records are three row
    groups of at most avro.BATCH records (here 1,000: the same batches at a tenth of the size, 10 s less), and
    reconcile exactly."""
    monkeypatch.setattr(avro, "BATCH", 1_000)
    rows = read_avro(GCP_AVRO)
    n = 2_500
    path = write_avro(tmp_path / "large.avro", (rows[i % len(rows)] for i in range(n)))
    copy = avro.to_parquet(path, tmp_path)
    meta = pq.ParquetFile(copy).metadata
    assert meta.num_rows == n and meta.num_row_groups == -(-n // avro.BATCH) == 3
    store, source = load(path)
    expected = sum((avro_net(rows[i % len(rows)]) for i in range(n)), D(0))
    assert source.rows == n
    assert q10(source.stats["billed_cost"]) == q10({"USD": expected})


# ---- bad input --------------------------------------------------------------------------------------------

def one_error_line(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-auditor: error: "), result.stderr
    return lines[0]


def test_truncated_avro_is_one_line_and_leaves_no_copy(tmp_path):
    data = write_avro(tmp_path / "whole.avro", read_avro(GCP_AVRO) * 50, "deflate").read_bytes()
    cut = tmp_path / "cut.avro"
    cut.write_bytes(data[: len(data) * 2 // 3])
    error = one_error_line(["inspect", str(cut)])
    assert error.startswith(f"gpu-auditor: error: {cut}: cannot read the Avro file (cut short or damaged?)"), error
    store = Store()
    with pytest.raises(InputError) as err:
        store.load_billing([cut])
    assert "cut short or damaged" in str(err.value) and "\n" not in str(err.value)
    assert not list(Path(store._spill.name).glob("*.parquet")), "a half-written copy was left"
    assert store.con.execute("SELECT count(*) FROM costs").fetchone()[0] == 0


def test_damaged_avro_block_is_one_line(tmp_path):
    data = bytearray(write_avro(tmp_path / "whole.avro", read_avro(GCP_AVRO), "deflate").read_bytes())
    data[-40:-20] = b"\xff" * 20  # inside the deflated block
    bad = tmp_path / "bad-block.avro"
    bad.write_bytes(bytes(data))
    error = one_error_line(["inspect", str(bad)])
    assert f"{bad}: cannot read the Avro file (cut short or damaged?)" in error, error


def test_avro_cut_inside_its_header_is_one_line(tmp_path):
    cut = tmp_path / "header.avro"
    cut.write_bytes(GCP_AVRO.read_bytes()[:60])
    error = one_error_line(["inspect", str(cut)])
    assert f"{cut}: cannot read the Avro file's header (cut short or damaged?)" in error, error


def test_avro_that_is_no_billing_export(tmp_path):
    path = tmp_path / "other.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}, [{"a": 1}])
    error = one_error_line(["inspect", str(path)])
    assert f"{path}: not a billing export" in error, error


def test_avro_with_no_records(tmp_path):
    path = write_avro(tmp_path / "empty.avro", [])
    error = one_error_line(["inspect", str(path)])
    assert f"{path}: the file has a header but no billing lines" in error, error


def test_without_fastavro_the_error_says_what_to_install(tmp_path):
    """As installed without the avro extra: fastavro cannot be imported (a None in sys.modules does that)."""
    code = ("import sys; sys.modules['fastavro'] = None; from auditor.cli import main; "
            f"sys.argv = ['gpu-auditor', 'inspect', {str(GCP_AVRO)!r}]; main()")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines == [f"gpu-auditor: error: {GCP_AVRO}: reading an Avro export needs fastavro, which is not "
                     "installed: pip install 'gpu-auditor[avro]'"], run.stderr


def test_a_codec_fastavro_cannot_decode_here_says_what_to_install(tmp_path):
    """The fixture relabelled with a codec BigQuery does not write and whose library the avro extra does not
    bring (lz4, or zstandard before Python 3.14): the error names the codec and the library, not a damaged file."""
    from fastavro._read_common import HEADER_SCHEMA
    from fastavro.read import BLOCK_READERS

    missing = [c for c in ("lz4", "zstandard") if BLOCK_READERS[c].__qualname__.startswith("missing_codec_lib")]
    assert missing, "lz4 and zstandard can both be read here: this test needs a codec whose library is missing"
    data = GCP_AVRO.read_bytes()
    f = io.BytesIO(data)
    header = fastavro.schemaless_reader(f, HEADER_SCHEMA)
    header["meta"]["avro.codec"] = missing[0].encode()
    out = io.BytesIO()
    fastavro.schemaless_writer(out, HEADER_SCHEMA, header)
    path = tmp_path / "relabelled.avro"
    path.write_bytes(out.getvalue() + data[f.tell():])
    error = one_error_line(["inspect", str(path)])
    assert error.startswith(f"gpu-auditor: error: {path}: the Avro file is {missing[0]}-compressed, which fastavro "
                            "reads only with "), error
    assert error.endswith(": pip install 'fastavro[codecs]'") and "damaged" not in error, error


def test_avro_schema_mapping_of_other_types(tmp_path):
    """Types BigQuery can export besides the billing table's: maps, enums, dates, fixed, long decimals."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "x", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 76, "scale": 38}},
        {"name": "again", "type": ["null", "E"]},
    ]}
    buf = io.BytesIO()
    import datetime

    fastavro.writer(buf, fastavro.parse_schema(schema), [
        {"m": {"k": 1}, "e": "B", "d": datetime.date(2023, 9, 12), "x": b"ab", "big": D("1.5"), "again": None}])
    path = tmp_path / "types.avro"
    path.write_bytes(buf.getvalue())
    copy = avro.to_parquet(path, tmp_path)
    row = duckdb.connect().execute(f"SELECT m, e, d, x, again FROM read_parquet('{copy}')").fetchone()
    assert row == ({"k": 1}, "B", datetime.date(2023, 9, 12), b"ab", None)
    assert str(pq.read_schema(copy).field("big").type) == "decimal256(76, 38)"
    union = {"type": "record", "name": "u", "fields": [{"name": "v", "type": ["null", "string", "long"]}]}
    with pytest.raises(InputError, match="holds values of several types"):
        avro.arrow_schema(fastavro.parse_schema(union), path)


@pytest.mark.parametrize("schema, message", [
    ({"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "record", "name": "A", "fields": [
        {"name": "b", "type": {"type": "array", "items": ["null", "string", "long"]}}]}}]},
     "the Avro field a.b[] holds values of several types, which gpu-auditor does not read"),
    ({"type": "record", "name": "r", "fields": [{"name": "m", "type": {"type": "map", "values": ["int", "string"]}}]},
     "the Avro field m{} holds values of several types, which gpu-auditor does not read"),
    ({"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]},
     "the Avro record Node contains itself, which Parquet cannot hold"),
    ({"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "record", "name": "A", "fields": [
        {"name": "x", "type": "Missing"}]}}]},
     "the Avro schema names a type it never defines ('Missing', at a.x)"),
    ("long", "the Avro file holds single values, not records; it is no billing export"),
    ({"type": "array", "items": "long"}, "the Avro file holds single values, not records; it is no billing export"),
])
def test_each_schema_refusal_whole_with_the_file(tmp_path, schema, message):
    """Each schema the Parquet copy cannot hold, refused in one line naming the file and, for a field, its path
    (`a.b` a record's field, `[]` an array's items, `{}` a map's values)."""
    path = tmp_path / "schema.avro"
    with pytest.raises(InputError) as err:
        avro.arrow_schema(schema, path)
    assert str(err.value) == f"{path}: {message}"


def test_files_of_single_values_or_a_record_that_contains_itself_are_refused_whole(tmp_path):
    single, nested = tmp_path / "single.avro", tmp_path / "nested.avro"
    with open(single, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema("long"), [1, 2])
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with open(nested, "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(node), [{"next": {"next": None}}])
    for path, message in [(single, "the Avro file holds single values, not records; it is no billing export"),
                          (nested, "the Avro record Node contains itself, which Parquet cannot hold")]:
        with pytest.raises(InputError) as err:
            avro.to_parquet(path, tmp_path)
        assert str(err.value) == f"{path}: {message}"
        assert not list(tmp_path.glob("*.parquet")), "no copy is begun for a schema that is refused"


def cut_in_second_block(tmp_path: Path, records: list[dict]) -> Path:
    """An Avro file of `records`, three in a first block and the rest in a second, cut half way into the second."""
    whole = tmp_path / "whole.avro"
    with open(whole, "wb") as f:
        writer = fastavro.write.Writer(f, fastavro.parse_schema(make_avro.schema()), codec="null")
        for r in records[:3]:
            writer.write(r)
        writer.flush()
        first = f.tell()
        for r in records[3:]:
            writer.write(r)
        writer.flush()
        end = f.tell()
    cut = tmp_path / "cut.avro"
    cut.write_bytes(whole.read_bytes()[:(first + end) // 2])
    return cut


def test_a_file_cut_in_its_second_block_names_the_records_read_before(tmp_path):
    """Three records in a first block, two in a second cut short: the error says reading stopped after record 3,
    in one line naming the file, and no half-written copy is left."""
    records = read_avro(GCP_AVRO)[:5]
    cut = cut_in_second_block(tmp_path, records)
    with pytest.raises(InputError) as err:
        avro.to_parquet(cut, tmp_path)
    text = str(err.value)
    assert text.startswith(f"{cut}: cannot read the Avro file (cut short or damaged?) after record 3: "), text
    assert "\n" not in text
    assert not list(tmp_path.glob("*.parquet")), "a half-written copy was left"


def test_records_go_to_parquet_a_batch_at_a_time(tmp_path, monkeypatch):
    """With batches of 2, five records are row groups of 2, 2 and 1, holding the records in order; a file cut in
    its second block (three records read) names record 3 whatever the batches."""
    monkeypatch.setattr(avro, "BATCH", 2)
    records = read_avro(GCP_AVRO)[:5]
    path = write_avro(tmp_path / "five.avro", records)
    copy = pq.ParquetFile(avro.to_parquet(path, tmp_path))
    assert [copy.metadata.row_group(i).num_rows for i in range(copy.metadata.num_row_groups)] == [2, 2, 1]
    assert copy.read().column("cost").to_pylist() == [r["cost"] for r in records]
    cut = cut_in_second_block(tmp_path, records)
    with pytest.raises(InputError, match=r"\(cut short or damaged\?\) after record 3: "):
        avro.to_parquet(cut, tmp_path)


def test_the_reason_of_an_error_is_its_type_and_first_line(monkeypatch, tmp_path):
    """An error's reason: its type and its message's first line, runs of white space as one space, at most 200
    characters; its type alone where it says nothing. Without fastavro, the copy's refusal names the file."""
    assert avro._reason(ValueError("  bad  block\tat 12\n  then more")) == "ValueError: bad block at 12"
    assert avro._reason(EOFError()) == "EOFError"
    assert avro._reason(EOFError("  \n ")) == "EOFError"
    assert avro._reason(ValueError("x" * 300)) == "ValueError: " + "x" * 188
    monkeypatch.setitem(sys.modules, "fastavro", None)
    with pytest.raises(InputError) as err:
        avro.to_parquet(GCP_AVRO, tmp_path)
    assert (err.value.path, str(err.value)) == (str(GCP_AVRO), f"{GCP_AVRO}: reading an Avro export needs fastavro, "
                                                "which is not installed: pip install 'gpu-auditor[avro]'")


def test_a_copy_that_cannot_be_written_is_no_fault_of_the_file(monkeypatch, tmp_path):
    """A full disk (an OSError writing the copy) is said as such, naming the file and the folder, by the system's
    words for it where it has them; the copy begun is removed."""
    for error, said in ((OSError(28, "No space left on device"), "No space left on device"),
                        (OSError("the volume went away"), "the volume went away")):
        def fail(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(pq, "ParquetWriter", fail)
        with pytest.raises(InputError) as err:
            avro.to_parquet(GCP_AVRO, tmp_path)
        assert (err.value.path, str(err.value)) == (
            str(GCP_AVRO), f"{GCP_AVRO}: cannot write the Parquet copy of the Avro file to {tmp_path}: {said}")
        assert not list(tmp_path.glob("*.parquet")), "a half-written copy was left"


def test_what_stops_the_first_block_is_said_as_fastavro_says_it(monkeypatch, tmp_path):
    """An error before any record is read names no record; a codec whose library is missing names each library
    fastavro offers for it (its message: "<codec> codec is supported but you need to install one of the following
    libraries: ('a', 'b')"), joined by "or"."""
    real = fastavro.reader

    class Stops:
        said = ""

        def __init__(self, f):
            self.writer_schema = real(f).writer_schema

        def __iter__(self):
            raise ValueError(self.said)

    monkeypatch.setattr(fastavro, "reader", Stops)
    for said, message in (
            ("bad  block\nthen", "cannot read the Avro file (cut short or damaged?): ValueError: bad block"),
            ("snappy codec is supported but you need to install one of the following libraries: ('python-snappy', "
             "'cramjam')", "the Avro file is snappy-compressed, which fastavro reads only with python-snappy or "
             "cramjam: pip install 'fastavro[codecs]'")):
        Stops.said = said
        with pytest.raises(InputError) as err:
            avro.to_parquet(GCP_AVRO, tmp_path)
        assert str(err.value) == f"{GCP_AVRO}: {message}"


def test_each_simple_avro_type_and_a_union_of_null_alone(monkeypatch, tmp_path):
    """Avro's simple types as Arrow holds them; a union of null alone is null; a type never defined in a union is
    named at its field; without fastavro the schema's refusal names the file."""
    simple = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
    schema = {"type": "record", "name": "r", "fields": [{"name": t, "type": t} for t in simple]
              + [{"name": "only_null", "type": ["null"]}]}
    got = avro.arrow_schema(schema, tmp_path / "s.avro")
    assert {f.name: str(f.type) for f in got} == {
        "null": "null", "boolean": "bool", "int": "int32", "long": "int64", "float": "float", "double": "double",
        "bytes": "binary", "string": "string", "only_null": "null"}
    path = tmp_path / "u.avro"
    union = {"type": "record", "name": "r", "fields": [{"name": "Xa", "type": ["null", "Missing"]}]}
    with pytest.raises(InputError) as err:
        avro.arrow_schema(union, path)
    assert str(err.value) == f"{path}: the Avro schema names a type it never defines ('Missing', at Xa)"
    monkeypatch.setitem(sys.modules, "fastavro", None)
    with pytest.raises(InputError) as err:
        avro.arrow_schema(schema, path)
    assert err.value.path == str(path) and "reading an Avro export needs fastavro" in str(err.value)


def test_decimals_of_bytes_or_fixed(tmp_path):
    """A decimal is bytes or fixed with a precision and a scale (0 where none is written): decimal128 up to 38
    digits, decimal256 from 39; the same logical type on another type is that type."""
    def dec(kind, precision, **more):
        base = {"type": kind, "logicalType": "decimal", "precision": precision, **more}
        return {**base, "name": f"F{precision}", "size": 32} if kind == "fixed" else base

    schema = {"type": "record", "name": "r", "fields": [
        {"name": "fixed20", "type": dec("fixed", 20, scale=4)}, {"name": "bytes38", "type": dec("bytes", 38)},
        {"name": "bytes39", "type": dec("bytes", 39, scale=9)},
        {"name": "string", "type": {"type": "string", "logicalType": "decimal", "precision": 5}},
        {"name": "long", "type": {"type": "long"}},
        {"name": "millis", "type": {"type": "string", "logicalType": "timestamp-millis"}}]}
    got = avro.arrow_schema(schema, tmp_path / "d.avro")
    assert {f.name: str(f.type) for f in got} == {"fixed20": "decimal128(20, 4)", "bytes38": "decimal128(38, 0)",
                                                  "bytes39": "decimal256(39, 9)", "string": "string", "long": "int64",
                                                  "millis": "string"}
    path = tmp_path / "n.avro"
    with pytest.raises(InputError) as err:  # a type written as {"type": name} is that name, at its field
        avro.arrow_schema({"type": "record", "name": "r", "fields": [{"name": "b", "type": {"type": "Nope"}}]}, path)
    assert str(err.value) == f"{path}: the Avro schema names a type it never defines ('Nope', at b)"


def test_named_records_and_fixed_are_reused_by_name(tmp_path):
    """A record or fixed type defined once is the same Arrow type wherever its name is used again."""
    schema = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": {"type": "record", "name": "A", "fields": [{"name": "v", "type": "long"}]}},
        {"name": "b", "type": ["null", "A"]},
        {"name": "x", "type": {"type": "fixed", "name": "F", "size": 2}}, {"name": "y", "type": "F"}]}
    got = {f.name: str(f.type) for f in avro.arrow_schema(schema, tmp_path / "n.avro")}
    assert got == {"a": "struct<v: int64>", "b": "struct<v: int64>", "x": "fixed_size_binary[2]",
                   "y": "fixed_size_binary[2]"}


def test_a_header_that_cannot_be_read_and_describe_without_fastavro(monkeypatch, tmp_path):
    """What stops the header is said with its type and first line; describing a file without fastavro names it."""
    def stops(f):
        raise ValueError("bad magic\nmore")

    monkeypatch.setattr(fastavro, "reader", stops)
    with pytest.raises(InputError) as err:
        avro.describe(GCP_AVRO, duckdb.connect())
    assert str(err.value) == (f"{GCP_AVRO}: cannot read the Avro file's header (cut short or damaged?): "
                              "ValueError: bad magic")
    monkeypatch.setitem(sys.modules, "fastavro", None)
    with pytest.raises(InputError) as err:
        avro.describe(GCP_AVRO, duckdb.connect())
    assert (err.value.path, str(err.value)) == (str(GCP_AVRO), f"{GCP_AVRO}: reading an Avro export needs fastavro, "
                                                "which is not installed: pip install 'gpu-auditor[avro]'")

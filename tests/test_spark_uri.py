"""`--engine spark` reading billing by URI (s3a://, gs://, abfss://, hdfs://, file://) through Spark's own Hadoop
file systems: listed, told apart and sniffed on the driver without reading a file through, then read by Spark.
These tests use file:// URIs: Hadoop's local file system goes through the very FileSystem API that S3A and the
Cloud Storage connector implement (their jars are not on this machine). The summaries equal DuckDB's reading the
same files by local path, to the cent.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_spark import DEMO, FIXTURES, summaries

from auditor.cli import cli
from auditor.core import run_audit
from auditor.errors import InputError
from auditor.policy import load_policy
from auditor.providers.billing.detect import sniff
from auditor.tables import spark as engine
from auditor.tables import spark_files
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    """A folder of exports in four containers: the fixtures' CUR CSV and GCP newline JSON, and the benchmark
    generator's CUR as Parquet (July) and as gzip CSV (August, in a subfolder), plus a file read by no one."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from generate import generate

    gen = tmp_path_factory.mktemp("gen")
    generate(600, gen, ("cur-parquet", "cur-csv-gz"))
    out = tmp_path_factory.mktemp("exports")
    (out / "august").mkdir()
    shutil.copy(FIXTURES / "cur-gpu-spot.csv", out)
    shutil.copy(FIXTURES / "gcp" / "gcp-detailed-export.jsonl", out)
    shutil.copy(gen / "cur-parquet" / "cur-2026-07.parquet", out)
    shutil.copy(gen / "cur-csv-gz" / "cur-2026-08.csv.gz", out / "august")
    (out / "README.md").write_text("not billing\n")
    return out


def read_both(local: list[Path], uris: list[str], spark) -> tuple[Store, Store]:
    duck = Store()
    duck.load_billing(local)
    on_spark = Store()
    engine.load_billing(on_spark, uris, spark=spark)
    return duck, on_spark


def test_folder_uri_in_four_containers_equals_duckdb_by_local_path(exports, spark):
    duck, on_spark = read_both([exports], [exports.as_uri()], spark)
    expected = summaries(duck)
    assert summaries(on_spark) == expected
    got = [(s.path, s.format, s.rows) for s in on_spark.sources]
    assert got == [(f"file:{s.path}", s.format, s.rows) for s in duck.sources]
    assert [Path(p).name for p, _, _ in got] == ["cur-2026-08.csv.gz", "cur-2026-07.parquet", "cur-gpu-spot.csv",
                                                "gcp-detailed-export.jsonl"]  # in detect.expand's order
    assert {s.format for s in on_spark.sources} == {"aws-cur", "gcp-billing"}
    assert expected["stats"]["billed_cost"] and expected["flows"], "spend and transfer to compare"
    # A file given by its URI is read whatever its name, as a local file is; a folder's URI may end in a slash.
    odd = exports.parent / "cur-export.dat"
    shutil.copy(FIXTURES / "cur-gpu-spot.csv", odd)
    duck, one = read_both([odd, exports / "august"], [odd.as_uri(), (exports / "august").as_uri() + "/"], spark)
    assert [s.rows for s in one.sources] == [s.rows for s in duck.sources] == [10, 200]
    assert summaries(one) == summaries(duck)


def test_each_file_is_sniffed_as_duckdb_sniffs_it_locally(exports, spark):
    store = Store()
    for local in sorted(p for p in exports.rglob("*") if p.suffix in (".csv", ".jsonl", ".parquet", ".gz")):
        [(fs, status)] = spark_files._list(spark, local.as_uri(), [])
        remote = spark_files._sniff_uri(spark, fs, status.getPath(), local.as_uri(), store)
        here = sniff(local, store.con)
        for field in ("container", "compression", "columns", "format", "has_bom", "fields", "types"):
            assert getattr(remote, field) == getattr(here, field), (local.name, field)
    assert not list(Path(store._spill.name).glob("sniff-*")), "the local samples are removed"


def test_newline_json_is_sniffed_from_the_lines_duckdb_samples(tmp_path, spark):
    """DuckDB infers a newline JSON file's columns from its first 20,480 lines: a key first seen on line 20,000
    is a column, one first seen on line 22,000 is not, read locally or by URI."""
    line = {"cost": 0.25, "currency": "USD", "usage_start_time": "2026-07-01 00:00:00 UTC",
            "usage_end_time": "2026-07-01 01:00:00 UTC", "sku": {"description": "N1 Predefined Instance Core"}}
    path = tmp_path / "gcp.jsonl"
    with path.open("w") as f:
        for i in range(1, 25_001):
            extra = {"inside": 1} if i == 20_000 else {"outside": 1} if i == 22_000 else {}
            f.write(json.dumps(line | extra) + "\n")
    store = Store()
    [(fs, status)] = spark_files._list(spark, path.as_uri(), [])
    remote = spark_files._sniff_uri(spark, fs, status.getPath(), path.as_uri(), store)
    here = sniff(path, store.con)
    assert remote.types == here.types and remote.format == here.format == "gcp-billing"
    assert "inside" in remote.columns and "outside" not in remote.columns


def test_same_file_listed_twice_is_read_once_with_a_warning(exports, tmp_path, spark):
    # The folder and a file in it, and a copy of that file elsewhere with its name, size and modification time.
    copy = tmp_path / "again" / "cur-gpu-spot.csv"
    copy.parent.mkdir()
    shutil.copy2(exports / "cur-gpu-spot.csv", copy)
    uris = [exports.as_uri(), (exports / "cur-gpu-spot.csv").as_uri(), copy.as_uri()]
    duck, on_spark = read_both([exports], uris, spark)
    assert summaries(on_spark) == summaries(duck), "each file counted once"
    dups = [s for s in on_spark.sources if s.format == "duplicate"]
    assert [(Path(s.path).parent.name, s.duplicate_of) for s in dups] == [
        (exports.name, f"file:{exports / 'cur-gpu-spot.csv'}"), ("again", f"file:{exports / 'cur-gpu-spot.csv'}")]
    assert len([w for w in on_spark.warnings if "same name, size and modification time as" in w]) == 2
    # A copy with another modification time is another file (no checksum on the local file system).
    copy.touch()
    other = Store()
    engine.load_billing(other, [(exports / "cur-gpu-spot.csv").as_uri(), copy.as_uri()], spark=spark)
    assert [s.format for s in other.sources] == ["aws-cur", "aws-cur"] and not other.warnings


def test_cur_manifest_under_a_uri_picks_its_assembly(tmp_path, spark):
    """A re-delivered month: two assemblies, the manifest lists the later; as detect.expand reads a folder."""
    month = tmp_path / "cur" / "20260901-20261001"
    for assembly in ("aaa", "bbb"):
        (month / assembly).mkdir(parents=True)
    shutil.copy(FIXTURES / "cur-gpu-spot.csv", month / "aaa" / "report-1.csv")
    text = (FIXTURES / "cur-gpu-spot.csv").read_text()
    (month / "bbb" / "report-1.csv").write_text(text + text.splitlines()[-1] + "\n")  # a line more
    (month / "report-Manifest.json").write_text(json.dumps(
        {"reportKeys": ["cur/report/20260901-20261001/bbb/report-1.csv"]}))
    duck, on_spark = read_both([tmp_path / "cur"], [(tmp_path / "cur").as_uri()], spark)
    assert [Path(s.path).parent.name for s in on_spark.sources] == ["bbb"]
    assert [s.rows for s in on_spark.sources] == [s.rows for s in duck.sources] == [11]
    assert summaries(on_spark) == summaries(duck)
    assert any("not in the folder's CUR manifest" in w and "/aaa/report-1.csv" in w for w in on_spark.warnings)


def test_bad_uris_are_one_input_error_each(exports, tmp_path, spark):
    gz_as_csv = tmp_path / "gz-named.csv"
    gz_as_csv.write_bytes(gzip.compress((FIXTURES / "cur-gpu-spot.csv").read_bytes()))
    not_billing = tmp_path / "people.csv"
    not_billing.write_text("name,age\nada,36\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt.bak").write_text("x")
    cases = {
        "s3a://bucket/cur/": "no file system for s3a://",
        "s3://bucket/cur/": "outside EMR, S3 is s3a://",
        (tmp_path / "missing").as_uri(): "no such file or folder",
        empty.as_uri(): "folder holds no billing files",
        (FIXTURES / "gcp" / "gcp-detailed-export.avro").as_uri(): "Avro exports are not read from a URI yet",
        gz_as_csv.as_uri(): "gzip-compressed but its name does not end in .gz",
        not_billing.as_uri(): "not a billing export",
    }
    for uri, message in cases.items():
        with pytest.raises(InputError) as e:
            engine.load_billing(Store(), [uri], spark=spark)
        assert message in str(e.value), (uri, str(e.value))
        assert "\n" not in str(e.value)
        # The error names the URI (as Hadoop spells it), never the driver's local sample.
        assert e.value.path.removeprefix("file:").removeprefix("//") in uri, (uri, e.value.path)
    with pytest.raises(InputError, match="hadoop-aws for s3a://"):
        engine.load_billing(Store(), ["s3a://bucket/cur/"], spark=spark)


def test_a_uri_without_spark_is_one_error_line(tmp_path):
    args = ["audit", "--policy", str(DEMO / "policy.yml"), "--out", str(tmp_path / "out"), "-q"]
    for uri in ("s3a://finops-cur/cur/2026/", "gs://billing-export/2026/", "file:///tmp/billing"):
        result = CliRunner().invoke(cli, [*args, uri])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert lines == [f"gpu-auditor: error: {uri}: a URI is read directly only by `gpu-auditor audit --engine "
                         "spark` (on a cluster with that file system's connector); or mount the bucket and give its "
                         "local path"], result.stderr
    assert not (tmp_path / "out").exists()
    # The library refuses it too, and `inspect` (which has no Spark engine) with the same words.
    with pytest.raises(InputError, match="--engine spark"):
        run_audit(load_policy(DEMO / "policy.yml"), ["s3a://finops-cur/cur/"])
    result = CliRunner().invoke(cli, ["inspect", "gs://billing-export/2026/"])
    assert result.exit_code == 2 and "or mount the bucket" in result.stderr


def test_audit_of_a_uri_through_the_cli_on_spark(spark, tmp_path):
    args = ["audit", "--policy", str(DEMO / "policy.yml"), "--inventory", str(DEMO / "inventory.json"),
            "--quarter", "2026-Q3", "--as-of", "2026-10-01", "-q"]
    runner = CliRunner()
    duck = runner.invoke(cli, [*args, "--out", str(tmp_path / "duckdb"), str(DEMO / "billing")])
    on_spark = runner.invoke(cli, [*args, "--out", str(tmp_path / "spark"), "--engine", "spark",
                                     "file://" + str(DEMO / "billing")])
    assert duck.exit_code == 0, duck.output
    assert on_spark.exit_code == 0, on_spark.output
    a, b = (json.loads((tmp_path / d / "audit.json").read_text()) for d in ("duckdb", "spark"))
    for key in ("billed_cost", "effective_cost", "gpu_cost", "spot_cost", "by_category", "by_provider", "by_team",
                "transfer_gb_out", "gpu_hours", "monthly_savings"):
        assert b["summary"][key] == a["summary"][key], key
    assert [(s["path"], s["rows"]) for s in b["inputs"]["billing"]] == \
        [(f"file:{s['path']}", s["rows"]) for s in a["inputs"]["billing"]]
    assert all(len(s["sha256"]) == 64 for s in b["inputs"]["billing"])
    fingerprints = lambda doc: sorted((f["rule"], f["resource"], f.get("cost")) for f in doc["findings"])  # noqa: E731
    assert fingerprints(b) == fingerprints(a) and a["findings"]

"""A billing file that has a format's own columns but lacks one its reader cannot do without (the billed cost,
the start time, the currency) is named for what it looks like and the column it lacks, in one line with exit
code 2 and nothing written; a file that looks like no format keeps the message that lists the formats read.

Each near miss is a known-good fixture of this repository with the column taken out, in tmp_path: the AWS CUR
(fixtures/billing/cur-gpu-spot.csv, also in the Athena snake_case spelling as Parquet), FOCUS (the demo's Azure
FOCUS export, CSV and Parquet), GCP (fixtures/billing/gcp, CSV, JSON, Parquet and Avro) and Azure (EA and MCA
cost details).
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import InputError
from auditor.providers.billing.detect import detect_format, near_miss
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
CUR = REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"
FOCUS = REPO / "fixtures" / "demo" / "billing" / "focus-azure-2026-q3.csv"
GCP = REPO / "fixtures" / "billing" / "gcp"
AZURE = REPO / "fixtures" / "billing" / "azure"
AZURE_COSTS = "CostInBillingCurrency, Cost, PreTaxCost or costInUsd"


def read_rows(path: Path, limit: int = 25) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return [row for _, row in zip(range(limit + 1), csv.reader(f), strict=False)]


def csv_without(src: Path, out: Path, *drop: str, rename=lambda c: c) -> Path:
    """The first lines of a fixture with the named columns taken out (and the rest renamed)."""
    rows = read_rows(src)
    keep = [i for i, c in enumerate(rows[0]) if c not in drop]
    assert len(keep) == len(rows[0]) - len(drop), f"{src.name} lacks one of {drop}"
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([rename(rows[0][i]) for i in keep])
        w.writerows([[r[i] for i in keep] for r in rows[1:]])
    return out


def parquet_of(src: Path, out: Path) -> Path:
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * FROM read_csv('{src}', all_varchar = true)) TO '{out}' (FORMAT parquet)")
    con.close()
    return out


def snake(column: str) -> str:
    return "_".join(re.sub(r"(?<!^)(?=[A-Z])", "_", p).lower() for p in re.split(r"[/:]", column))


def gcp_json_without(out: Path, *drop: str) -> Path:
    with open(GCP / "gcp-detailed-export.jsonl", encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            doc = json.loads(line)
            for key in drop:
                doc.pop(key, None)
            o.write(json.dumps(doc) + "\n")
    return out


def gcp_avro_without(out: Path, *drop: str) -> Path:
    """The Avro fixture's generator with the columns left out of its schema and its lines."""
    import fastavro

    spec = importlib.util.spec_from_file_location("make_avro", GCP / "make_avro.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.COLUMNS = [c for c in gen.COLUMNS if c[0] not in drop]
    source = gcp_json_without(out.with_suffix(".jsonl"), *drop)
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(gen.schema()), gen.records(source))
    out.write_bytes(buf.getvalue())
    return out


# name, how the file is made (in tmp_path), the text the error must hold
CASES = [
    ("cur-no-unblended.csv", lambda d: csv_without(CUR, d / "cur-no-unblended.csv", "lineItem/UnblendedCost"),
     "looks like an AWS CUR but has no lineItem/UnblendedCost column (the billed cost)"),
    ("cur-no-start.csv", lambda d: csv_without(CUR, d / "cur-no-start.csv", "lineItem/UsageStartDate"),
     "looks like an AWS CUR but has no lineItem/UsageStartDate column (the start time)"),
    ("cur-no-cost-no-start.csv", lambda d: csv_without(CUR, d / "cur-no-cost-no-start.csv", "lineItem/UnblendedCost",
                                                       "lineItem/UsageStartDate"),
     "has no lineItem/UnblendedCost column (the billed cost) and no lineItem/UsageStartDate column (the start "
     "time); gpu-auditor reads such an export only with those columns"),
    # Athena and CUR 2.0 spell it in snake_case, and the error names the column as the file would
    ("cur-snake-no-unblended.parquet", lambda d: parquet_of(
        csv_without(CUR, d / "snake.csv", "lineItem/UnblendedCost", rename=snake),
        d / "cur-snake-no-unblended.parquet"),
     "looks like an AWS CUR but has no line_item_unblended_cost column (the billed cost)"),
    ("focus-no-billed.csv", lambda d: csv_without(FOCUS, d / "focus-no-billed.csv", "BilledCost"),
     "looks like a FOCUS export but has no BilledCost column (the billed cost)"),
    ("focus-no-start.parquet", lambda d: parquet_of(
        csv_without(FOCUS, d / "focus.csv", "ChargePeriodStart"), d / "focus-no-start.parquet"),
     "looks like a FOCUS export but has no ChargePeriodStart column (the start time)"),
    ("focus-no-currency.csv", lambda d: csv_without(FOCUS, d / "focus-no-currency.csv", "BillingCurrency"),
     "looks like a FOCUS export but has no BillingCurrency column (the currency)"),
    ("gcp-no-cost.csv", lambda d: csv_without(GCP / "gcp-detailed-export.csv", d / "gcp-no-cost.csv", "cost"),
     "looks like a GCP BigQuery billing export but has no cost column (the billed cost)"),
    ("gcp-no-start.jsonl", lambda d: gcp_json_without(d / "gcp-no-start.jsonl", "usage_start_time"),
     "looks like a GCP BigQuery billing export but has no usage_start_time column (the start time)"),
    ("gcp-no-currency.parquet", lambda d: parquet_of(
        csv_without(GCP / "gcp-detailed-export.csv", d / "gcp.csv", "currency"), d / "gcp-no-currency.parquet"),
     "looks like a GCP BigQuery billing export but has no currency column (the currency)"),
    ("gcp-no-cost.avro", lambda d: gcp_avro_without(d / "gcp-no-cost.avro", "cost"),
     "looks like a GCP BigQuery billing export but has no cost column (the billed cost)"),
    ("azure-ea-no-cost.csv", lambda d: csv_without(AZURE / "ea-cost-details.csv", d / "azure-ea-no-cost.csv",
                                                   "CostInBillingCurrency"),
     f"looks like an Azure cost details export but has no {AZURE_COSTS} column (the billed cost)"),
    ("azure-mca-no-date.csv", lambda d: csv_without(AZURE / "mca-cost-details.csv", d / "azure-mca-no-date.csv",
                                                    "date", "servicePeriodStartDate"),
     "looks like an Azure cost details export but has no Date, UsageDateTime or servicePeriodStartDate column "
     "(the start time)"),
]


def one_error(result) -> str:
    assert "Traceback" not in result.output, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu-auditor: error: "), result.stderr
    return lines[0]


@pytest.mark.heavy
@pytest.mark.parametrize(("name", "make", "words"), CASES, ids=[c[0] for c in CASES])
def test_inspect_names_the_missing_column(tmp_path, name, make, words):
    path = make(tmp_path)
    assert path.name == name
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 2, result.output
    error = one_error(result)
    # a CSV's header is its line 1; Parquet, JSON and Avro have no header line to name
    where = f"{path}:1: " if name.endswith(".csv") else f"{path}: "
    assert error.startswith(f"gpu-auditor: error: {where}looks like "), error
    assert words in error, error
    assert "not a billing export" not in error, error


@pytest.mark.parametrize(("name", "make", "words"), [CASES[0], CASES[4], CASES[7], CASES[11]],
                         ids=["aws", "focus", "gcp", "azure"])
def test_audit_writes_nothing(tmp_path, name, make, words):
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: Near misses\nowner: finops@example.com\n", encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["audit", "-q", "--policy", str(policy), "--out", str(out),
                                      str(make(tmp_path))])
    assert result.exit_code == 2, result.output
    assert words in one_error(result)
    assert not out.exists(), "a failed audit created its output folder"


def test_the_store_holds_nothing_of_a_near_miss(tmp_path):
    store = Store()
    with pytest.raises(InputError) as err:
        store.load_billing([CASES[0][1](tmp_path)])
    assert err.value.line == 1 and err.value.path.endswith("cur-no-unblended.csv")
    assert store.con.execute("SELECT count(*) FROM costs").fetchone()[0] == 0
    assert store.sources == []


@pytest.mark.heavy
@pytest.mark.parametrize("src", [CUR, FOCUS, GCP / "gcp-detailed-export.csv", AZURE / "ea-cost-details.csv",
                                 AZURE / "mca-cost-details.csv"], ids=lambda p: p.name)
def test_the_fixtures_the_near_misses_come_from_are_read(src):
    """Each near miss is one of these less the named column: whole, the header is a known format."""
    header = read_rows(src, 0)[0]
    assert detect_format(header) is not None
    assert near_miss(header) is None  # what is read is never a near miss
    assert Store().load_billing([src])[0].rows > 0


@pytest.mark.parametrize("header", [
    ["a", "b", "c"],
    ["date", "cost", "description"],  # a date and a cost are no export by themselves
    ["lineItem/UnblendedCost"],  # one column of a CUR: too little to tell
    ["cost", "currency", "usage_start_time"],  # two GCP columns and a common one
], ids=["letters", "date-cost", "one-cur-column", "two-gcp-columns"])
def test_a_file_like_no_format_keeps_the_unknown_format_message(tmp_path, header):
    path = tmp_path / "other.csv"
    path.write_text(",".join(header) + "\n" + ",".join("1" for _ in header) + "\n", encoding="utf-8")
    assert near_miss(header) is None
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 2, result.output
    error = one_error(result)
    assert error.startswith(f"gpu-auditor: error: {path}:1: not a billing export"), error
    # the versions the README's table names (FOCUS 1.0, 1.1, 1.2, 1.3), read from it, not from the code
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    newest = re.search(r"\| FOCUS 1\.0, [0-9., ]*?(1\.\d) \(", readme).group(1)
    assert (f"it reads AWS Cost and Usage Reports (CUR 1 and 2.0), FOCUS 1.0 to {newest}, GCP BigQuery billing "
            "exports and Azure cost details") in error
    assert "looks like" not in error


def test_the_family_with_the_most_columns_is_named():
    """A FOCUS export from Azure carries a few Azure-like columns; it is still named a FOCUS export."""
    header = [c for c in read_rows(FOCUS, 0)[0] if c != "BilledCost"] + ["MeterCategory", "ResourceLocation"]
    assert near_miss(header).startswith("looks like a FOCUS export but has no BilledCost column")


@pytest.mark.parametrize("name, data, where, message", [
    ("empty.csv", b"", "", "the file is empty"),
    ("blank.csv", b"\n \r\n\t\n", "", "the file is empty"),
    ("utf16.csv", "BilledCost,ChargePeriodStart\n".encode("utf-16"), ":1", "the file is UTF-16; save it as UTF-8"),
    ("nul.csv", b"BilledCost,ChargePeriodStart\n1\x00,2\n", "", "the file is binary, not CSV text"),
    ("latin1.csv", "Co\u00fbt,Date\n1,2\n".encode("latin-1"), ":1",
     "the header is not UTF-8 text; save the file as UTF-8"),
])
def test_a_file_that_is_no_csv_text_is_refused_whole(tmp_path, name, data, where, message):
    """What the header cannot be read as, in one line naming the file (and its first line where the header is
    there but not UTF-8 text)."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError) as err:
        Store().load_billing([path])
    assert str(err.value) == f"{path}{where}: {message}"


def test_a_folder_without_billing_files_and_a_manifest_that_is_no_json_are_refused_whole(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("nothing billed here\n")
    with pytest.raises(InputError) as err:
        Store().load_billing([empty])
    assert str(err.value) == f"{empty}: folder holds no billing files (.csv, .csv.gz, .parquet, .json, .avro)"
    cur = tmp_path / "cur"
    cur.mkdir()
    (cur / "cur.csv").write_bytes(CUR.read_bytes())
    manifest = cur / "gpu-cur-Manifest.json"
    manifest.write_text("{")
    with pytest.raises(InputError) as err:
        Store().load_billing([cur])
    assert str(err.value) == (f"{manifest}: cannot read the CUR manifest: Expecting property name enclosed in double "
                              "quotes: line 1 column 2 (char 1)")

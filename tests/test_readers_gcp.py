"""The GCP reader (Cloud Billing export to BigQuery, as exported files) against a real public export and
hand-written fixtures, reconciled to the cent with an independent sum.

Net cost is `cost` plus the sum of `credits.amount` (credits are negative); the reader bills the net. The
independent sums here use Python's csv and json modules and Decimal only: in CSV the repeated `credits` record
is a Python-repr list, read with `ast.literal_eval`.

* gcp_bigquery/koku__gcp__2022-08-01_5.csv in the public samples (the `samples` fixture) is a byte-for-byte copy of
  koku/masu/test/data/gcp/2022-08-01_5.csv from project-koku/koku @ f15f76480bafc28edac23d99af34d60d3d110453,
  Apache-2.0 (see SOURCES.md there): a detailed (resource-level) export of 9 internet-egress lines.
* fixtures/billing/gcp/gcp-detailed-export.csv and .jsonl are hand-written for these tests from the column lists
  in ../shared/reference/billing-schemas.md section 4: the same 19 lines as CSV (dotted columns, Python-repr
  repeated records, as koku saves them) and as newline-delimited JSON (nested records and real arrays, nulls
  left out and times in `... UTC`, as BigQuery exports them). The Parquet form is written from the JSON here.
"""

from __future__ import annotations

import ast
import csv
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from auditor.errors import InputError
from auditor.providers.billing.detect import detect_format
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "billing" / "gcp"
GCP_CSV = FIXTURES / "gcp-detailed-export.csv"
GCP_JSON = FIXTURES / "gcp-detailed-export.jsonl"

D = Decimal
TEN = D("1e-10")


# ---- independent reading ----------------------------------------------------------------------------------

def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def csv_credits(row: dict[str, str]) -> list[dict]:
    """The Python-repr `credits` list of a CSV line, e.g. "[{'name': ..., 'amount': -5e-06, ...}]"."""
    return ast.literal_eval(row["credits"] or "[]")


def csv_net(row: dict[str, str]) -> Decimal:
    # repr() of the parsed float is the text the export wrote, so Decimal(repr(x)) is exact
    return D(row["cost"]) + sum((D(repr(c["amount"])) for c in csv_credits(row)), D(0))


def read_json(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]


def json_net(row: dict) -> Decimal:
    return D(row["cost"]) + sum((D(c["amount"]) for c in row.get("credits", [])), D(0))


def totals(rows, net, currency) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for r in rows:
        out[currency(r)] = out.get(currency(r), D(0)) + net(r)
    return out


def q10(amounts: dict[str, Decimal]) -> dict[str, Decimal]:
    return {k: D(v).quantize(TEN) for k, v in amounts.items()}


def to_parquet(src: Path, out: Path) -> Path:
    """The JSON export as Parquet with nested STRUCTs and LISTs, as DuckDB writes it."""
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * FROM read_ndjson('{src}')) TO '{out}' (FORMAT parquet)")
    con.close()
    return out


def load(path: Path) -> tuple[Store, object]:
    store = Store()  # one store per file: two copies of one export in a store are counted once
    return store, store.load_file(path)


CSV_ROWS = read_csv(GCP_CSV)
JSON_ROWS = read_json(GCP_JSON)


@pytest.fixture(scope="module")
def koku_path(samples) -> Path:
    return samples / "gcp_bigquery" / "koku__gcp__2022-08-01_5.csv"


@pytest.fixture(scope="module")
def koku_rows(koku_path) -> list[dict[str, str]]:
    return read_csv(koku_path)


@pytest.fixture(scope="module")
def koku(koku_path):
    return load(koku_path)


@pytest.fixture(scope="module")
def gcp_csv():
    return load(GCP_CSV)


@pytest.fixture(scope="module")
def gcp_json():
    return load(GCP_JSON)


@pytest.fixture(scope="module")
def gcp_parquet(tmp_path_factory):
    return load(to_parquet(GCP_JSON, tmp_path_factory.mktemp("gcp") / "gcp-detailed-export.parquet"))


# ---- the real sample --------------------------------------------------------------------------------------

def test_koku_sample_is_where_sources_md_says(koku_path, koku_rows):
    assert (koku_path.parents[1] / "SOURCES.md").is_file()
    assert len(koku_rows) == 9
    with open(koku_path, encoding="utf-8") as f:
        assert detect_format(next(csv.reader(f))) == "gcp-billing"


def test_koku_sample_reconciles_to_the_cent(koku, koku_rows):
    _, source = koku
    expected = totals(koku_rows, csv_net, lambda r: r["currency"])
    assert expected == {"USD": D("0.000012")}  # two China lines, 2e-06 + 1e-05; the other seven cost 0.0
    assert source.format == "gcp-billing"
    assert source.rows == source.stats["rows"] == len(koku_rows) == 9
    assert q10(source.stats["billed_cost"]) == q10(expected)
    assert q10(source.stats["effective_cost"]) == q10(expected)


def test_koku_sample_line_by_line(koku, koku_rows):
    store, _ = koku
    got = store.lines().execute(
        "SELECT x_SourceRow, BilledCost, EffectiveCost, ChargePeriodStart, ChargePeriodEnd, ChargeDescription, "
        "ResourceId, RegionId, SubAccountId, BillingAccountId, ChargeCategory, PricingCategory, x_CostCategory, "
        "x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo, ConsumedQuantity, ConsumedUnit, Tags "
        "FROM lines ORDER BY 1").fetchall()
    assert [g[0] for g in got] == list(range(2, 11))
    for g, r in zip(got, koku_rows, strict=True):
        line = g[0]
        assert g[1] == g[2] == csv_net(r), line  # exact, not only to the cent
        assert g[3].strftime("%Y-%m-%d %H:%M:%S+00:00") == r["usage_start_time"], line
        assert g[4].strftime("%Y-%m-%d %H:%M:%S+00:00") == r["usage_end_time"], line
        assert g[5] == r["sku.description"], line
        assert g[6:10] == ("//example", "us-central1", "cloud-billing-292519", "018984-D0AAA4-940B88"), line
        assert g[10:13] == ("Usage", "Standard", "transfer"), line
        dst = r["sku.description"].rsplit(" to ", 1)[1]
        assert g[13:17] == ("internet", "out", "Americas", dst), line
        assert g[17] == D(r["usage.amount_in_pricing_units"]) and g[18] == "gibibyte", line
        assert g[19] == {}, line
    assert {r["sku.description"].rsplit(" to ", 1)[1] for r in koku_rows} == {"APAC", "EMEA", "China"}


# ---- the fixtures: CSV, JSON and Parquet ------------------------------------------------------------------

# sku.description -> (x_CostCategory, x_GpuModel, x_GpuCount, x_InstanceType, PricingCategory, ChargeCategory,
#                     x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo)
NO_TRANSFER = (None, None, None, None)
EXPECTED = {
    "Nvidia Tesla A100 GPU running in Americas":
        ("gpu_compute", "A100", 1, None, "Committed", "Usage", *NO_TRANSFER),
    # core and RAM lines of GPU machines bill no GPU-hours (the GPU has its own SKU line): count 0
    "A2 Instance Core running in Americas":
        ("gpu_compute", "A100", 0, "a2-highgpu-1g", "Committed", "Usage", *NO_TRANSFER),
    "A2 Instance Ram running in Americas":
        ("gpu_compute", "A100", 0, "a2-highgpu-1g", "Committed", "Usage", *NO_TRANSFER),
    "Spot Preemptible Nvidia L4 GPU running in Americas":
        ("gpu_compute", "L4", 1, None, "Dynamic", "Usage", *NO_TRANSFER),
    "Spot Preemptible G2 Instance Core running in Americas":
        ("gpu_compute", "L4", 0, "g2-standard-4", "Dynamic", "Usage", *NO_TRANSFER),
    # sustained-use and promotional credits are no commitment
    "N2 Instance Core running in Americas":
        ("other_compute", None, 0, "n2-standard-8", "Standard", "Usage", *NO_TRANSFER),
    "Nvidia A100 80GB GPU running in EMEA":
        ("gpu_compute", "A100-80GB", 1, None, "Standard", "Usage", *NO_TRANSFER),
    "Network Inter Region Data Transfer Out from Americas to EMEA":
        ("transfer", None, None, None, "Standard", "Usage", "inter_region", "out", "Americas", "EMEA"),
    "Network Inter Region Egress from Iowa to Netherlands":
        ("transfer", None, None, None, "Standard", "Usage", "inter_region", "out", "Iowa", "Netherlands"),
    "Network Inter Region Ingress from EMEA to Americas":
        ("transfer", None, None, None, "Standard", "Usage", "inter_region", "in", "EMEA", "Americas"),
    "Network Internet Egress from Americas to APAC":
        ("transfer", None, None, None, "Standard", "Usage", "internet", "out", "Americas", "APAC"),
    "Storage PD Capacity": ("storage", None, None, None, "Standard", "Usage", *NO_TRANSFER),
    "SSD backed PD Capacity": ("storage", None, None, None, "Standard", "Usage", *NO_TRANSFER),
    "Standard Storage US Multi-region": ("storage", None, None, None, "Standard", "Usage", *NO_TRANSFER),
    # Cloud Storage egress names no ends: it leaves from the bucket's location
    "Download Worldwide Destinations (excluding Asia & Australia)":
        ("transfer", None, None, None, "Standard", "Usage", "internet", "out", "us", None),
    "Analysis": ("other", None, None, None, "Standard", "Usage", *NO_TRANSFER),
    "Commitment v1: A2 Cpu in Americas for 1 Year":
        ("other", None, None, None, "Committed", "Purchase", *NO_TRANSFER),
    "Nvidia Tesla T4 GPU running in Americas":
        ("gpu_compute", "T4", 1, None, "Standard", "Usage", *NO_TRANSFER),
    "Tax": ("tax", None, None, None, None, "Tax", *NO_TRANSFER),  # tax is its own category, whatever the cloud
}
CLASSES = ("x_CostCategory, x_GpuModel, x_GpuCount, x_InstanceType, PricingCategory, ChargeCategory, "
           "x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo")
LINE = (f"SELECT x_SourceRow - {{d}} AS n, ChargeDescription, BilledCost, EffectiveCost, ListCost, {CLASSES}, "
        "Tags, ChargePeriodStart, ChargePeriodEnd, RegionId, AvailabilityZone, ResourceId, SubAccountId, "
        "BillingAccountId, SkuId, ServiceName, ConsumedQuantity, ConsumedUnit, BillingCurrency FROM lines ORDER BY 1")
CSV_TOTAL = {"USD": D("14.408182")}


def test_fixtures_describe_the_same_lines():
    assert 10 <= len(CSV_ROWS) == len(JSON_ROWS) <= 30
    for i, (c, j) in enumerate(zip(CSV_ROWS, JSON_ROWS, strict=True)):
        assert c["sku.description"] == j["sku"]["description"], i
        assert D(c["cost"]) == j["cost"] and csv_net(c) == json_net(j), i
        assert c["usage_start_time"].replace("+00:00", " UTC") == j["usage_start_time"], i
        assert ast.literal_eval(c["labels"]) == j["labels"], i
        assert [(x["type"], D(repr(x["amount"]))) for x in csv_credits(c)] == \
            [(x["type"], x["amount"]) for x in j.get("credits", [])], i
    assert sorted(r["sku.description"] for r in CSV_ROWS) == sorted(EXPECTED)
    assert {c["type"] for r in CSV_ROWS for c in csv_credits(r)} == {
        "COMMITTED_USAGE_DISCOUNT", "SUSTAINED_USAGE_DISCOUNT", "PROMOTION"}


def test_fixture_csv_reconciles_to_the_cent(gcp_csv):
    _, source = gcp_csv
    expected = totals(CSV_ROWS, csv_net, lambda r: r["currency"])
    assert expected == CSV_TOTAL
    gross = sum(D(r["cost"]) for r in CSV_ROWS)
    assert gross - CSV_TOTAL["USD"] == D("1.540981")  # the credits really are taken off
    assert source.format == "gcp-billing" and source.rows == len(CSV_ROWS) == 19
    assert q10(source.stats["billed_cost"]) == q10(expected)
    assert q10(source.stats["effective_cost"]) == q10(expected)
    listed = sum(D(r["cost_at_list"] or r["cost"]) for r in CSV_ROWS)
    assert q10(source.stats["list_cost"]) == q10({"USD": listed})


def test_fixture_json_reconciles_to_the_cent(gcp_json):
    _, source = gcp_json
    expected = totals(JSON_ROWS, json_net, lambda r: r["currency"])
    assert expected == CSV_TOTAL
    assert source.format == "gcp-billing" and source.rows == len(JSON_ROWS)
    assert q10(source.stats["billed_cost"]) == q10(expected)
    assert q10(source.stats["effective_cost"]) == q10(expected)


def test_fixture_parquet_is_nested_and_reconciles(gcp_parquet):
    store, source = gcp_parquet
    path = Path(source.path)
    assert path.read_bytes()[:4] == b"PAR1"
    types = {r[0]: r[1] for r in duckdb.connect().execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()}
    assert types["sku"].startswith("STRUCT(") and types["credits"].startswith("STRUCT(")
    assert types["credits"].endswith("[]") and types["labels"].endswith("[]")
    assert source.format == "gcp-billing" and source.rows == len(JSON_ROWS)
    assert q10(source.stats["billed_cost"]) == q10(CSV_TOTAL)
    assert store.lines().execute("SELECT min(x_SourceRow), max(x_SourceRow) FROM lines").fetchone() == (1, 19)


def test_fixture_csv_line_by_line(gcp_csv):
    store, _ = gcp_csv
    got = store.lines().execute(LINE.format(d=1)).fetchall()
    assert [g[0] for g in got] == list(range(1, len(CSV_ROWS) + 1))
    for g, r in zip(got, CSV_ROWS, strict=True):
        sku = r["sku.description"]
        assert g[1] == sku
        # exact on every line: amounts go to DECIMAL from their text, never through a DOUBLE
        assert g[2] == g[3] == csv_net(r), sku
        assert g[4] == D(r["cost_at_list"]), sku
        assert g[5:15] == EXPECTED[sku], sku


@pytest.mark.heavy
@pytest.mark.parametrize("form", ["json", "parquet"])
def test_json_and_parquet_read_exactly_as_the_csv(form, gcp_csv, gcp_json, gcp_parquet):
    """Same costs (exactly), same classification, tags, times, ids and quantities on every line."""
    csv_store, _ = gcp_csv
    store, _ = gcp_json if form == "json" else gcp_parquet
    assert store.lines().execute(LINE.format(d=0)).fetchall() == csv_store.lines().execute(LINE.format(d=1)).fetchall()
    for key in ("billed_cost", "effective_cost", "list_cost", "gpu_cost", "spot_cost", "by_category", "gpu_hours",
                "transfer_gb_out"):
        assert store.sources[0].stats[key] == csv_store.sources[0].stats[key], key


def test_fixture_labels_become_tags(gcp_csv):
    store, _ = gcp_csv
    got = dict(store.lines().execute("SELECT ChargeDescription, Tags FROM lines").fetchall())
    for r in CSV_ROWS:
        labels = {e["key"]: e["value"] for e in ast.literal_eval(r["labels"])}
        assert got[r["sku.description"]] == labels, r["sku.description"]
    assert got["Nvidia Tesla A100 GPU running in Americas"] == {"team": "nlp", "owner": "alice"}
    assert got["N2 Instance Core running in Americas"] == {"team": "data"}  # no owner label
    assert got["Nvidia Tesla T4 GPU running in Americas"] == {"goog-k8s-cluster-name": "inference-gke"}
    # project labels and system labels are not resource tags
    assert store.lines().execute("SELECT count(*) FROM lines WHERE Tags['cost-center'] IS NOT NULL "
                             "OR Tags['compute.googleapis.com/machine_spec'] IS NOT NULL").fetchone()[0] == 0


def test_fixture_details(gcp_csv):
    store, source = gcp_csv
    a100 = store.lines().execute(
        "SELECT ResourceId, RegionId, AvailabilityZone, SubAccountId, BillingAccountId, SkuId, ServiceName, "
        "ConsumedQuantity, ConsumedUnit, ChargePeriodStart, ChargePeriodEnd, x_Provider, ProviderName "
        "FROM lines WHERE ChargeDescription = 'Nvidia Tesla A100 GPU running in Americas'").fetchone()
    assert a100[:7] == ("//compute.googleapis.com/projects/ml-training-prod/zones/us-central1-a/instances/"
                        "5532176094820193847", "us-central1", "us-central1-a", "ml-training-prod",
                        "01A2B3-C4D5E6-F7A8B9", "039F-D0DA-4055", "Compute Engine")
    assert a100[7:9] == (D(1), "hour")
    assert (a100[9].isoformat(), a100[10].isoformat()) == ("2023-09-12T10:00:00", "2023-09-12T11:00:00")
    assert a100[11:] == ("gcp", "Google Cloud")
    # the inter-region line: 50 GiB, counted as GB for the transfer totals
    st = source.stats
    assert D(st["transfer_gb_out"]["inter_region"]) == ((50 + 20) * D("1.073741824")).quantize(D("0.001"))
    assert D(st["transfer_gb_out"]["internet"]) == ((10 + 4) * D("1.073741824")).quantize(D("0.001"))
    tax = store.lines().execute("SELECT ChargeCategory, PricingCategory, BilledCost, RegionId FROM lines "
                            "WHERE ChargeDescription = 'Tax'").fetchone()
    assert tax == ("Tax", None, D("1.47"), None)


def _net(sku_test) -> Decimal:
    return sum((csv_net(r) for r in CSV_ROWS if sku_test(r["sku.description"])), D(0))


def test_fixture_gpu_spot_and_category_totals(gcp_csv):
    _, source = gcp_csv
    st = source.stats
    gpu = _net(lambda s: EXPECTED[s][0] == "gpu_compute")
    assert gpu == D("1.848362") + D("0.238979") + D("0.226891") + D("0.224") + D("0.03412") + D("4.4") + D("0.35")
    assert q10(st["gpu_cost"]) == q10({"USD": gpu})
    spot = _net(lambda s: s.startswith("Spot Preemptible "))
    assert q10(st["spot_cost"]) == q10({"USD": spot}) == q10(st["gpu_spot_cost"]) == q10({"USD": D("0.25812")})
    for category in ("gpu_compute", "other_compute", "transfer", "storage", "other"):
        assert q10(st["by_category"][category]) == q10({"USD": _net(lambda s, c=category: EXPECTED[s][0] == c)})
    # GPU-hours: one hour on each of the four GPU SKU lines; the A2 and G2 core lines (12 and 4 vCPU-hours)
    # are not GPU-hours
    assert D(st["gpu_hours"]) == D(4)


def test_committed_use_discount_marks_the_lines_it_covers(gcp_csv):
    store, _ = gcp_csv
    covered = sorted(r["sku.description"] for r in CSV_ROWS
                     if any(c["type"] == "COMMITTED_USAGE_DISCOUNT" for c in csv_credits(r)))
    assert len(covered) == 3
    got = [r[0] for r in store.lines().execute("SELECT ChargeDescription FROM lines "
                                               "WHERE PricingCategory = 'Committed' AND ChargeCategory = 'Usage' "
                                               "ORDER BY 1").fetchall()]
    assert got == covered


# ---- nested exports where DuckDB cannot see the element type -------------------------------------------------

def _rewrite_json(tmp_path: Path, name: str, change) -> Path:
    path = tmp_path / name
    with open(path, "w", encoding="utf-8") as f:
        for row in read_json(GCP_JSON):
            change(row)
            f.write(json.dumps(row, default=str) + "\n")
    return path


def _no_repeated(row: dict) -> None:
    row["credits"], row["labels"], row["system_labels"] = [], [], []


@pytest.mark.heavy
@pytest.mark.parametrize("form", ["json", "parquet"])
def test_export_without_any_credit_or_label(form, tmp_path):
    """A day with no credits and no labels anywhere: every list is empty, DuckDB types them JSON[] (or NULL[]
    in Parquet) rather than STRUCT[], and the reader must not need the element's fields."""
    path = _rewrite_json(tmp_path, "bare.jsonl", _no_repeated)
    if form == "parquet":
        path = to_parquet(path, tmp_path / "bare.parquet")
    store, source = load(path)
    gross = {"USD": sum(D(r["cost"]) for r in JSON_ROWS)}
    assert source.rows == len(JSON_ROWS)
    assert q10(source.stats["billed_cost"]) == q10(gross)
    assert store.lines().execute("SELECT count(*) FROM lines WHERE cardinality(Tags) > 0").fetchone()[0] == 0
    # without system labels, the A2 core line still bills an A100 machine, by its SKU
    assert store.lines().execute("SELECT x_CostCategory, x_GpuModel FROM lines WHERE ChargeDescription = "
                             "'A2 Instance Core running in Americas'").fetchone() == ("gpu_compute", "A100")


def test_credits_as_json_text_in_csv(tmp_path):
    """Some tools save the repeated records of a CSV as JSON text rather than Python repr."""
    rows = [dict(r) for r in CSV_ROWS]
    for r in rows:
        r["credits"] = json.dumps(csv_credits(r))
        r["labels"] = json.dumps(ast.literal_eval(r["labels"]))
    path = tmp_path / "json-text.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(CSV_ROWS[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    store, source = load(path)
    assert q10(source.stats["billed_cost"]) == q10(CSV_TOTAL)
    assert store.lines().execute("SELECT Tags, PricingCategory FROM lines WHERE x_SourceRow = 2").fetchone() == (
        {"team": "nlp", "owner": "alice"}, "Committed")


# ---- bad input ----------------------------------------------------------------------------------------------

def _load_error(path: Path) -> InputError:
    with pytest.raises(InputError) as err:  # a duckdb.Error or anything else fails the test
        Store().load_billing([path])
    return err.value


def test_csv_with_a_non_numeric_cost_names_file_line_and_column(tmp_path):
    rows = [dict(r) for r in CSV_ROWS]
    rows[4]["cost"] = "12,50"  # data line 5 is line 6 of the file
    path = tmp_path / "gcp-bad-cost.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(CSV_ROWS[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    e = _load_error(path)
    assert (e.path, e.line, e.column) == (str(path), 6, "cost")
    assert "'12,50'" in str(e) and "gcp-bad-cost.csv:6: " in str(e) and "\n" not in str(e)


def test_json_with_a_non_numeric_cost_names_file_line_and_column(tmp_path):
    rows = read_json(GCP_JSON)
    rows[2]["cost"] = "n/a"
    path = tmp_path / "gcp-bad-cost.jsonl"
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")
    e = _load_error(path)
    assert (e.path, e.line, e.column) == (str(path), 3, "cost")  # JSON lines are numbered from 1
    assert "'n/a'" in str(e)


def test_a_label_given_twice_is_said_in_words(tmp_path):
    """Which of two `team` labels is the team's? DuckDB's map said "Map keys must be unique". (Its line is not
    named yet: the labels are no column a reader checks.)"""
    rows = read_json(GCP_JSON)
    rows[2]["labels"] = [{"key": "team", "value": "nlp"}, {"key": "team", "value": "cv"}]
    path = tmp_path / "gcp-label-twice.jsonl"
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows), encoding="utf-8")
    assert str(_load_error(path)) == (f"{path}: cannot read the file: a line's tags or labels name one key twice; "
                                      "which value is meant cannot be told")


def test_csv_with_a_bad_usage_start_time_names_it(tmp_path):
    text = GCP_CSV.read_text(encoding="utf-8").splitlines(keepends=True)
    text[3] = text[3].replace("2023-09-12 10:00:00+00:00", "12/09/2023 10h", 1)
    path = tmp_path / "gcp-bad-time.csv"
    path.write_text("".join(text), encoding="utf-8")
    e = _load_error(path)
    assert (e.line, e.column) == (4, "usage_start_time")



def test_csv_with_a_bad_usage_end_time_names_it(tmp_path):
    path = tmp_path / "gcp-bad-end.csv"
    rows = [_line("Nvidia L4 GPU running in Americas"),
            _line("Nvidia L4 GPU running in Americas", usage_end_time="12/09/2023 11h")]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    e = _load_error(path)
    assert (e.path, e.line, e.column) == (str(path), 3, "usage_end_time")

# ---- each column of a line, one line for each way the reader reads it ----------------------------------------

HEADER = ["billing_account_id", "service.description", "sku.id", "sku.description", "usage_start_time",
          "usage_end_time", "project.id", "labels", "system_labels", "location.location", "location.region",
          "location.zone", "resource.name", "resource.global_name", "cost", "currency", "usage.amount",
          "usage.unit", "usage.amount_in_pricing_units", "usage.pricing_unit", "credits", "cost_type",
          "cost_at_list"]


def _line(sku: str, **over) -> dict[str, str]:
    """One CSV line of an hour of `sku` in us-central1 billing $1.00, with `over` (dots as __) changed."""
    row = {"billing_account_id": "01A2B3-C4D5E6-F7A8B9", "service.description": "Compute Engine",
           "sku.id": "0000-0000-0000", "sku.description": sku, "usage_start_time": "2023-09-12 10:00:00+00:00",
           "usage_end_time": "2023-09-12 11:00:00+00:00", "project.id": "ml-prod", "labels": "[]",
           "system_labels": "[]", "location.location": "us-central1", "location.region": "us-central1",
           "location.zone": "us-central1-a", "resource.name": "", "resource.global_name": "", "cost": "1.00",
           "currency": "USD", "usage.amount": "3600.0", "usage.unit": "seconds",
           "usage.amount_in_pricing_units": "1.0", "usage.pricing_unit": "hour", "credits": "[]",
           "cost_type": "regular", "cost_at_list": "1.00"}
    row.update({k.replace("__", "."): v for k, v in over.items()})
    return row


def _lines(tmp_path: Path, rows: list[dict[str, str]], columns: str) -> list[tuple]:
    path = tmp_path / "gcp-lines.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    store, source = load(path)
    assert source.format == "gcp-billing"
    return store.lines().execute(f"SELECT {columns} FROM lines ORDER BY x_SourceRow").fetchall()


def test_every_gpu_sku_and_machine_family_names_its_gpu(tmp_path):
    """GCP names a GPU SKU `[Spot Preemptible |Preemptible ]Nvidia <GPU> GPU running in <region>`; the core and
    RAM of A2, A3 and G2 machines bill their built-in A100, H100 and L4 with no GPU-hours of their own."""
    expected = [  # description, GPU model, GPUs per unit, pricing category, cost category
        ("Nvidia Tesla T4 GPU running in Americas", "T4", 1, "Standard", "gpu_compute"),
        ("Nvidia T4 GPU running in Americas", "T4", 1, "Standard", "gpu_compute"),
        ("Nvidia Tesla V100 GPU running in Americas", "V100", 1, "Standard", "gpu_compute"),
        ("Nvidia Tesla A100 GPU running in Americas", "A100", 1, "Standard", "gpu_compute"),
        ("Nvidia A100 GPU running in Americas", "A100", 1, "Standard", "gpu_compute"),
        ("Nvidia Tesla A100 80GB GPU running in Americas", "A100-80GB", 1, "Standard", "gpu_compute"),
        ("Nvidia A100 80GB GPU running in Americas", "A100-80GB", 1, "Standard", "gpu_compute"),
        ("Nvidia H100 80GB GPU running in Americas", "H100", 1, "Standard", "gpu_compute"),
        ("Nvidia H100 GPU running in Americas", "H100", 1, "Standard", "gpu_compute"),
        ("Nvidia H100 80GB Mega GPU running in Americas", "H100", 1, "Standard", "gpu_compute"),
        ("Nvidia H200 GPU running in Americas", "H200", 1, "Standard", "gpu_compute"),
        ("Nvidia L4 GPU running in Americas", "L4", 1, "Standard", "gpu_compute"),
        ("Nvidia Tesla P100 GPU running in EMEA", "P100", 1, "Standard", "gpu_compute"),
        ("Nvidia Tesla P4 GPU running in EMEA", "P4", 1, "Standard", "gpu_compute"),
        ("Spot Preemptible Nvidia L4 GPU running in Americas", "L4", 1, "Dynamic", "gpu_compute"),
        ("Preemptible Nvidia Tesla T4 GPU running in APAC", "T4", 1, "Dynamic", "gpu_compute"),
        ("A2 Instance Core running in Americas", "A100", 0, "Standard", "gpu_compute"),
        ("A3 Instance Ram running in Americas", "H100", 0, "Standard", "gpu_compute"),
        ("Spot Preemptible G2 Instance Core running in APAC", "L4", 0, "Dynamic", "gpu_compute"),
        ("N2 Instance Core running in Americas", None, None, "Standard", "other_compute"),
    ]
    got = _lines(tmp_path, [_line(e[0]) for e in expected],
                 "ChargeDescription, x_GpuModel, x_GpuCount, PricingCategory, x_CostCategory")
    assert got == expected


def test_cost_types_charge_and_pricing_categories(tmp_path):
    """cost_type regular, tax, adjustment and rounding_error are FOCUS's Usage, Tax and Adjustment (any other is
    usage); a commitment's fee is a purchase at the committed rate; a tax has no pricing category."""
    rows = [_line("N2 Instance Core running in Americas"),
            _line("Tax", cost_type="tax", service__description="Invoice"),
            _line("N2 Instance Core running in Americas", cost_type="adjustment"),
            _line("Rounding", cost_type="rounding_error"),
            _line("N2 Instance Core running in Americas", cost_type="something new"),
            _line("Commitment v1: A2 GPU in Americas for 1 Year")]
    assert _lines(tmp_path, rows, "ChargeCategory, PricingCategory") == [
        ("Usage", "Standard"), ("Tax", None), ("Adjustment", "Standard"), ("Adjustment", "Standard"),
        ("Usage", "Standard"), ("Purchase", "Committed")]


def test_credits_are_netted_and_commitment_credits_mark_the_line(tmp_path):
    """Net cost is cost plus every credit's amount, exactly (5e-06 is $0.000005); a committed use discount of
    either kind (resource- or spend-based) makes the line committed, other credits do not."""
    def credits(*pairs):
        return repr([{"name": t.lower(), "amount": a, "type": t} for t, a in pairs])

    rows = [_line("Nvidia L4 GPU running in Americas", cost="2.00",
                  credits=credits(("SUSTAINED_USAGE_DISCOUNT", -0.5), ("PROMOTION", -0.25))),
            _line("Nvidia L4 GPU running in Americas", cost="0.00001", cost_at_list="0.00001",
                  credits=credits(("FREE_TIER", -5e-06))),
            _line("Nvidia L4 GPU running in Americas", cost="3.00",
                  credits=credits(("COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE", -1.2))),
            _line("Nvidia L4 GPU running in Americas", cost="3.00",
                  credits=credits(("COMMITTED_USAGE_DISCOUNT", -1.5)))]
    got = _lines(tmp_path, rows, "BilledCost, EffectiveCost, ListCost, PricingCategory")
    assert got == [(D("1.25"), D("1.25"), D("1.00"), "Standard"), (D("0.000005"), D("0.000005"), D("0.00001"),
                                                                  "Standard"),
                   (D("1.80"), D("1.80"), D("1.00"), "Committed"), (D("1.50"), D("1.50"), D("1.00"), "Committed")]


def test_transfer_skus_kind_direction_and_regions(tmp_path):
    """Network SKUs name their kind and, where they do, the regions (`... from <src> to <dst>`); a SKU that names
    no source is from the line's region; Ingress is inbound."""
    skus = ["Network Inter Region Data Transfer Out from Americas to EMEA",
            "Network Internet Egress from Americas to APAC",
            "Network Inter Region Ingress from EMEA to Americas",
            "Network Internet Data Transfer Out from Americas to China",
            "Network Inter Zone Data Transfer Out",
            "Network Intra Zone Data Transfer Out",
            "Download Worldwide Destinations (excluding Asia & Australia)",
            "Network Inter Region Data Transfer Out"]  # no `from`: no inter-region kind of GCP's naming
    got = _lines(tmp_path, [_line(s, service__description="Networking") for s in skus],
                 "x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo, x_CostCategory")
    assert got == [("inter_region", "out", "Americas", "EMEA", "transfer"),
                   ("internet", "out", "Americas", "APAC", "transfer"),
                   ("inter_region", "in", "EMEA", "Americas", "transfer"),
                   ("internet", "out", "Americas", "China", "transfer"),
                   ("inter_zone", "out", "us-central1", None, "transfer"),
                   ("intra_region", "out", "us-central1", None, "transfer"),
                   ("internet", "out", "us-central1", None, "transfer"),
                   (None, None, None, None, "other")]


def test_kinds_of_non_gpu_lines(tmp_path):
    """Cores and RAM (and a machine named by its system label) are compute; storage, PD capacity and snapshots
    are storage; anything else is other."""
    machine = repr([{"key": "compute.googleapis.com/machine_spec", "value": "n2-standard-8"}])
    rows = [_line("Custom Core running in Americas"), _line("Custom Ram running in Americas"),
            _line("E2 Instance Core running in Americas"), _line("Licensing Fee for Debian", system_labels=machine),
            _line("Standard Storage US Multi-region"), _line("Balanced PD Capacity in Americas"),
            _line("Multi-Regional Snapshot Early Deletion"), _line("BigQuery Analysis")]
    assert _lines(tmp_path, rows, "x_CostCategory, x_InstanceType") == [
        ("other_compute", None), ("other_compute", None), ("other_compute", None),
        ("other_compute", "n2-standard-8"), ("storage", None), ("storage", None), ("storage", None),
        ("other", None)]


def test_columns_read_from_their_first_spelling_present(tmp_path):
    """ListCost is cost_at_list, else cost; the quantity is in pricing units, else in usage units; the region is
    location.region, else location.location; the resource is its global name, else its name."""
    rows = [_line("N2 Instance Core running in Americas", cost="2.50", cost_at_list="3.25",
                  resource__name="vm-1", resource__global_name="//compute/vm-1"),
            _line("N2 Instance Core running in Americas", cost="2.50", cost_at_list="",
                  usage__amount_in_pricing_units="", location__region="", resource__name="vm-2")]
    assert _lines(tmp_path, rows, "ListCost, ConsumedQuantity, ConsumedUnit, RegionId, ResourceId") == [
        (D("3.25"), D("1.0"), "hour", "us-central1", "//compute/vm-1"),
        (D("2.50"), D("3600.0"), "hour", "us-central1", "vm-2")]


def test_an_unused_reservation_bills_to_the_reservation(tmp_path):
    """A reservation's idle capacity bills its machine's SKUs with the system label is_unused_reservation: the
    line is the reservation's, by its resource or, where it names none, by project, region and machine."""
    unused = repr([{"key": "compute.googleapis.com/is_unused_reservation", "value": "True"},
                   {"key": "compute.googleapis.com/machine_spec", "value": "a2-highgpu-1g"}])
    rows = [_line("A2 Instance Core running in Americas", system_labels=unused),
            _line("A2 Instance Core running in Americas", system_labels=unused, resource__name="res-1"),
            _line("A2 Instance Core running in Americas")]
    assert _lines(tmp_path, rows, "CapacityReservationId, CapacityReservationStatus") == [
        ("gcp-reservation:ml-prod:us-central1:a2-highgpu-1g", "Unused"), ("res-1", "Unused"), (None, None)]


@pytest.mark.heavy
def test_a_label_value_with_quotes_is_read_whole_from_json_and_parquet(tmp_path):
    """Repeated records of JSON and Parquet exports are real lists, read as lists: a label value with an
    apostrophe or a double quote is the value as labelled."""
    def quoted(row):
        row["labels"] = [{"key": "owner", "value": "o'neil"}, {"key": "note", "value": 'say "hi"'}]

    path = _rewrite_json(tmp_path, "quoted.jsonl", quoted)
    for form in (path, to_parquet(path, tmp_path / "quoted.parquet")):
        store, _ = load(form)
        tags = store.lines().execute("SELECT Tags FROM lines").fetchall()
        assert tags == [({"owner": "o'neil", "note": 'say "hi"'},)] * len(JSON_ROWS), form


def test_an_export_of_the_needed_columns_alone(tmp_path):
    """cost, usage_start_time, currency and sku.description are all a GCP export needs: no labels are no tags,
    no credits bill the cost as it is."""
    path = tmp_path / "gcp-bare.csv"
    path.write_text("sku.description,usage_start_time,cost,currency\n"
                    "Nvidia L4 GPU running in Americas,2023-09-12 10:00:00+00:00,0.70,USD\n", encoding="utf-8")
    store, source = load(path)
    assert source.format == "gcp-billing"
    assert store.lines().execute("SELECT BilledCost, EffectiveCost, ListCost, Tags, PricingCategory, x_GpuModel, "
                                 "CapacityReservationId FROM lines").fetchall() == [
        (D("0.70"), D("0.70"), D("0.70"), {}, "Standard", "L4", None)]


def test_labels_of_a_csv_line_in_either_text_form(tmp_path):
    """A CSV export writes the repeated labels record as Python repr (as koku saves it) or as JSON text; both are
    the line's tags, key to value. (Read in the test itself, not through a shared fixture, so that mutation
    testing runs it against the reader: mutmut runs a test against the functions it saw that test call.)"""
    labels = [{"key": "team", "value": "nlp"}, {"key": "owner", "value": "alice"}]
    rows = [_line("N2 Instance Core running in Americas", labels=repr(labels)),
            _line("N2 Instance Core running in Americas", labels=json.dumps(labels))]
    assert _lines(tmp_path, rows, "Tags") == [({"team": "nlp", "owner": "alice"},)] * 2


@pytest.mark.heavy
def test_json_and_parquet_money_is_the_exported_text_exactly(tmp_path):
    """JSON and Parquet exports hold money as a DOUBLE (or a FLOAT); each amount is the text the export wrote
    (0.379332), not the binary float's expansion (0.379331999999999980), on every line and to the last digit."""
    expected = [(json_net(r), D(str(r["cost_at_list"])), D(str(r["usage"]["amount_in_pricing_units"])))
                for r in JSON_ROWS]
    store, _ = load(GCP_JSON)
    got = store.lines().execute("SELECT BilledCost, ListCost, ConsumedQuantity FROM lines ORDER BY x_SourceRow")
    assert got.fetchall() == expected
    floats = tmp_path / "float.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (CAST(cost AS FLOAT) AS cost) FROM read_ndjson('{GCP_JSON}')) "
                   f"TO '{floats}' (FORMAT parquet)")
    store, _ = load(floats)
    assert store.lines().execute("SELECT BilledCost FROM lines ORDER BY x_SourceRow").fetchall() == [
        (json_net(r),) for r in JSON_ROWS]  # a FLOAT's shortest text is the export's too


def test_a_money_column_of_a_type_that_holds_no_amount_is_refused(tmp_path):
    """A Parquet export whose cost_at_list is BOOLEAN: refused by name and type, not read as 'true'."""
    path = tmp_path / "bool.parquet"
    duckdb.execute(f"COPY (SELECT * REPLACE (cost_at_list > 0 AS cost_at_list) FROM read_ndjson('{GCP_JSON}')) "
                   f"TO '{path}' (FORMAT parquet)")
    e = _load_error(path)
    assert (e.path, e.column) == (str(path), "cost_at_list")
    assert str(e).endswith("the column is of type BOOLEAN; gpu-auditor reads it as a number (or text holding one)")


def test_usage_type_unit_and_currency_of_a_line(tmp_path):
    """The usage type is the SKU's description; the unit is the pricing unit, else the usage unit; a line billed
    in euros keeps its currency and its amounts as written."""
    rows = [_line("Nvidia L4 GPU running in Americas", currency="EUR", cost="0.71", cost_at_list="0.83"),
            _line("N2 Instance Core running in Americas", usage__pricing_unit="", usage__amount_in_pricing_units="")]
    assert _lines(tmp_path, rows, "x_UsageType, ConsumedUnit, ConsumedQuantity, BillingCurrency, BilledCost, "
                                  "ListCost") == [
        ("Nvidia L4 GPU running in Americas", "hour", D("1.0"), "EUR", D("0.71"), D("0.83")),
        ("N2 Instance Core running in Americas", "seconds", D("3600.0"), "USD", D("1.00"), D("1.00"))]


def test_usage_window_of_a_line(tmp_path):
    """A line's charge period is its usage_start_time to its usage_end_time, in UTC: half an hour, an hour that
    ends at the next month's first midnight, and a start written at another offset (03:00 at -07:00 is 10:00)."""
    rows = [_line("Nvidia L4 GPU running in Americas", usage_end_time="2023-09-12 10:30:00+00:00"),
            _line("Nvidia L4 GPU running in Americas", usage_start_time="2023-09-30 23:00:00+00:00",
                  usage_end_time="2023-10-01 00:00:00+00:00"),
            _line("Nvidia L4 GPU running in Americas", usage_start_time="2023-09-12 03:00:00-07:00",
                  usage_end_time="2023-09-12 04:00:00-07:00")]
    assert _lines(tmp_path, rows, "ChargePeriodStart, ChargePeriodEnd") == [
        (datetime(2023, 9, 12, 10, 0), datetime(2023, 9, 12, 10, 30)),
        (datetime(2023, 9, 30, 23, 0), datetime(2023, 10, 1, 0, 0)),
        (datetime(2023, 9, 12, 10, 0), datetime(2023, 9, 12, 11, 0))]


def test_columns_of_a_line(tmp_path):
    """Each column a GCP line maps, as its export writes it: the SKU's description and id, the service, the
    billing account, the project as the sub-account, the resource, region and zone, the machine from the system
    label machine_spec, the labels as tags; the provider is Google Cloud; billed and effective cost both net."""
    labels = repr([{"key": "team", "value": "nlp"}, {"key": "env", "value": "prod"}])
    spec = repr([{"key": "compute.googleapis.com/machine_spec", "value": "a2-highgpu-1g"}])
    rows = [_line("A2 Instance Core running in Americas", **{"sku.id": "7A1F-22B0-C3D4"}, service__description=
                  "Compute Engine", billing_account_id="01A2B3-C4D5E6-F7A8B9", project__id="ml-train",
                  resource__name="vm-7", location__zone="us-central1-b", system_labels=spec, labels=labels,
                  cost="3.00", credits=repr([{"name": "s", "amount": -0.75, "type": "SUSTAINED_USAGE_DISCOUNT"}])),
            _line("Storage PD Capacity", service__description="Compute Engine", project__id="", location__zone="")]
    got = _lines(tmp_path, rows, "ChargeDescription, SkuId, ServiceName, BillingAccountId, SubAccountId, "
                                 "ResourceId, RegionId, AvailabilityZone, x_InstanceType, Tags, ProviderName, "
                                 "x_Provider, BilledCost, EffectiveCost")
    assert got == [
        ("A2 Instance Core running in Americas", "7A1F-22B0-C3D4", "Compute Engine", "01A2B3-C4D5E6-F7A8B9",
         "ml-train", "vm-7", "us-central1", "us-central1-b", "a2-highgpu-1g", {"team": "nlp", "env": "prod"},
         "Google Cloud", "gcp", D("2.25"), D("2.25")),
        ("Storage PD Capacity", "0000-0000-0000", "Compute Engine", "01A2B3-C4D5E6-F7A8B9", None, None,
         "us-central1", None, None, {}, "Google Cloud", "gcp", D("1.00"), D("1.00"))]


@pytest.mark.parametrize("amount", ["1_000", "-2_5.5", "'1_000'"])
def test_a_credit_amount_written_with_a_digit_separator_is_refused(tmp_path, amount):
    """`1_000` in a credit was read as its `1` (CSV's repr text) or 1000 (JSON's text); refused as in any amount."""
    path = tmp_path / "gcp.csv"
    credit = f"[{{'name': 'Sustained use discount', 'amount': {amount}, 'type': 'SUSTAINED_USAGE_DISCOUNT'}}]"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, HEADER, lineterminator="\n")
        w.writeheader()
        w.writerows([_line("Nvidia L4 GPU running in Americas"),
                     _line("Nvidia L4 GPU running in Americas", credits=credit)])
    e = _load_error(path)
    assert (e.path, e.line, e.column) == (str(path), 3, "credits")
    assert "is not a list of credits whose amounts are numbers" in e.message
    json_path = tmp_path / "gcp.jsonl"
    json_path.write_text(json.dumps({"cost": 1.0, "currency": "USD", "usage_start_time": "2023-09-12T10:00:00Z",
                                     "sku": {"description": "x"},
                                     "credits": [{"name": "x", "amount": amount.strip("'")}]}) + "\n",
                         encoding="utf-8")
    e = _load_error(json_path)
    assert (e.line, e.column) == (1, "credits")


def test_a_json_credit_amount_with_a_thousands_separator_is_named_on_its_line(tmp_path):
    """A JSON export's credits are a real list: each amount is read from it as its own text, so `1,000.00` is
    refused whole, on its line, in the credits column (its `1` alone is not what the export meant)."""
    path = tmp_path / "gcp.jsonl"
    lines = [{"cost": 1.0, "currency": "USD", "usage_start_time": "2023-09-12T10:00:00Z", "sku": {"description": "x"},
              "credits": [{"name": "x", "amount": amount}]} for amount in ("-0.5", "-1,000.00")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    e = _load_error(path)
    assert (e.path, e.line, e.column) == (str(path), 2, "credits")


def test_a_gcp_exports_cost_column_is_its_cost():
    """What the file's own total is summed from (a spreadsheet's total row is checked against it)."""
    [source] = Store().load_billing([REPO / "fixtures" / "billing" / "gcp" / "gcp-detailed-export.jsonl"])
    assert source.cost_column == "cost"

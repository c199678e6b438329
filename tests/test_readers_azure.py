"""The Azure reader (Cost Management cost details) against a real public export and hand-written fixtures in
every header variant, reconciled to the cent with an independent sum of each file's own cost column (Python's
csv module and Decimal).

* azure/finops-toolkit__EA_ActualCost_Small.csv in the public samples (the `samples` fixture) is a byte-for-byte copy of
  src/powershell/Tests/Unit/assets/EA_ActualCost_Small.csv from microsoft/finops-toolkit
  @ 6873edc4c53e8f6828f482d8d44adbc1fd5d1eb5, MIT (see SOURCES.md there): an EA actual-cost export with a UTF-8
  BOM, a `Cost` column, `MM/DD/YYYY` dates, Tags without outer braces and a reservation purchase.
* auditor/data/azure_regions.csv is microsoft/finops-toolkit's Regions.csv (MIT; see auditor/data/NOTICE.md).
* fixtures/billing/azure/ are hand-written for these tests from ../shared/reference/billing-schemas.md section 5:
  ea-cost-details.csv (EA, PascalCase, `CostInBillingCurrency`, BOM and CRLF), mca-cost-details.csv (MCA,
  camelCase, billed in EUR), payg-usage-details.csv (legacy pay-as-you-go: `UsageDateTime`, `PreTaxCost`,
  `InstanceId`) and ea-short-dates.csv (dates like `9/2/2023`).
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.providers.billing.detect import detect_format
from auditor.tables.store import Store

REPO = Path(__file__).resolve().parents[1]
EA_SAMPLE = "azure/finops-toolkit__EA_ActualCost_Small.csv"  # in the public samples
FIXTURES = REPO / "fixtures" / "billing" / "azure"
EA = FIXTURES / "ea-cost-details.csv"
MCA = FIXTURES / "mca-cost-details.csv"
PAYG = FIXTURES / "payg-usage-details.csv"
SHORT = FIXTURES / "ea-short-dates.csv"
REGIONS = REPO / "auditor" / "data" / "azure_regions.csv"

D = Decimal
TEN = D("1e-10")


# ---- independent reading ----------------------------------------------------------------------------------

def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8-sig") as f:  # utf-8-sig drops a BOM where there is one
        reader = csv.DictReader(f)
        rows = list(reader)
    return list(reader.fieldnames or []), rows


def independent_total(path: Path, cost: str, currency: str) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for r in read_csv(path)[1]:
        out[r[currency]] = out.get(r[currency], D(0)) + D(r[cost])
    return out


def q10(amounts: dict[str, Decimal]) -> dict[str, Decimal]:
    return {k: D(v).quantize(TEN) for k, v in amounts.items()}


def tags_of(text: str) -> dict[str, str]:
    text = text.strip()
    if not text:
        return {}
    return {k: str(v) for k, v in json.loads(text if text.startswith("{") else "{" + text + "}").items()}


with open(REGIONS, newline="", encoding="utf-8") as _f:
    REGION_TABLE = {r["OriginalValue"].strip().lower(): r["RegionId"] for r in csv.DictReader(_f)}


def region_of(location: str) -> str | None:
    """ResourceLocation to region id through the bundled lookup table, read here with the csv module."""
    if not location.strip():
        return None
    return REGION_TABLE.get(location.strip().lower(), location.strip().lower().replace(" ", ""))


def load(path: Path) -> tuple[Store, object]:
    store = Store()
    return store, store.load_file(path)


@pytest.fixture(scope="module")
def sample_path(samples) -> Path:
    return samples / EA_SAMPLE


@pytest.fixture(scope="module")
def sample(sample_path):
    return load(sample_path)


# file, cost column, currency column, rows, independent total
FILES = [
    (EA_SAMPLE, "Cost", "BillingCurrency", 11, {"USD": D("8.5450077867419368")}),
    (EA, "CostInBillingCurrency", "BillingCurrencyCode", 17, {"USD": D("1877.105775")}),
    (MCA, "costInBillingCurrency", "billingCurrency", 7, {"EUR": D("208.435277")}),
    (PAYG, "PreTaxCost", "Currency", 7, {"USD": D("33.5155904")}),
    (SHORT, "Cost", "BillingCurrency", 5, {"USD": D("44.171")}),
]


# ---- reconciliation to the cent ---------------------------------------------------------------------------

@pytest.mark.heavy
@pytest.mark.parametrize("path, cost, currency, rows, total", FILES, ids=[Path(f[0]).name for f in FILES])
def test_reconciles_to_the_cent(path, cost, currency, rows, total, locate):
    path = locate(path)
    expected = independent_total(path, cost, currency)
    assert expected == total and len(read_csv(path)[1]) == rows
    store, source = load(path)
    assert source.format == "azure-cost"
    assert source.cost_column == cost  # the file's own cost column, whatever else it has (costInUsd, PayGPrice)
    assert source.rows == source.stats["rows"] == rows
    assert q10(source.stats["billed_cost"]) == q10(expected)
    assert q10(source.stats["effective_cost"]) == q10(expected)
    # line for line, exactly, in the file's order from line 2
    got = store.lines().execute("SELECT x_SourceRow, BilledCost, EffectiveCost, BillingCurrency FROM lines "
                            "ORDER BY 1").fetchall()
    assert got == [(i + 2, D(r[cost]), D(r[cost]), r[currency]) for i, r in enumerate(read_csv(path)[1])]


@pytest.mark.parametrize("path", [f[0] for f in FILES], ids=[Path(f[0]).name for f in FILES])
def test_detected_as_azure_cost_details(path, locate):
    assert detect_format(read_csv(locate(path))[0]) == "azure-cost"


def test_fixture_sizes_and_encodings():
    for path, *_ in FILES[1:]:
        assert 5 <= len(read_csv(path)[1]) <= 30, path.name
    assert EA.read_bytes().startswith(b"\xef\xbb\xbf") and b"\r\n" in EA.read_bytes()


def test_sample_starts_with_a_bom(sample_path):
    assert sample_path.read_bytes().startswith(b"\xef\xbb\xbf")


# ---- the real sample --------------------------------------------------------------------------------------

@pytest.mark.heavy
def test_sample_purchase_row(sample, sample_path):
    store, _ = sample
    _, rows = read_csv(sample_path)
    purchases = [i + 2 for i, r in enumerate(rows) if r["ChargeType"] == "Purchase"]
    assert purchases == [2]
    got = store.lines().execute("SELECT ChargeCategory, PricingCategory, BilledCost, x_InstanceType, ResourceId "
                                "FROM lines WHERE x_SourceRow = 2").fetchone()
    assert got[:4] == ("Purchase", "Committed", D("3.25"), "Standard_B1s")
    assert got[4] == rows[0]["ResourceId"].lower()
    assert store.lines().execute("SELECT count(*) FROM lines WHERE ChargeCategory = 'Usage' AND PricingCategory = "
                             "'Standard'").fetchone()[0] == 10


@pytest.mark.heavy
def test_sample_dates_are_parsed(sample, sample_path):
    store, _ = sample
    _, rows = read_csv(sample_path)
    got = store.lines().execute("SELECT x_SourceRow, ChargePeriodStart, ChargePeriodEnd FROM lines "
                                "ORDER BY 1").fetchall()
    for line, start, end in got:
        day = datetime.strptime(rows[line - 2]["Date"], "%m/%d/%Y")
        assert (start, end) == (day, day + timedelta(days=1)), line
    assert {s.date().isoformat() for _, s, _ in got} == {"2023-09-21", "2023-09-04", "2023-09-05"}


@pytest.mark.heavy
def test_sample_tags_become_a_map(sample, sample_path):
    store, _ = sample
    _, rows = read_csv(sample_path)
    assert store.lines().execute("SELECT DISTINCT typeof(Tags) FROM lines").fetchall() == [("MAP(VARCHAR, VARCHAR)",)]
    got = dict(store.lines().execute("SELECT x_SourceRow, Tags FROM lines").fetchall())
    for i, r in enumerate(rows):
        assert got[i + 2] == tags_of(r["Tags"]), i + 2
    assert not r["Tags"].startswith("{") and r["Tags"]  # written without the outer braces
    assert got[3] == {"CostCenter": "1234", "env": "prod", "org": "trey", "application": "databricks",
                      "databricks-environment": "true"}
    assert got[9] == {"CostCenter": "SubACM", "org": ""}  # an empty value is kept, apart from an absent key
    assert got[2] == {}  # no tags: an empty map


@pytest.mark.heavy
def test_sample_regions_are_normalized(sample, sample_path):
    store, _ = sample
    _, rows = read_csv(sample_path)
    got = dict(store.lines().execute("SELECT x_SourceRow, RegionId FROM lines").fetchall())
    assert [got[i + 2] for i in range(len(rows))] == [region_of(r["ResourceLocation"]) for r in rows]
    assert {r["ResourceLocation"]: got[i + 2] for i, r in enumerate(rows)} == {
        "uksouth": "uksouth", "EastUS2": "eastus2", "WestUS": "westus", "SouthCentralUS": "southcentralus",
        "westus2": "westus2", "EastUS": "eastus", "": None, "ukwest": "ukwest", "CentralUS": "centralus"}


@pytest.mark.heavy
def test_sample_classification(sample):
    store, _ = sample
    got = dict(store.lines().execute("SELECT x_SourceRow, x_CostCategory FROM lines").fetchall())
    assert got[5] == "other_compute"  # Standard_D2s_v3, from AdditionalInfo
    assert got[3] == got[4] == got[9] == "storage"
    assert store.lines().execute("SELECT count(*) FROM lines WHERE x_TransferKind IS NOT NULL OR x_GpuModel IS NOT NULL"
                             ).fetchone()[0] == 0


@pytest.mark.heavy
def test_region_spellings_through_the_bundled_table():
    assert region_of("US East 2") == "eastus2" and region_of("EU North") == "northeurope"
    store = Store()
    for path in (EA, MCA, PAYG):
        store.load_file(path)
    got = {r[0] for r in store.lines().execute("SELECT DISTINCT RegionId FROM lines").fetchall()}
    assert got == {"eastus", "eastus2", "westus2", "westeurope", "northeurope"}


# ---- the fixtures, line by line ---------------------------------------------------------------------------

NLP = {"team": "nlp", "owner": "alice"}
INF = {"team": "inference", "owner": "erin"}
A100 = ("gpu_compute", "Standard_NC24ads_A100_v4", "A100-80GB", 1)
T4_4 = ("gpu_compute", "Standard_NC4as_T4_v3", "T4", 1)
NOT_GPU = (None, None, None)
NO_TRANSFER = (None, None)

# line: (ChargeCategory, PricingCategory, x_CostCategory, x_InstanceType, x_GpuModel, x_GpuCount, RegionId,
#        x_TransferKind, x_TransferDirection, x_TransferFrom, Tags)
EA_LINES = {
    2: ("Usage", "Standard", *A100, "eastus", *NO_TRANSFER, None, NLP),  # size from AdditionalInfo.ServiceType
    3: ("Usage", "Standard", *T4_4, "eastus2", *NO_TRANSFER, None, INF),  # meter only; 'US East 2'
    4: ("Usage", "Dynamic", *A100, "westus2", *NO_TRANSFER, None, NLP),  # PricingModel Spot, '... Spot' meter
    5: ("Usage", "Dynamic", "gpu_compute", "Standard_NC8as_T4_v3", "T4", 1, "eastus", *NO_TRANSFER, None,
        {"team": "inference"}),  # ' Spot' meter, no PricingModel
    6: ("Usage", "Committed", *A100, "eastus", *NO_TRANSFER, None, NLP),  # reservation usage
    7: ("Purchase", "Committed", *A100, "eastus", *NO_TRANSFER, None, {}),  # reservation purchase
    8: ("Usage", "Standard", "gpu_compute", "Standard_ND96asr_v4", "A100", 8, "eastus", *NO_TRANSFER, None, NLP),
    9: ("Usage", "Standard", "other_compute", "Standard_D4s_v5", None, None, "eastus", *NO_TRANSFER, None,
        {"team": "data", "owner": "dave"}),
    10: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "inter_region", "out", "eastus", NLP),
    11: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "inter_region", "out", "eastus", NLP),
    12: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "internet", "out", "eastus", INF),
    13: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus2", "internet", "out", "eastus2", INF),
    14: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "internet", "in", "eastus", NLP),
    15: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "inter_region", "out", "eastus", {"team": "platform"}),
    16: ("Usage", "Standard", "storage", *NOT_GPU, "eastus", *NO_TRANSFER, None, NLP),
    17: ("Usage", "Standard", "storage", *NOT_GPU, "eastus", *NO_TRANSFER, None, {**NLP, "purpose": "checkpoints"}),
    18: ("Usage", "Standard", "other", *NOT_GPU, "eastus", *NO_TRANSFER, None, {}),
}
RESEARCH = {"team": "research", "owner": "frank"}
H100 = ("gpu_compute", "Standard_NC40ads_H100_v5", "H100-NVL", 1)
MCA_LINES = {
    2: ("Usage", "Standard", *H100, "westeurope", *NO_TRANSFER, None, RESEARCH),
    3: ("Usage", "Dynamic", *H100, "westeurope", *NO_TRANSFER, None, {"team": "research"}),
    4: ("Usage", "Standard", "gpu_compute", "Standard_NV36ads_A10_v5", "A10", 1, "northeurope", *NO_TRANSFER, None,
        {"team": "viz", "owner": "gina"}),  # 'EU North'
    5: ("Usage", "Standard", "transfer", *NOT_GPU, "westeurope", "inter_region", "out", "westeurope", RESEARCH),
    6: ("Usage", "Standard", "transfer", *NOT_GPU, "northeurope", "internet", "out", "northeurope",
        {"team": "viz", "owner": "gina"}),
    7: ("Usage", "Standard", "storage", *NOT_GPU, "westeurope", *NO_TRANSFER, None, RESEARCH),
    8: ("Usage", "Standard", "other", *NOT_GPU, "westeurope", *NO_TRANSFER, None, {}),
}
PAYG_LINES = {  # no PricingModel column: pay-as-you-go is the standard rate
    2: ("Usage", "Standard", *T4_4, "eastus", *NO_TRANSFER, None, {"project": "p1", "team": "ds"}),  # 'US East'
    3: ("Usage", "Standard", "gpu_compute", "Standard_NV36ads_A10_v5", "A10", 1, "westus2", *NO_TRANSFER, None,
        {"project": "p2"}),  # meter only; 'US West 2'
    4: ("Usage", "Standard", "other_compute", "Standard_B2s", None, None, "eastus", *NO_TRANSFER, None, {}),
    5: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "inter_region", "out", "eastus", {"project": "p1"}),
    6: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "internet", "out", "eastus", {}),
    7: ("Usage", "Standard", "storage", *NOT_GPU, "eastus", *NO_TRANSFER, None, {"project": "p1"}),
    8: ("Usage", "Standard", "other", *NOT_GPU, "eastus", *NO_TRANSFER, None, {}),
}
SHORT_LINES = {
    2: ("Usage", "Standard", *T4_4, "eastus", *NO_TRANSFER, None, INF),
    3: ("Usage", "Standard", *T4_4, "eastus", *NO_TRANSFER, None, INF),
    4: ("Usage", "Standard", *T4_4, "eastus", *NO_TRANSFER, None, INF),
    5: ("Usage", "Standard", "gpu_compute", "Standard_NC8as_T4_v3", "T4", 1, "eastus", *NO_TRANSFER, None, INF),
    6: ("Usage", "Standard", "transfer", *NOT_GPU, "eastus", "internet", "out", "eastus", INF),
}
CLASSES = ("SELECT x_SourceRow, ChargeCategory, PricingCategory, x_CostCategory, x_InstanceType, x_GpuModel, "
           "x_GpuCount, RegionId, x_TransferKind, x_TransferDirection, x_TransferFrom, Tags FROM lines ORDER BY 1")


@pytest.mark.heavy
@pytest.mark.parametrize("path, expected", [(EA, EA_LINES), (MCA, MCA_LINES), (PAYG, PAYG_LINES),
                                            (SHORT, SHORT_LINES)], ids=["ea", "mca", "payg", "short-dates"])
def test_fixture_line_by_line(path, expected):
    store, _ = load(path)
    got = {g[0]: g[1:] for g in store.lines().execute(CLASSES).fetchall()}
    assert list(got) == list(expected)
    for line, exp in expected.items():
        assert got[line] == exp, f"{path.name}:{line}"
    # the tags map is the file's own Tags column, braces or not
    _, rows = read_csv(path)
    tag_col = next(c for c in rows[0] if c.lower() == "tags")
    assert [got[i + 2][-1] for i in range(len(rows))] == [tags_of(r[tag_col]) for r in rows]
    # transfers name no destination: Azure meters do not say
    assert store.lines().execute("SELECT count(*) FROM lines WHERE x_TransferTo IS NOT NULL").fetchone()[0] == 0


@pytest.mark.heavy
@pytest.mark.parametrize("path, column, fmt", [(EA, "Date", "%m/%d/%Y"), (MCA, "date", "%Y-%m-%d"),
                                               (PAYG, "UsageDateTime", "%Y-%m-%d"), (SHORT, "Date", "%m/%d/%Y")],
                         ids=["ea", "mca", "payg", "short-dates"])
def test_fixture_dates(path, column, fmt):
    store, _ = load(path)
    _, rows = read_csv(path)
    got = store.lines().execute("SELECT ChargePeriodStart, ChargePeriodEnd FROM lines ORDER BY x_SourceRow").fetchall()
    want = [datetime.strptime(r[column], fmt) for r in rows]
    assert got == [(d, d + timedelta(days=1)) for d in want]


def test_short_dates_without_leading_zeros():
    store, _ = load(SHORT)
    days = [r[0].date().isoformat() for r in store.lines().execute(
        "SELECT ChargePeriodStart FROM lines ORDER BY x_SourceRow").fetchall()]
    assert [r["Date"] for r in read_csv(SHORT)[1]] == ["9/2/2023", "9/9/2023", "9/10/2023", "10/1/2023",
                                                        "12/31/2023"]
    assert days == ["2023-09-02", "2023-09-09", "2023-09-10", "2023-10-01", "2023-12-31"]


def test_ea_fixture_totals():
    _, source = load(EA)
    _, rows = read_csv(EA)
    st = source.stats

    def cost(lines) -> dict[str, Decimal]:
        return {"USD": sum((D(rows[n - 2]["CostInBillingCurrency"]) for n in lines), D(0))}

    gpu = [n for n, e in EA_LINES.items() if e[2] == "gpu_compute"]
    assert q10(st["gpu_cost"]) == q10(cost(gpu)) == q10({"USD": D("1840.2857")})
    assert q10(st["spot_cost"]) == q10(st["gpu_spot_cost"]) == q10(cost([4, 5]))
    for category in ("gpu_compute", "other_compute", "transfer", "storage", "other"):
        assert q10(st["by_category"][category]) == q10(cost([n for n, e in EA_LINES.items() if e[2] == category]))
    # GPU-hours of usage lines: 24 + 24 + 10.5 + 6 + 24 (reserved) + 2 x 8 GPUs; the purchase's hour is not usage
    assert D(st["gpu_hours"]) == D("104.5")
    assert D(st["transfer_gb_out"]["inter_region"]) == D(120 + 40 + 64)
    assert D(st["transfer_gb_out"]["internet"]) == D("47.5")


def test_mca_bills_in_its_billing_currency():
    store, source = load(MCA)
    _, rows = read_csv(MCA)
    assert {r["billingCurrency"] for r in rows} == {"EUR"}
    usd = sum(D(r["costInUsd"]) for r in rows)
    assert q10(source.stats["billed_cost"]) != q10({"USD": usd})
    assert set(source.stats["billed_cost"]) == {"EUR"}
    # the resource id is lower-cased, as ARM ids are case-insensitive
    assert store.lines().execute("SELECT ResourceId FROM lines WHERE x_SourceRow = 2").fetchone()[0] == \
        rows[0]["ResourceId"].lower()


def test_payg_reads_instance_id_and_usage_quantity():
    store, _ = load(PAYG)
    _, rows = read_csv(PAYG)
    got = store.lines().execute("SELECT ResourceId, ConsumedQuantity, ConsumedUnit, SubAccountId FROM lines "
                            "ORDER BY x_SourceRow").fetchall()
    assert got == [(r["InstanceId"].lower(), D(r["UsageQuantity"]),
                    "Hours" if r["UnitOfMeasure"] == "1 Hour" else
                    "GB" if r["UnitOfMeasure"] == "1 GB" else r["UnitOfMeasure"], r["SubscriptionGuid"])
                   for r in rows]


# ---- bad input ----------------------------------------------------------------------------------------------

def _load_error(path: Path) -> InputError:
    with pytest.raises(InputError) as err:  # a duckdb.Error or anything else fails the test
        Store().load_billing([path])
    return err.value


def _with_value(tmp_path: Path, src: Path, line: int, column: str, value: str) -> Path:
    header, rows = read_csv(src)
    rows[line - 2][column] = value
    path = tmp_path / f"bad-{src.name}"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.mark.parametrize("src, line, column, value", [
    (SHORT, 4, "Date", "21/09/2023"),  # day first: not a US date
    (SHORT, 3, "Date", "9/31/2023"),
    (EA, 5, "Date", "2023-13-45"),
    (MCA, 6, "date", "yesterday"),
    (PAYG, 3, "UsageDateTime", "20230921"),
], ids=["day-first", "no-such-day", "iso-month-13", "mca-word", "payg-compact"])
def test_unparseable_date_names_file_line_and_column(src, line, column, value, tmp_path):
    path = _with_value(tmp_path, src, line, column, value)
    e = _load_error(path)
    assert (e.path, e.line, e.column) == (str(path), line, column), str(e)
    assert repr(value) in str(e) and f"{path.name}:{line}: " in str(e) and "\n" not in str(e)


@pytest.mark.parametrize("src, line, value", [
    (EA, 7, '"team": "nlp'),
    (EA, 3, '"team": "nlp", owner'),
    (PAYG, 4, '{"project":"p1"'),
    (MCA, 2, '{team: research}'),
], ids=["unterminated", "bare-word", "unclosed-brace", "unquoted"])
def test_bad_tags_name_file_line_and_column(src, line, value, tmp_path):
    column = next(c for c in read_csv(src)[0] if c.lower() == "tags")
    path = _with_value(tmp_path, src, line, column, value)
    e = _load_error(path)
    assert (e.path, e.line, e.column) == (str(path), line, column), str(e)
    assert "JSON" in str(e)


def test_non_numeric_cost_names_the_cost_column(tmp_path):
    path = _with_value(tmp_path, EA, 9, "CostInBillingCurrency", "4,608")
    e = _load_error(path)
    assert (e.line, e.column) == (9, "CostInBillingCurrency")

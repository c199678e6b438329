"""Each column of an Azure cost details line, one line for each way the Azure reader reads it: every spelling of
the cost, date and currency columns (EA, MCA, pay-as-you-go), every charge type and pricing model, reservations
and savings plans, dates as Cost Management and spreadsheets write them, regions by any spelling, units, list
cost, tags with and without their braces, the VM size, transfers, capacity reservations.

The expected values are worked out from Microsoft's cost details field reference (../shared/reference) and the
reader's docstrings. Each test reads its own small file: mutmut runs a test against the functions it saw that
test call."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.tables.store import Store

D = Decimal


def line(**over: str) -> dict[str, str]:
    """An EA line of a day of a VM in East US 2 costing 10.00, with `over` changed."""
    row = {"Date": "09/21/2023", "BillingAccountId": "8611537", "SubscriptionId": "sub-1",
           "MeterCategory": "Virtual Machines", "MeterSubCategory": "NCads A100 v4 Series",
           "MeterName": "NC24ads A100 v4", "MeterId": "meter-1", "ProductName": "Virtual Machines NCads A100 v4",
           "ResourceLocation": "US East 2", "ResourceId": "/subscriptions/sub-1/VM-1", "ChargeType": "Usage",
           "PricingModel": "OnDemand", "Quantity": "24", "UnitOfMeasure": "1 Hour", "PayGPrice": "",
           "CostInBillingCurrency": "10.00", "BillingCurrency": "USD", "ReservationId": "", "BenefitId": "",
           "Tags": "", "AdditionalInfo": "", "AvailabilityZone": ""}
    row.update(over)
    return row


def write(tmp_path: Path, rows: list[dict[str, str]], name: str = "azure.csv") -> Path:
    path = tmp_path / name
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def read(path: Path, columns: str) -> list[tuple]:
    store = Store()
    assert store.load_file(path).format == "azure-cost"
    return store.lines().execute(f"SELECT {columns} FROM lines ORDER BY x_SourceRow").fetchall()


@pytest.mark.heavy
@pytest.mark.parametrize("cost, date, currency", [
    ("CostInBillingCurrency", "Date", "BillingCurrency"), ("Cost", "Date", "BillingCurrencyCode"),
    ("PreTaxCost", "UsageDateTime", "Currency"), ("costInBillingCurrency", "servicePeriodStartDate", "Currency"),
    ("costInUsd", "Date", None)])
def test_every_spelling_of_the_cost_date_and_currency(tmp_path, cost, date, currency):
    row = {k: v for k, v in line(ResourceLocation="eastus2").items() if k not in ("CostInBillingCurrency", "Date",
                                                                                  "BillingCurrency")}
    row.update({cost: "10.25", date: "2023-09-21"} | ({currency: "EUR"} if currency else {}))
    assert read(write(tmp_path, [row]), "BilledCost, EffectiveCost, strftime(ChargePeriodStart, '%Y-%m-%d'), "
                                        "BillingCurrency") == [(D("10.25"), D("10.25"), "2023-09-21",
                                                                "EUR" if currency else "USD")]


def test_charge_types_and_pricing_models(tmp_path):
    rows = [line(ChargeType=c, PricingModel=p) for c, p in [
        ("Usage", "OnDemand"), ("Purchase", "Reservation"), ("Refund", "Reservation"),
        ("UnusedReservation", "Reservation"), ("UnusedSavingsPlan", "SavingsPlan"),
        ("RoundingAdjustment", ""), ("Tax", ""), ("Usage", "Spot"), ("Usage", ""), ("SomethingNew", "")]]
    rows += [line(MeterName="NC24ads A100 v4 Spot"), line(MeterName="NC24ads A100 v4 Low Priority")]
    assert read(write(tmp_path, rows), "ChargeCategory, PricingCategory") == [
        ("Usage", "Standard"), ("Purchase", "Committed"), ("Credit", "Committed"), ("Usage", "Committed"),
        ("Usage", "Committed"), ("Adjustment", None), ("Tax", None), ("Usage", "Dynamic"), ("Usage", "Standard"),
        ("Usage", "Standard"), ("Usage", "Dynamic"), ("Usage", "Dynamic")]


def test_reservations_and_savings_plans(tmp_path):
    """Reservation usage is the reservation's, used; the hours it went unused are its, unused; a savings plan's
    by its benefit id. Ids lower-cased, as Azure spells one id in both cases across exports."""
    rows = [line(PricingModel="Reservation", ReservationId="RES-1"),
            line(ChargeType="UnusedReservation", PricingModel="Reservation", ReservationId="RES-1"),
            line(PricingModel="SavingsPlan", BenefitId="SP-1"),
            line(ChargeType="UnusedSavingsPlan", PricingModel="SavingsPlan", BenefitId="SP-1"),
            line()]
    assert read(write(tmp_path, rows), "CommitmentDiscountId, CommitmentDiscountStatus, CommitmentDiscountType") == [
        ("res-1", "Used", "Reservation"), ("res-1", "Unused", "Reservation"), ("sp-1", "Used", "Savings Plan"),
        ("sp-1", "Unused", "Savings Plan"), (None, None, None)]


def test_dates_as_cost_management_and_spreadsheets_write_them(tmp_path):
    """Month first (`09/21/2023`, `9/2/2023`), with a time a spreadsheet added (24-hour, AM/PM, no seconds), or
    ISO; a line is the day from that time."""
    dates = ["09/21/2023", "9/2/2023", "09/21/2023 13:45:00", "09/21/2023 1:45:00 PM", "09/21/2023 13:45",
             "2023-09-21", "2023-09-21T06:00:00Z"]
    got = read(write(tmp_path, [line(Date=d) for d in dates]),
               "strftime(ChargePeriodStart, '%Y-%m-%d %H:%M:%S'), strftime(ChargePeriodEnd, '%Y-%m-%d %H:%M:%S')")
    assert got == [("2023-09-21 00:00:00", "2023-09-22 00:00:00"), ("2023-09-02 00:00:00", "2023-09-03 00:00:00"),
                   ("2023-09-21 13:45:00", "2023-09-22 13:45:00"), ("2023-09-21 13:45:00", "2023-09-22 13:45:00"),
                   ("2023-09-21 13:45:00", "2023-09-22 13:45:00"), ("2023-09-21 00:00:00", "2023-09-22 00:00:00"),
                   ("2023-09-21 06:00:00", "2023-09-22 06:00:00")]


def test_columns_of_a_line(tmp_path):
    """Regions by any spelling (an unknown one as its lower-cased name without spaces), units as FOCUS names
    them, the list cost as PayGPrice times the quantity to the cent (multiplied as floats), else the cost; the
    resource id lower-cased."""
    rows = [line(ResourceLocation="US East 2", UnitOfMeasure="1 Hour", PayGPrice="4.10", Quantity="2"),
            line(ResourceLocation="eus2", UnitOfMeasure="1 Hours"),
            line(ResourceLocation="Mars Central", UnitOfMeasure="1 GB", ResourceId="/Subscriptions/SUB-1/VM-2"),
            line(ResourceLocation="eastus2", UnitOfMeasure="1 GB/Month", AvailabilityZone="2"),
            line(ResourceLocation="", UnitOfMeasure="10 Hours")]
    got = read(write(tmp_path, rows), "RegionId, ConsumedUnit, ConsumedQuantity, round(ListCost, 2), ResourceId, "
                                      "AvailabilityZone, SkuId, ChargeDescription, ServiceName, BillingAccountId, "
                                      "SubAccountId, ProviderName, x_Provider")
    common = ("meter-1", "Virtual Machines NCads A100 v4", "Virtual Machines", "8611537", "sub-1", "Microsoft",
              "azure")
    assert got == [("eastus2", "Hours", D(2), D("8.2"), "/subscriptions/sub-1/vm-1", None, *common),
                   ("eastus2", "Hours", D(24), D("10.00"), "/subscriptions/sub-1/vm-1", None, *common),
                   ("marscentral", "GB", D(24), D("10.00"), "/subscriptions/sub-1/vm-2", None, *common),
                   ("eastus2", "GB", D(24), D("10.00"), "/subscriptions/sub-1/vm-1", "2", *common),
                   (None, "10 Hours", D(24), D("10.00"), "/subscriptions/sub-1/vm-1", None, *common)]


def test_tags_with_and_without_their_braces(tmp_path):
    rows = [line(Tags='"team": "nlp","owner": "ana"'), line(Tags='{"team": "cv"}'), line()]
    assert read(write(tmp_path, rows), "Tags") == [({"team": "nlp", "owner": "ana"},), ({"team": "cv"},), ({},)]
    no_tags = [{k: v for k, v in r.items() if k != "Tags"} for r in rows]
    assert read(write(tmp_path, no_tags, "untagged.csv"), "Tags") == [({},)] * 3


def test_the_vm_size_and_kind(tmp_path):
    """The size from AdditionalInfo's ServiceType, else from a VM meter's name (`NC24ads A100 v4 Spot` is
    Standard_NC24ads_A100_v4); storage by its meter category; anything else other."""
    rows = [line(AdditionalInfo='{"ServiceType": "Standard_ND96asr_v4", "VCPUs": 96}'),
            line(MeterName="NC24ads A100 v4 Spot"),
            line(MeterCategory="Machine Learning Service", MeterName="vCPU", AdditionalInfo='{"ServiceType": '
                 '"Standard_NC24ads_A100_v4"}'),
            line(MeterCategory="Storage", MeterName="P30 Disks"), line(MeterCategory="Backup", MeterName="GRS"),
            line(MeterCategory="Azure DNS", MeterName="Queries")]
    assert read(write(tmp_path, rows), "x_InstanceType, x_CostCategory, x_UsageType") == [
        ("Standard_ND96asr_v4", "gpu_compute", "Virtual Machines / NCads A100 v4 Series / NC24ads A100 v4"),
        ("Standard_NC24ads_A100_v4", "gpu_compute", "Virtual Machines / NCads A100 v4 Series / NC24ads A100 v4 Spot"),
        ("Standard_NC24ads_A100_v4", "gpu_compute", "Machine Learning Service / NCads A100 v4 Series / vCPU"),
        (None, "storage", "Storage / NCads A100 v4 Series / P30 Disks"),
        (None, "storage", "Backup / NCads A100 v4 Series / GRS"),
        (None, "other", "Azure DNS / NCads A100 v4 Series / Queries")]


def test_transfers(tmp_path):
    def transfer(category, sub, meter):
        return line(MeterCategory=category, MeterSubCategory=sub, MeterName=meter)

    rows = [transfer("Bandwidth", "Inter-Region", "Inter-Region Data Transfer Out"),
            transfer("Bandwidth", "", "Intra Continent Data Transfer Out"),
            transfer("Virtual Network", "", "Inter-Region Ingress"),
            transfer("Virtual Network", "", "Intra-Region Egress"),
            transfer("Bandwidth", "", "Standard Data Transfer Out"),
            transfer("Bandwidth", "", "Standard Data Transfer In")]
    assert read(write(tmp_path, rows), "x_TransferKind, x_TransferDirection, x_TransferFrom, x_TransferTo, "
                                       "x_CostCategory") == [
        ("inter_region", "out", "eastus2", None, "transfer"), ("inter_region", "out", "eastus2", None, "transfer"),
        ("inter_region", "in", "eastus2", None, "transfer"), ("intra_region", "out", "eastus2", None, "transfer"),
        ("internet", "out", "eastus2", None, "transfer"), ("internet", "in", "eastus2", None, "transfer")]


def test_a_capacity_reservation_bills_its_unused_instances_to_itself(tmp_path):
    crg = "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Compute/capacityReservationGroups/CRG/cr-1"
    rows = [line(ResourceId=crg), line()]
    assert read(write(tmp_path, rows), "CapacityReservationId, CapacityReservationStatus") == [
        (crg.lower(), "Unused"), (None, None)]


@pytest.mark.parametrize("column, value", [("CostInBillingCurrency", "10,00"), ("Quantity", "24 h"),
                                           ("Date", "21/09/2023"), ("Tags", '"team": nlp'),
                                           # slashed but year first: DuckDB's strptime words, no line (the
                                           # diagnosis read it as ISO where the reader reads it as US)
                                           ("Date", "2023/09/21"),
                                           # a tag twice, without braces as Azure writes them ("Map keys must be
                                           # unique", no line)
                                           ("Tags", '"team": "nlp","team": "cv"')])
def test_a_bad_value_names_file_line_and_column(tmp_path, column, value):
    path = write(tmp_path, [line(), line(**{column: value})])
    with pytest.raises(InputError) as err:
        Store().load_billing([path])
    assert (err.value.path, err.value.line, err.value.column) == (str(path), 3, column)
    assert f"{path}:3: " in str(err.value) and "\n" not in str(err.value)



@pytest.mark.heavy
@pytest.mark.parametrize("renamed, column, expected", [
    ({"ProductName": "Product"}, "ChargeDescription", "Virtual Machines NCads A100 v4"),
    ({"ProductName": None}, "ChargeDescription", "NC24ads A100 v4"),  # no product: the meter's name
    ({"MeterCategory": "ConsumedService"}, "ServiceName", "Virtual Machines"),
    ({"BillingAccountId": "BillingAccountName"}, "BillingAccountId", "8611537"),
    ({"BillingAccountId": None}, "BillingAccountId", "sub-1"),  # pay-as-you-go: the subscription is the account
    ({"SubscriptionId": "SubscriptionGuid"}, "SubAccountId", "sub-1"),
    ({"MeterId": "PartNumber"}, "SkuId", "meter-1"),
    ({"ResourceId": "InstanceId"}, "ResourceId", "/subscriptions/sub-1/vm-1"),
    ({"Quantity": "UsageQuantity"}, "ConsumedQuantity", D(24)),
    ({}, "round(ListCost, 2)", D("98.40")),
    ({"Quantity": "UsageQuantity", "PayGPrice": "paygPrice"}, "round(ListCost, 2)", D("98.40")),
    ({"PayGPrice": None}, "round(ListCost, 2)", D("10.00")),  # no unit price: the list cost is the cost
    ({"Quantity": None}, "round(ListCost, 2)", D("10.00")),
])
def test_every_other_spelling_of_a_column_alone(tmp_path, renamed, column, expected):
    """Each column an export spells otherwise (MCA's Product, PAYG's InstanceId and UsageQuantity, EA's
    PartNumber, SubscriptionGuid, BillingAccountName, ConsumedService), read where it is the only spelling; a
    column read from another where the file lacks it. The list cost is PayGPrice times the quantity (4.10 x 24),
    the cost where either is missing."""
    row = {renamed.get(k, k): v for k, v in line(PayGPrice="4.10").items() if renamed.get(k, k)}
    assert read(write(tmp_path, [row]), column) == [(expected,)]


def test_the_quantity_read_first_where_a_file_has_two_spellings(tmp_path):
    """A file with both Quantity and UsageQuantity reads Quantity, the first spelling the reader names, for the
    quantity and for the list cost (PayGPrice 4.10 x 24 = 98.40, not x 2)."""
    row = line(PayGPrice="4.10") | {"UsageQuantity": "2"}
    assert read(write(tmp_path, [row]), "ConsumedQuantity, round(ListCost, 2)") == [(D(24), D("98.40"))]

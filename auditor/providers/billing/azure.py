"""Azure Cost Management exports (cost details, actual or amortised) for EA, MCA and pay-as-you-go,
normalized in SQL. Their headers differ (`CostInBillingCurrency`, `Cost`, `PreTaxCost`, `costInBillingCurrency`;
PascalCase or camelCase); columns are found by any spelling. Dates come as `09/21/2023` or `2023-09-21`;
`Tags` is a JSON object often written without its outer braces.

An actual-cost file holds reservation purchases as purchases; an amortised file spreads them over usage.
EffectiveCost is the file's own cost either way: export the amortised view for amortised figures.
"""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources

from auditor.providers.billing.columns import MONEY, Columns, case_map
from auditor.providers.billing.registry import reads
from auditor.providers.billing.transfer import transfer_columns
from auditor.providers.catalog import Catalog

COST = ("CostInBillingCurrency", "Cost", "PreTaxCost", "costInBillingCurrency", "costInUsd")
PRICING = {"OnDemand": "Standard", "Reservation": "Committed", "SavingsPlan": "Committed", "Spot": "Dynamic"}
CHARGE = {"Usage": "Usage", "Purchase": "Purchase", "Refund": "Credit", "UnusedReservation": "Usage",
          "UnusedSavingsPlan": "Usage", "RoundingAdjustment": "Adjustment", "Tax": "Tax"}


@cache
def region_ids() -> dict[str, str]:
    """Every spelling of an Azure region (`US East 2`, `eastus2`, `eus2`) to its id, lower-cased keys."""
    text = resources.files("auditor.data").joinpath("azure_regions.csv").read_text(encoding="utf-8")
    return {r["OriginalValue"].strip().lower(): r["RegionId"] for r in csv.DictReader(text.splitlines())}


# US month-first dates, as Cost Management writes them (`09/21/2023`, `9/2/2023`), with a time where a
# spreadsheet added one.
US_DATES = "['%m/%d/%Y', '%m/%d/%Y %H:%M:%S', '%m/%d/%Y %I:%M:%S %p', '%m/%d/%Y %H:%M']"


def parse_date(expr: str, try_: bool = False) -> str:
    """`09/21/2023`, `9/2/2023`, `2023-09-21` or an ISO time, as a UTC timestamp. A date that is neither
    (`21/09/2023`, `2023-13-45`) is an error, not NULL, so that the file, line and column can be named; with
    try_ it is NULL instead, to find that line."""
    t = "TRY_" if try_ else ""  # the same choice of parser either way: `2023/09/21` is no US date, and refused
    return f"CASE WHEN {expr} LIKE '%/%' THEN {t}strptime({expr}, {US_DATES}) ELSE {t}CAST({expr} AS TIMESTAMP) END"


def select(cols: Columns, catalog: Catalog) -> tuple[dict[str, str], list[tuple[str, str]]]:
    meter_cat = f"COALESCE({cols.text('MeterCategory')}, '')"
    meter_sub = f"COALESCE({cols.text('MeterSubCategory')}, '')"
    meter = f"COALESCE({cols.text('MeterName')}, '')"
    date_col = cols.name("Date", "UsageDateTime", "servicePeriodStartDate")
    start = parse_date(f"trim(CAST({cols.ref(date_col)} AS VARCHAR))") if date_col else "CAST(NULL AS TIMESTAMP)"
    info = cols.text("AdditionalInfo")
    service_type = f"CASE WHEN json_valid({info}) THEN json_extract_string({info}, '$.ServiceType') END"
    vm_size = f"CASE WHEN ({service_type}) SIMILAR TO '(Standard|Basic)_.*' THEN {service_type} END"
    # The meter name of a VM is its size without the `Standard_` prefix: `NC24ads A100 v4` (+ ` Spot`).
    size_from_meter = (f"CASE WHEN {meter_cat} = 'Virtual Machines' THEN 'Standard_' || "
                       f"replace(regexp_replace({meter}, ' (Spot|Low Priority)$', ''), ' ', '_') END")
    instance_type = f"COALESCE({vm_size}, {size_from_meter})"
    tags = cols.text("Tags")
    tags_json = f"CASE WHEN starts_with({tags}, '{{') THEN {tags} ELSE '{{' || {tags} || '}}' END"
    location = cols.text("ResourceLocation")
    region = case_map(f"lower({location})", region_ids(), f"lower(replace({location}, ' ', ''))")
    pricing = cols.text("PricingModel")
    charge = case_map(cols.text("ChargeType"), CHARGE, "'Usage'")
    transfer_kind = f"""CASE
        WHEN {meter_cat} = 'Bandwidth' AND ({meter_sub} = 'Inter-Region' OR {meter} ILIKE '%Continent Data Transfer%')
            THEN 'inter_region'
        WHEN {meter_cat} = 'Virtual Network' AND {meter} ILIKE 'Inter-Region%' THEN 'inter_region'
        WHEN {meter_cat} = 'Virtual Network' AND {meter} ILIKE 'Intra-Region%' THEN 'intra_region'
        WHEN {meter_cat} = 'Bandwidth' AND {meter} ILIKE '%Data Transfer%' THEN 'internet'
        END"""
    direction = f"CASE WHEN {meter} ILIKE '%Ingress%' OR {meter} ILIKE '%Data Transfer In%' THEN 'in' ELSE 'out' END"
    kind = f"""CASE
        WHEN ({transfer_kind}) IS NOT NULL THEN 'transfer'
        WHEN {meter_cat} IN ('Virtual Machines', 'Virtual Machines Licenses', 'Machine Learning Service')
             OR {vm_size} IS NOT NULL THEN 'compute'
        WHEN {meter_cat} IN ('Storage', 'Backup') THEN 'storage'
        ELSE 'other' END"""
    cost = cols.money(*COST)
    paygo = cols.name("PayGPrice", "paygPrice")
    qty = cols.name("Quantity", "UsageQuantity", "quantity")
    list_cost = (f"COALESCE(CAST(CAST({cols.ref(paygo)} AS DOUBLE) * CAST({cols.ref(qty)} AS DOUBLE) AS {MONEY}), "
                 f"{cost})") if paygo and qty else cost
    charge_type = cols.text("ChargeType")
    unused = f"{charge_type} IN ('UnusedReservation', 'UnusedSavingsPlan')"
    rid = f"lower({cols.first_text('ResourceId', 'InstanceId')})"
    exprs = {
        "BilledCost": cost,
        "EffectiveCost": cost,
        "ListCost": list_cost,
        "BillingCurrency": f"COALESCE({cols.first_text('BillingCurrency', 'BillingCurrencyCode', 'Currency')}, 'USD')",
        "ChargePeriodStart": start,
        "ChargePeriodEnd": f"({start}) + INTERVAL 1 DAY",
        "ChargeCategory": charge,
        "ChargeDescription": cols.first_text("ProductName", "Product", "MeterName"),
        "ServiceName": cols.first_text("MeterCategory", "ConsumedService"),
        "ProviderName": "'Microsoft'",
        "BillingAccountId": cols.first_text("BillingAccountId", "BillingAccountName", "SubscriptionId"),
        "SubAccountId": cols.first_text("SubscriptionId", "SubscriptionGuid"),
        "ResourceId": rid,
        "RegionId": region,
        "AvailabilityZone": cols.text("AvailabilityZone"),
        "SkuId": cols.first_text("MeterId", "PartNumber"),
        # Without a PricingModel (pay-as-you-go usage details have none; EA leaves it empty on some lines), a
        # usage or purchase line is at the standard rate.
        "PricingCategory": f"""CASE WHEN {meter} LIKE '% Spot' OR {meter} LIKE '% Low Priority' THEN 'Dynamic'
            ELSE COALESCE({case_map(pricing, PRICING, 'NULL')}, CASE WHEN {charge} IN ('Usage', 'Purchase')
                                                                     THEN 'Standard' END) END""",
        # Reservation usage and the hours a reservation went unused (ChargeType UnusedReservation).
        "CommitmentDiscountId": f"CASE WHEN {unused} OR {pricing} IN ('Reservation', 'SavingsPlan') "
                                f"THEN lower({cols.first_text('ReservationId', 'BenefitId')}) END",
        "CommitmentDiscountStatus": f"CASE WHEN {unused} THEN 'Unused' WHEN {charge} = 'Usage' AND {pricing} "
                                    "IN ('Reservation', 'SavingsPlan') THEN 'Used' END",
        "CommitmentDiscountType": f"CASE WHEN {charge_type} = 'UnusedReservation' OR {pricing} = 'Reservation' "
                                  f"THEN 'Reservation' WHEN {charge_type} = 'UnusedSavingsPlan' "
                                  f"OR {pricing} = 'SavingsPlan' THEN 'Savings Plan' END",
        # A capacity reservation bills its unused instances to itself (a VM that runs in it bills to the VM).
        "CapacityReservationId": f"CASE WHEN {rid} LIKE '%/capacityreservationgroups/%' THEN {rid} END",
        "CapacityReservationStatus": f"CASE WHEN {rid} LIKE '%/capacityreservationgroups/%' THEN 'Unused' END",
        "ConsumedQuantity": cols.money("Quantity", "UsageQuantity"),
        "ConsumedUnit": f"CASE WHEN {cols.text('UnitOfMeasure')} IN ('1 Hour', '1 Hours') THEN 'Hours' "
                        f"WHEN {cols.text('UnitOfMeasure')} IN ('1 GB', '1 GB/Month') THEN 'GB' "
                        f"ELSE {cols.text('UnitOfMeasure')} END",
        "Tags": f"CAST(CAST({tags_json} AS JSON) AS MAP(VARCHAR, VARCHAR))" if cols.name("Tags")
        else "CAST(MAP() AS MAP(VARCHAR, VARCHAR))",
        "x_Provider": "'azure'",
        "x_UsageType": f"NULLIF(concat_ws(' / ', NULLIF({meter_cat}, ''), NULLIF({meter_sub}, ''), "
                       f"NULLIF({meter}, '')), '')",
        "x_InstanceType": instance_type,
        **transfer_columns(transfer_kind, direction, region, None),  # Azure meters do not name the destination
        "_kind": kind,
    }
    checks = [(cols.name(*COST), "money")]
    if qty:
        checks.append((qty, "money"))
    if date_col:
        checks.append((date_col, "date"))
    if cols.name("Tags"):
        checks.append((cols.name("Tags"), "tags"))
    return exprs, [(c, k) for c, k in checks if c]


# Registered here, not with @reads: mutmut leaves a decorated function unmutated (docs/mutation.md).
reads("azure-cost")(select)

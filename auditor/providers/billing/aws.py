"""AWS Cost and Usage Report (legacy CUR, `lineItem/UsageType` or `line_item_usage_type` spelling)
normalized to the `costs` table, in SQL."""

from __future__ import annotations

import re

from auditor.providers.billing.columns import MONEY, Columns, case_map
from auditor.providers.billing.registry import reads
from auditor.providers.billing.transfer import transfer_columns
from auditor.providers.catalog import Catalog
from auditor.sql import lit

INSTANCE_TYPE_RE = r"((?:ml\.)?[a-z][a-z0-9-]*\.(?:[0-9]*xlarge|large|medium|small|micro|nano|metal[a-z0-9-]*))"
# Every size INSTANCE_TYPE_RE ends in holds one of these: text without any of them (most descriptions: data
# transfer, storage) cannot name an instance type, and is not given to the regular expression, line by line.
_SIZES = ("large", "medium", "small", "micro", "nano", "metal")


def instance_type_in(text: str, raw: str) -> str:
    """The instance type (`p4d.24xlarge`, `ml.g5.xlarge`) named in free text, else NULL. `raw`: the column as it
    is read, looked at first: trimming a description line by line costs more than the look (which trimming
    does not change)."""
    named = " OR ".join(f"{raw} LIKE '%{size}%'" for size in _SIZES)
    return f"CASE WHEN {named} THEN NULLIF(regexp_extract({text}, '\\b{INSTANCE_TYPE_RE}\\b', 1), '') END"

# lineItem/LineItemType -> FOCUS ChargeCategory
CHARGE_CATEGORY = {
    "Usage": "Usage", "DiscountedUsage": "Usage", "SavingsPlanCoveredUsage": "Usage",
    "SavingsPlanNegation": "Credit", "Tax": "Tax", "Credit": "Credit", "Refund": "Credit",
    "BundledDiscount": "Credit", "EdpDiscount": "Credit", "PrivateRateDiscount": "Credit",
    "Discount": "Credit", "RIFee": "Purchase", "Fee": "Purchase", "SavingsPlanRecurringFee": "Purchase",
    "SavingsPlanUpfrontFee": "Purchase",
}


def region_maps(catalog: Catalog) -> tuple[dict[str, str], dict[str, str]]:
    prefixes = {p: code for code, r in catalog.aws_regions.items() for p in r["prefix"]}
    names = {n: code for code, r in catalog.aws_regions.items() for n in r["names"]}
    return prefixes, names


def _tag_entries(cols: Columns) -> str:
    """Tags as a MAP built from the one-column-per-tag layout: `resourceTags/user:team` or
    `resource_tags_user_team` become key `team`; AWS tags keep their `aws:` prefix. CUR 2.0 has one
    `resource_tags` map (or its JSON text in CSV) with keys `user_team`, `aws_created_by`."""
    if cols.name("resource_tags") == "resource_tags":
        if cols.types.get("resource_tags", "").startswith("MAP"):
            as_map = "CAST(resource_tags AS MAP(VARCHAR, VARCHAR))"
        else:  # JSON text, as in the gzip CSV delivery
            as_map = "CAST(CAST(NULLIF(CAST(resource_tags AS VARCHAR), '') AS JSON) AS MAP(VARCHAR, VARCHAR))"
        kept = f"list_filter(map_entries({as_map}), lambda e: e.value IS NOT NULL AND e.value <> '')"
        renamed = ("list_transform(" + kept + ", lambda e: {'key': CASE WHEN starts_with(e.key, 'user_') "
                   "THEN e.key[6:] WHEN starts_with(e.key, 'aws_') THEN 'aws:' || e.key[5:] ELSE e.key END, "
                   "'value': e.value})")
        return f"CAST(map_from_entries({renamed}) AS MAP(VARCHAR, VARCHAR))"
    entries = []
    for name in cols.names:
        m = re.match(r"(?i)^resourceTags/(user|aws):(.+)$", name) or \
            re.match(r"(?i)^resource_tags_(user|aws)_(.+)$", name)
        if not m:
            continue
        key = m.group(2) if m.group(1).lower() == "user" else f"aws:{m.group(2)}"
        if not cols.reads_tag(key):  # a key the audit never reads: its column is not read at all
            continue
        entries.append(f"{{'k': {lit(key)}, 'v': NULLIF(trim(CAST({cols.sql(name)} AS VARCHAR)), '')}}")
    if not entries:
        return "CAST(MAP() AS MAP(VARCHAR, VARCHAR))"
    listed = f"list_filter([{', '.join(entries)}], lambda e: e.v IS NOT NULL)"
    return (f"CAST(map_from_entries(list_transform({listed}, lambda e: {{'key': e.k, 'value': e.v}})) "
            "AS MAP(VARCHAR, VARCHAR))")


def select(cols: Columns, catalog: Catalog) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The normalized columns as SQL expressions over one CUR file, and the source columns whose values
    must parse (for naming the bad row when they don't)."""
    prefixes, names = region_maps(catalog)
    lit_type = cols.text("lineItem/LineItemType")
    usage_type = cols.text("lineItem/UsageType")
    transfer_type = cols.text("product/transferType")
    unblended = cols.money("lineItem/UnblendedCost")

    def zero(*c: str) -> str:
        return f"COALESCE({cols.money(*c)}, 0)"

    # Amortised cost by line item type, as AWS's own Cloud Intelligence Dashboards compute it.
    effective = f"""CASE {lit_type}
        WHEN 'SavingsPlanCoveredUsage' THEN {zero('savingsPlan/SavingsPlanEffectiveCost')}
        WHEN 'SavingsPlanRecurringFee' THEN {zero('savingsPlan/TotalCommitmentToDate')}
                                            - {zero('savingsPlan/UsedCommitment')}
        WHEN 'SavingsPlanNegation' THEN 0
        WHEN 'SavingsPlanUpfrontFee' THEN 0
        WHEN 'DiscountedUsage' THEN {zero('reservation/EffectiveCost')}
        WHEN 'RIFee' THEN {zero('reservation/UnusedAmortizedUpfrontFeeForBillingPeriod')}
                          + {zero('reservation/UnusedRecurringFee')}
        WHEN 'Fee' THEN CASE WHEN {cols.text('reservation/ReservationARN')} IS NOT NULL THEN 0
                             ELSE {unblended} END
        ELSE {unblended} END"""

    region = (f"COALESCE({cols.first_text('product/regionCode', 'product/region')}, "
              f"regexp_extract({cols.text('lineItem/AvailabilityZone')}, '^(.*[0-9])[a-z]$', 1))")
    description = cols.text("lineItem/LineItemDescription")
    instance_type = (f"COALESCE({cols.text('product/instanceType')}, "
                     f"NULLIF(regexp_extract({usage_type}, '(?:Usage|UnusedBox|Reservation)[^:]*:([a-z0-9.-]+)$', 1), "
                     "''), "
                     f"{instance_type_in(description, cols.raw_text('lineItem/LineItemDescription'))})")

    ut = f"COALESCE({usage_type}, '')"
    tt = f"COALESCE({transfer_type}, '')"
    transfer_kind = f"""CASE
        WHEN {ut} LIKE '%-AWS-Out-Bytes' OR {ut} LIKE '%-AWS-In-Bytes' OR {tt} LIKE 'InterRegion%'
            THEN 'inter_region'
        WHEN {ut} LIKE '%xAZ%Bytes' OR {ut} LIKE '%DataTransfer-Regional-Bytes' OR {tt} LIKE 'IntraRegion-xAZ%'
            THEN 'inter_zone'
        WHEN {tt} = 'IntraRegion' THEN 'intra_region'
        WHEN {ut} LIKE '%DataTransfer-Out-Bytes' OR {ut} LIKE '%DataTransfer-In-Bytes'
             OR {ut} LIKE '%CloudFront-Out-Bytes' OR {tt} IN ('AWS Outbound', 'AWS Inbound')
            THEN 'internet'
        END"""
    direction = f"""CASE WHEN {ut} LIKE '%-In-Bytes' OR {tt} LIKE '%Inbound' OR {tt} LIKE '%-In' THEN 'in'
                         WHEN {ut} LIKE '%Bytes' THEN 'out' END"""
    # Two-part usage types (`USE1-USW2-AWS-Out-Bytes`) name both ends; us-east-1 lines often have no prefix.
    ut_src = case_map(f"split_part({usage_type}, '-', 1)", prefixes)
    ut_dst = case_map(f"split_part({usage_type}, '-', 2)", prefixes)
    loc_from = case_map(cols.text("product/fromLocation"), names)
    loc_to = case_map(cols.text("product/toLocation"), names)
    transfer_from = f"COALESCE({cols.text('product/fromRegionCode')}, {loc_from}, {ut_src})"
    transfer_to = (f"COALESCE({cols.text('product/toRegionCode')}, {loc_to}, "
                   f"CASE WHEN {ut} LIKE '%-AWS-%-Bytes' THEN {ut_dst} END)")

    family = cols.text("product/productFamily")
    kind = f"""CASE
        WHEN ({transfer_kind}) IS NOT NULL THEN 'transfer'
        WHEN {family} IN ('Storage', 'Storage Snapshot', 'System Operation') OR {ut} LIKE '%EBS:%'
             OR {ut} LIKE '%TimedStorage%' THEN 'storage'
        WHEN {ut} LIKE '%Usage:%' OR {ut} LIKE '%BoxUsage%' OR {family} IN ('Compute Instance', 'ML Instance')
             OR {ut} LIKE '%UnusedBox%' OR {ut} LIKE '%Reservation:%' OR {ut} LIKE '%CapacityBlock%'
             OR {ut} LIKE '%-Training%' OR {ut} LIKE '%-Notebk%' OR {ut} LIKE '%-Hosting%'
            THEN 'compute'
        ELSE 'other' END"""
    pricing = f"""CASE
        WHEN {ut} LIKE '%Spot%' THEN 'Dynamic'  -- SpotUsage:<type>, SageMaker managed spot
        WHEN {lit_type} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage') THEN 'Committed'
        WHEN {cols.text('pricing/term')} = 'OnDemand' THEN 'Standard'
        WHEN {cols.text('pricing/term')} = 'Reserved' THEN 'Committed'
        END"""

    # Capacity reservations (On-Demand Capacity Reservations, Capacity Blocks for ML): CUR 2.0's capacity
    # reservation columns where the export includes them; else the reservation's ARN as the line's resource id,
    # its unused hours billed as `<region>-UnusedBox:<type>` (`Reservation:<type>` for some), used ones as usage.
    resource = cols.text("lineItem/ResourceId")
    reservation_id = (f"COALESCE({cols.text('capacityReservation/CapacityReservationArn')}, "
                      f"CASE WHEN {resource} LIKE '%:capacity-reservation/%' THEN {resource} END)")
    reservation_status = f"""CASE WHEN ({reservation_id}) IS NULL THEN NULL
        WHEN lower({cols.text('capacityReservation/CapacityReservationStatus')}) = 'unused' THEN 'Unused'
        WHEN lower({cols.text('capacityReservation/CapacityReservationStatus')}) = 'used' THEN 'Used'
        WHEN {cols.text('capacityReservation/CapacityReservationStatus')} IS NOT NULL
            THEN {cols.text('capacityReservation/CapacityReservationStatus')}
        WHEN {ut} LIKE '%UnusedBox%' OR {ut} LIKE '%UnusedDed%' OR {ut} LIKE '%Reservation:%' THEN 'Unused'
        WHEN {lit_type} IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage') THEN 'Used' END"""
    # Split cost allocation (EKS, ECS): a pod's or task's line carries its share of its instance's cost, and its
    # share of the instance's unused capacity, in its own columns; its unblended cost is 0, so totals are unchanged.
    split_parent = cols.text("splitLineItem/ParentResourceId")
    has_split = cols.name("splitLineItem/SplitCost") is not None
    split_cost = cols.money("splitLineItem/SplitCost")
    split_unused = cols.money("splitLineItem/UnusedCost")

    exprs = {
        "BilledCost": unblended,
        "EffectiveCost": f"CAST({effective} AS {MONEY})",
        "ListCost": f"COALESCE({cols.money('pricing/publicOnDemandCost')}, {unblended})",
        "BillingCurrency": f"COALESCE({cols.text('lineItem/CurrencyCode')}, 'USD')",
        "ChargePeriodStart": cols.timestamp("lineItem/UsageStartDate"),
        "ChargePeriodEnd": cols.timestamp("lineItem/UsageEndDate"),
        "ChargeCategory": case_map(lit_type, CHARGE_CATEGORY, "'Usage'"),
        "ChargeDescription": description,
        "ServiceName": cols.first_text("product/ProductName", "lineItem/ProductCode"),
        "ProviderName": "'AWS'",
        "BillingAccountId": cols.text("bill/PayerAccountId"),
        "SubAccountId": cols.text("lineItem/UsageAccountId"),
        "ResourceId": cols.text("lineItem/ResourceId"),
        "RegionId": region,
        "AvailabilityZone": cols.text("lineItem/AvailabilityZone"),
        "SkuId": cols.text("product/sku"),
        "PricingCategory": pricing,
        # A reservation's or savings plan's fee line carries, as its amortised cost, what of it went unused.
        "CommitmentDiscountId": f"""CASE WHEN {lit_type} IN ('DiscountedUsage', 'RIFee')
                                         THEN {cols.text('reservation/ReservationARN')}
                                         WHEN {lit_type} IN ('SavingsPlanCoveredUsage', 'SavingsPlanRecurringFee')
                                         THEN {cols.text('savingsPlan/SavingsPlanARN')} END""",
        "CommitmentDiscountStatus": f"""CASE WHEN {lit_type} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage')
                                             THEN 'Used'
                                             WHEN {lit_type} IN ('RIFee', 'SavingsPlanRecurringFee') THEN 'Unused'
                                             END""",
        "CommitmentDiscountType": f"""CASE WHEN {lit_type} IN ('DiscountedUsage', 'RIFee') THEN 'Reservation'
                                           WHEN {lit_type} IN ('SavingsPlanCoveredUsage', 'SavingsPlanRecurringFee')
                                           THEN 'Savings Plan' END""",
        # when the reservation or savings plan ends (COM003 looks ahead to it)
        "x_CommitmentEnd": f"""CASE WHEN {lit_type} IN ('DiscountedUsage', 'RIFee')
                                    THEN {cols.timestamp('reservation/EndTime')}
                                    WHEN {lit_type} IN ('SavingsPlanCoveredUsage', 'SavingsPlanRecurringFee')
                                    THEN {cols.timestamp('savingsPlan/EndTime')} END""",
        "ConsumedQuantity": cols.money("lineItem/UsageAmount"),
        "ConsumedUnit": cols.text("pricing/unit"),
        "CapacityReservationId": reservation_id,
        "CapacityReservationStatus": reservation_status,
        "x_SplitResourceId": f"CASE WHEN {split_parent} IS NOT NULL THEN {resource} END" if has_split else "NULL",
        "x_SplitParentId": split_parent if has_split else "NULL",
        "x_SplitMethod": f"CASE WHEN {split_parent} IS NOT NULL THEN 'aws-split-cost-allocation' END"
                         if has_split else "NULL",
        "x_SplitCost": split_cost,
        "x_SplitUnusedCost": split_unused,
        "Tags": _tag_entries(cols),
        "x_Provider": "'aws'",
        "x_UsageType": usage_type,
        "x_InstanceType": instance_type,
        **transfer_columns(transfer_kind, direction, transfer_from, transfer_to),
        "_kind": kind,
    }
    checks = [(c, "money") for c in ("lineItem/UnblendedCost", "lineItem/UsageAmount", "pricing/publicOnDemandCost",
                                     "splitLineItem/SplitCost", "splitLineItem/UnusedCost") if cols.name(c)]
    checks += [(c, "time") for c in ("lineItem/UsageStartDate", "lineItem/UsageEndDate", "reservation/EndTime",
                                    "savingsPlan/EndTime") if cols.name(c)]
    return exprs, [(name, k) for c, k in checks if (name := cols.name(c))]


# Registered here, not with @reads: mutmut leaves a decorated function unmutated (docs/mutation.md).
reads("aws-cur", "aws-cur2")(select)

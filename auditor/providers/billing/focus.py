"""FOCUS 1.0 to 1.3 exports, from any provider, normalized to the `costs` table, in SQL."""

from __future__ import annotations

from auditor.providers.billing.aws import instance_type_in, region_maps
from auditor.providers.billing.columns import Columns, base_type, case_map
from auditor.providers.billing.registry import reads
from auditor.providers.billing.transfer import transfer_columns
from auditor.providers.catalog import GPU_COUNT, Catalog

PROVIDERS = {"AWS": "aws", "Amazon Web Services": "aws", "Microsoft": "azure", "Azure": "azure",
             "Microsoft Azure": "azure", "Google": "gcp", "Google Cloud": "gcp", "GCP": "gcp",
             "Oracle": "oci", "OCI": "oci"}


def _structured(cols: Columns, column: str) -> bool:
    """Whether the file holds the column as a MAP or a STRUCT (Parquet, JSON objects), not as JSON text."""
    found = cols.name(column)
    if not found:
        return False
    return base_type(cols.types.get(found, "VARCHAR")) in ("MAP", "STRUCT")


def _json(cols: Columns, column: str) -> str:
    """The column as JSON: as it is where it is JSON text, else its MAP or STRUCT written as a JSON object."""
    return f"to_json({cols.ref(column)})" if _structured(cols, column) else cols.ref(column)


def _json_map(cols: Columns, column: str) -> str:
    """Tags as a MAP(VARCHAR, VARCHAR), from any encoding an export uses: JSON text (CSV, or a Parquet string),
    a Parquet MAP, a STRUCT (Parquet, or a JSON file's objects)."""
    if not cols.name(column):
        return "CAST(MAP() AS MAP(VARCHAR, VARCHAR))"
    if _structured(cols, column):
        return f"CAST(to_json({cols.ref(column)}) AS MAP(VARCHAR, VARCHAR))"
    return f"CAST(CAST(NULLIF(trim(CAST({cols.ref(column)} AS VARCHAR)), '') AS JSON) AS MAP(VARCHAR, VARCHAR))"


def _tags(cols: Columns) -> str:
    """The Tags object; on a FOCUS 1.3 allocated charge, with the allocated resource's own tags (AllocatedTags)
    over them, so that the provider's split is attributed to whom it was split to."""
    if not cols.name("AllocatedTags"):
        return _json_map(cols, "Tags")
    tags, allocated = _json_map(cols, "Tags"), _json_map(cols, "AllocatedTags")
    # Not map_concat: Spark refuses a key present in both.
    return (f"CASE WHEN {allocated} IS NULL THEN {tags} WHEN {tags} IS NULL THEN {allocated} ELSE "
            f"map_from_entries(list_concat(list_filter(map_entries({tags}), "
            f"lambda e: NOT list_contains(map_keys({allocated}), e.key)), map_entries({allocated}))) END")


def select(cols: Columns, catalog: Catalog) -> tuple[dict[str, str], list[tuple[str, str]]]:
    _, names = region_maps(catalog)
    provider = case_map(cols.text("ProviderName"), PROVIDERS, f"lower({cols.text('ProviderName')})")
    desc = cols.text("ChargeDescription")
    d = f"COALESCE({desc}, '')"
    usage_type = cols.text("x_UsageType")
    ut = f"COALESCE({usage_type}, '')"
    meter = f"COALESCE({cols.first_text('x_SkuMeterSubcategory', 'SkuMeter')}, '') || ' ' || {d}"

    instance_type = "COALESCE(" + ", ".join([
        f"json_extract_string({_json(cols, 'SkuPriceDetails')}, '$.InstanceType')" if cols.name("SkuPriceDetails")
        else "NULL",
        f"json_extract_string({cols.ref('x_SkuDetails')}, '$.ServiceType')" if cols.name("x_SkuDetails")
        else "NULL",
        f"NULLIF(regexp_extract({ut}, '(?:Usage|UnusedBox|Reservation)[^:]*:([a-z0-9.-]+)$', 1), '')",
        instance_type_in(d, cols.raw_text("ChargeDescription")),
        f"CASE WHEN {cols.raw_text('ChargeDescription')} LIKE '%Standard%' "
        f"THEN NULLIF(regexp_extract({d}, '(Standard_[A-Za-z0-9_]+)', 1), '') END",
        f"NULLIF(regexp_extract({d}, '\\b([acgn][0-9]-[a-z]+-[0-9]+g?)\\b', 1), '')",
    ]) + ")"

    # AWS descriptions read `$0.02 per GB - US West (Oregon) data transfer to EU (Ireland)`.
    aws_to = f"regexp_extract({d}, ' - (.+) data transfer to (.+)$', ['src', 'dst'])"
    aws_from = f"regexp_extract({d}, ' - (.+) data transfer from (.+)$', ['dst', 'src'])"
    transfer_kind = f"""CASE
        WHEN {ut} LIKE '%-AWS-Out-Bytes' OR {ut} LIKE '%-AWS-In-Bytes' THEN 'inter_region'
        WHEN {ut} LIKE '%xAZ%Bytes' OR {ut} LIKE '%DataTransfer-Regional-Bytes' THEN 'inter_zone'
        WHEN {ut} LIKE '%DataTransfer-Out-Bytes' OR {ut} LIKE '%DataTransfer-In-Bytes' THEN 'internet'
        WHEN {d} SIMILAR TO '.* - .+ data transfer (to|from) .+' THEN 'inter_region'
        WHEN {meter} ILIKE '%Inter-Region%' OR {meter} ILIKE '%Inter Region%'
             OR {meter} ILIKE '%Intra Continent Data Transfer%' OR {meter} ILIKE '%Inter Continent Data Transfer%'
            THEN 'inter_region'
        WHEN {meter} ILIKE '%Inter Zone%' OR {meter} ILIKE '%Inter-Zone%' THEN 'inter_zone'
        WHEN {d} ILIKE '%data transfer out%' OR {d} ILIKE '%data transfer in %'
             OR {meter} ILIKE '%Data Transfer Out%' OR {meter} ILIKE '%Internet Egress%' THEN 'internet'
        END"""
    direction = f"""CASE
        WHEN {ut} LIKE '%-In-Bytes' OR {d} SIMILAR TO '.* data transfer from .+' OR {d} ILIKE '%data transfer in %'
             OR {meter} ILIKE '%Ingress%' OR {meter} ILIKE '%Data Transfer In%' THEN 'in'
        ELSE 'out' END"""
    region = cols.text("RegionId")
    transfer_from = (f"COALESCE({case_map(f'NULLIF(({aws_to}).src, {chr(39)}{chr(39)})', names)}, "
                     f"{case_map(f'NULLIF(({aws_from}).src, {chr(39)}{chr(39)})', names)}, {region})")
    transfer_to = (f"COALESCE({case_map(f'NULLIF(({aws_to}).dst, {chr(39)}{chr(39)})', names)}, "
                   f"{case_map(f'NULLIF(({aws_from}).dst, {chr(39)}{chr(39)})', names)})")
    category = cols.text("ServiceCategory")
    kind = f"""CASE
        WHEN ({transfer_kind}) IS NOT NULL THEN 'transfer'
        WHEN {category} = 'Storage' THEN 'storage'
        WHEN {category} IN ('Compute', 'AI and Machine Learning') AND ({instance_type}) IS NOT NULL
            THEN 'compute'
        WHEN {category} = 'Compute' THEN 'compute'
        ELSE 'other' END"""
    price_details = _json(cols, "SkuPriceDetails") if cols.name("SkuPriceDetails") else None
    # FOCUS 1.3 allocated charges (a provider's split of a shared resource): ResourceId is the resource split,
    # AllocatedResourceId what it was split to; a split charge with no allocated resource is its unused part.
    method = cols.text("AllocatedMethodId")
    allocated = cols.text("AllocatedResourceId")
    exprs = {
        "BilledCost": cols.money("BilledCost"),
        "EffectiveCost": cols.money("EffectiveCost"),
        "ListCost": cols.money("ListCost"),
        "BillingCurrency": cols.text("BillingCurrency"),
        "ChargePeriodStart": cols.timestamp("ChargePeriodStart"),
        "ChargePeriodEnd": cols.timestamp("ChargePeriodEnd"),
        "ChargeCategory": cols.text("ChargeCategory"),
        "ChargeDescription": desc,
        "ServiceName": cols.text("ServiceName"),
        "ServiceCategory": category,
        "ProviderName": cols.text("ProviderName"),
        "BillingAccountId": cols.text("BillingAccountId"),
        "SubAccountId": cols.text("SubAccountId"),
        "ResourceId": cols.text("ResourceId"),
        "RegionId": region,
        "AvailabilityZone": cols.text("AvailabilityZone"),
        "SkuId": cols.text("SkuId"),
        "PricingCategory": cols.text("PricingCategory"),
        "CommitmentDiscountId": cols.text("CommitmentDiscountId"),
        "CommitmentDiscountStatus": cols.text("CommitmentDiscountStatus"),
        "CommitmentDiscountType": cols.text("CommitmentDiscountType"),
        "CommitmentDiscountQuantity": cols.money("CommitmentDiscountQuantity"),
        "CommitmentDiscountUnit": cols.text("CommitmentDiscountUnit"),
        "CapacityReservationId": cols.text("CapacityReservationId"),
        "CapacityReservationStatus": cols.text("CapacityReservationStatus"),
        "ContractApplied": cols.text("ContractApplied"),
        "x_SplitMethod": method,
        "x_SplitResourceId": f"CASE WHEN {method} IS NOT NULL THEN {allocated} END",
        "x_SplitParentId": f"CASE WHEN {method} IS NOT NULL THEN {cols.text('ResourceId')} END",
        "x_SplitCost": f"CASE WHEN {method} IS NOT NULL AND {allocated} IS NOT NULL "
                       f"THEN {cols.money('EffectiveCost')} END",
        "x_SplitUnusedCost": f"CASE WHEN {method} IS NOT NULL AND {allocated} IS NULL "
                             f"THEN {cols.money('EffectiveCost')} END",
        "ConsumedQuantity": cols.money("ConsumedQuantity"),
        "ConsumedUnit": cols.text("ConsumedUnit"),
        "Tags": _tags(cols),
        "x_Provider": provider,
        "x_UsageType": usage_type,
        "x_InstanceType": instance_type,
        **transfer_columns(transfer_kind, direction, transfer_from, transfer_to),
        "_kind": kind,
        # SkuPriceDetails' GpuCount (FOCUS 1.2+): the GPUs per unit the SKU is priced in, the export's own word.
        # Trusted over the catalog, and what makes a line GPU spend where the catalog does not know its type.
        "_gpu_count": (f"TRY_CAST(json_extract_string({price_details}, '$.GpuCount') AS {GPU_COUNT})"
                       if price_details else f"CAST(NULL AS {GPU_COUNT})"),
    }
    checks = [(c, "money") for c in ("BilledCost", "EffectiveCost", "ListCost", "ConsumedQuantity",
                                     "CommitmentDiscountQuantity")]
    checks += [(c, "time") for c in ("ChargePeriodStart", "ChargePeriodEnd")]
    checks += [(c, "json") for c in ("Tags", "SkuPriceDetails", "AllocatedTags") if not _structured(cols, c)]
    return exprs, [(name, k) for c, k in checks if (name := cols.name(c))]


# Registered here, not with @reads: mutmut leaves a decorated function unmutated (docs/mutation.md).
reads("focus-1.0", "focus-1.1", "focus-1.2", "focus-1.3")(select)

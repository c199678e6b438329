"""GCP Cloud Billing export to BigQuery (standard or detailed), as exported files: CSV with dotted column
names (`sku.description`), newline-delimited JSON or Parquet with nested records. Normalized in SQL.

Net cost is `cost` plus the sum of `credits.amount` (credits are negative). Repeated records (labels,
credits) are real lists in JSON and Parquet, and JSON or Python-repr strings in CSV; both are read.
"""

from __future__ import annotations

from auditor.catalog import Catalog
from auditor.providers.columns import MONEY, Columns, case_map, lit

# Separate GPU SKUs: "Nvidia Tesla A100 80GB GPU running in Americas", "Spot Preemptible Nvidia L4 GPU ...".
GPU_SKUS = {"Tesla T4": "T4", "T4": "T4", "Tesla V100": "V100", "Tesla A100": "A100", "A100": "A100",
            "Tesla A100 80GB": "A100-80GB", "A100 80GB": "A100-80GB", "H100 80GB": "H100", "H100": "H100",
            "H100 80GB Mega": "H100", "H200": "H200", "L4": "L4", "Tesla P100": "P100", "Tesla P4": "P4"}
BUILTIN = {"A2": "A100", "A3": "H100", "G2": "L4"}
BUILTIN_RE = "^(?:Spot Preemptible )?(A2|A3|G2) Instance (?:Core|Ram)"
KV_RE = r"""['"]key['"]\s*:\s*['"]([^'"]*)['"]\s*,\s*['"]value['"]\s*:\s*['"]([^'"]*)['"]"""
AMOUNT_RE = r"""['"]amount['"]\s*:\s*(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)"""


def _repeated_kv(cols: Columns, name: str) -> str:
    """A repeated (key, value) record as a MAP, from a real list or from its string form in CSV."""
    found = cols.name(name)
    if not found:
        return "CAST(MAP() AS MAP(VARCHAR, VARCHAR))"
    ref = cols.ref(name)
    if cols.fields:  # JSON or Parquet: a real LIST of STRUCTs
        listed = f"list_filter({ref}, lambda e: e.key IS NOT NULL)"
        return (f"CAST(map_from_entries(list_transform({listed}, "
                "lambda e: {'key': e.key, 'value': CAST(e.value AS VARCHAR)})) AS MAP(VARCHAR, VARCHAR))")
    text = f"CAST({ref} AS VARCHAR)"
    return (f"CAST(map(regexp_extract_all({text}, {lit(KV_RE)}, 1), regexp_extract_all({text}, {lit(KV_RE)}, 2)) "
            "AS MAP(VARCHAR, VARCHAR))")


def _credits(cols: Columns) -> str:
    found = cols.name("credits")
    if not found:
        return f"CAST(0 AS {MONEY})"
    ref = cols.ref("credits")
    if cols.fields:  # nested: LIST of STRUCT(name, amount, ...)
        return f"COALESCE(CAST(list_sum(list_transform({ref}, lambda c: CAST(c.amount AS {MONEY}))) AS {MONEY}), 0)"
    text = f"CAST({ref} AS VARCHAR)"
    return (f"COALESCE(CAST(list_sum(list_transform(regexp_extract_all({text}, {lit(AMOUNT_RE)}, 1), "
            f"lambda a: CAST(CAST(a AS DOUBLE) AS {MONEY}))) AS {MONEY}), 0)")


def select(cols: Columns, catalog: Catalog) -> tuple[dict[str, str], list[tuple[str, str]]]:
    sku = cols.text("sku.description", "sku_description")
    s = f"COALESCE({sku}, '')"
    service = cols.text("service.description", "service_description")
    system_labels = _repeated_kv(cols, "system_labels")
    machine = f"NULLIF({system_labels}['compute.googleapis.com/machine_spec'], '')"
    gpu_name = f"regexp_extract({s}, '^(?:Spot Preemptible |Preemptible )?Nvidia (.+?) GPU', 1)"
    gpu_sku = case_map(gpu_name, GPU_SKUS)
    credits_text = f"CAST({cols.ref('credits')} AS VARCHAR)" if cols.name("credits") else "''"
    net = f"({cols.money('cost')} + {_credits(cols)})"
    transfer_kind = f"""CASE
        WHEN {s} SIMILAR TO 'Network Inter Region (Data Transfer Out|Egress|Ingress) from .+' THEN 'inter_region'
        WHEN {s} SIMILAR TO 'Network Internet (Data Transfer Out|Egress|Ingress) from .+' THEN 'internet'
        WHEN {s} LIKE 'Network Inter Zone%' THEN 'inter_zone'
        WHEN {s} LIKE 'Network Intra Zone%' THEN 'intra_region'
        WHEN {s} LIKE 'Download Worldwide Destinations%' THEN 'internet'
        END"""
    src_dst = f"regexp_extract({s}, ' from (.+) to (.+)$', ['src', 'dst'])"
    kind = f"""CASE
        WHEN ({transfer_kind}) IS NOT NULL THEN 'transfer'
        WHEN {s} ILIKE '%GPU%' OR {s} SIMILAR TO '.*(Instance Core|Instance Ram|Core running|Ram running).*'
             OR {machine} IS NOT NULL THEN 'compute'
        WHEN {s} ILIKE '%Storage%' OR {s} ILIKE '%PD Capacity%' OR {s} ILIKE '%Snapshot%' THEN 'storage'
        ELSE 'other' END"""
    cost_type = cols.text("cost_type")
    region = cols.first_text("location.region", "location_region", "location.location")
    unit = cols.first_text("usage.pricing_unit", "usage_pricing_unit", "usage.unit", "usage_unit")
    exprs = {
        "BilledCost": f"CAST({net} AS {MONEY})",
        "EffectiveCost": f"CAST({net} AS {MONEY})",
        "ListCost": f"COALESCE({cols.money('cost_at_list')}, {cols.money('cost')})",
        "BillingCurrency": cols.text("currency"),
        "ChargePeriodStart": cols.timestamp("usage_start_time"),
        "ChargePeriodEnd": cols.timestamp("usage_end_time"),
        "ChargeCategory": f"""CASE WHEN {s} LIKE 'Commitment%' THEN 'Purchase'
            ELSE {case_map(cost_type, {'regular': 'Usage', 'tax': 'Tax', 'adjustment': 'Adjustment',
                                       'rounding_error': 'Adjustment'}, "'Usage'")} END""",
        "ChargeDescription": sku,
        "ServiceName": service,
        "ProviderName": "'Google Cloud'",
        "BillingAccountId": cols.text("billing_account_id"),
        "SubAccountId": cols.text("project.id", "project_id"),
        "ResourceId": cols.first_text("resource.global_name", "resource.name", "resource_global_name",
                                      "resource_name"),
        "RegionId": region,
        "AvailabilityZone": cols.text("location.zone", "location_zone"),
        "SkuId": cols.text("sku.id", "sku_id"),
        "PricingCategory": f"""CASE WHEN {s} LIKE 'Spot Preemptible %' OR {s} LIKE 'Preemptible %' THEN 'Dynamic'
            WHEN {credits_text} LIKE '%COMMITTED_USAGE_DISCOUNT%' OR {s} LIKE 'Commitment%' THEN 'Committed'
            ELSE 'Standard' END""",
        "ConsumedQuantity": f"COALESCE({cols.money('usage.amount_in_pricing_units', 'usage_amount_in_pricing_units')}, "
                            f"{cols.money('usage.amount', 'usage_amount')})",
        "ConsumedUnit": unit,
        "Tags": _repeated_kv(cols, "labels"),
        "x_Provider": "'gcp'",
        "x_UsageType": sku,
        "x_InstanceType": machine,
        # The GPU a line bills for, where the line itself says: a GPU SKU, or the core and RAM of a machine
        # family with built-in GPUs.
        "_gpu_count": f"CASE WHEN {gpu_sku} IS NOT NULL THEN 1 END",  # a GPU SKU bills GPU-hours
        "_gpu": f"COALESCE({gpu_sku}, {case_map(f'regexp_extract({s}, {lit(BUILTIN_RE)}, 1)', BUILTIN)})",
        "x_TransferKind": transfer_kind,
        "x_TransferDirection": f"CASE WHEN ({transfer_kind}) IS NOT NULL THEN "
                               f"CASE WHEN {s} LIKE '%Ingress%' THEN 'in' ELSE 'out' END END",
        "x_TransferFrom": f"CASE WHEN ({transfer_kind}) IS NOT NULL THEN "
                          f"COALESCE(NULLIF(({src_dst}).src, ''), {region}) END",
        "x_TransferTo": f"CASE WHEN ({transfer_kind}) IS NOT NULL THEN NULLIF(({src_dst}).dst, '') END",
        "_kind": kind,
    }
    checks = [(c, "money") for c in ("cost",) if cols.name(c)]
    checks += [(c, "time") for c in ("usage_start_time", "usage_end_time") if cols.name(c)]
    return exprs, [(cols.name(c), k) for c, k in checks]

"""GCP Cloud Billing export to BigQuery (standard or detailed), as exported files: CSV with dotted column
names (`sku.description`), newline-delimited JSON or Parquet with nested records. Normalized in SQL.

Net cost is `cost` plus the sum of `credits.amount` (credits are negative). Repeated records (labels,
credits) are real lists in JSON and Parquet, and JSON or Python-repr strings in CSV; both are read.
"""

from __future__ import annotations

from auditor.providers.billing.columns import MONEY, Columns, case_map, money
from auditor.providers.billing.registry import reads
from auditor.providers.billing.transfer import transfer_columns
from auditor.providers.catalog import Catalog
from auditor.sql import lit

# Separate GPU SKUs: "Nvidia Tesla A100 80GB GPU running in Americas", "Spot Preemptible Nvidia L4 GPU ...".
GPU_SKUS = {"Tesla T4": "T4", "T4": "T4", "Tesla V100": "V100", "Tesla A100": "A100", "A100": "A100",
            "Tesla A100 80GB": "A100-80GB", "A100 80GB": "A100-80GB", "H100 80GB": "H100", "H100": "H100",
            "H100 80GB Mega": "H100", "H200": "H200", "L4": "L4", "Tesla P100": "P100", "Tesla P4": "P4"}
BUILTIN = {"A2": "A100", "A3": "H100", "G2": "L4"}
BUILTIN_RE = "^(?:Spot Preemptible )?(A2|A3|G2) Instance (?:Core|Ram)"
KV_RE = r"""['"]key['"]\s*:\s*['"]([^'"]*)['"]\s*,\s*['"]value['"]\s*:\s*['"]([^'"]*)['"]"""
# (quoted or not; with `_`: `1_000` whole, which the amount's cast refuses, rather than its `1`)
AMOUNT_RE = r"""['"]amount['"]\s*:\s*['"]?(-?[0-9._]+(?:[eE][-+]?[0-9]+)?)"""
TYPE_RE = r"""['"]type['"]\s*:\s*['"]([^'"]*)['"]"""


def _is_list(cols: Columns, name: str) -> bool:
    """A repeated record read as a real LIST (JSON or Parquet): `STRUCT(...)[]`, or `JSON[]` where every row's
    list is empty and DuckDB could not tell the element type."""
    return cols.types.get(cols.name(name) or "", "").endswith("[]")


def _field(cols: Columns, name: str, field: str, regex: str, group: int) -> str:
    """One field of every element of a repeated record, as a VARCHAR[]: from a real list through its JSON
    form (whatever the element type), from JSON text, or from the Python-repr text of CSV exports."""
    ref = cols.ref(name)
    if _is_list(cols, name):
        return f"json_extract_string(to_json({ref}), {lit('$[*].' + field)})"
    text = f"CAST({ref} AS VARCHAR)"
    return (f"CASE WHEN json_valid({text}) THEN json_extract_string({text}, {lit('$[*].' + field)}) "
            f"ELSE regexp_extract_all({text}, {lit(regex)}, {group}) END")


def _repeated_kv(cols: Columns, name: str) -> str:
    """A repeated (key, value) record as a MAP, from a real list or from its string form in CSV."""
    if not cols.name(name):
        return "CAST(MAP() AS MAP(VARCHAR, VARCHAR))"
    keys, values = _field(cols, name, "key", KV_RE, 1), _field(cols, name, "value", KV_RE, 2)
    return f"CAST(map({keys}, {values}) AS MAP(VARCHAR, VARCHAR))"


def _credits(cols: Columns) -> str:
    """The sum of `credits.amount`, exact: each amount goes to DECIMAL from its text, never through a DOUBLE, and
    must be a plain number (`1_000` is refused, as in any amount: columns.money)."""
    if not cols.name("credits"):
        return f"CAST(0 AS {MONEY})"
    amounts = _field(cols, "credits", "amount", AMOUNT_RE, 1)
    return f"COALESCE(CAST(list_sum(list_transform({amounts}, lambda a: {money('a', text=True)})) AS {MONEY}), 0)"


def credit_amounts(cols: Columns, expr: str) -> str:
    """The amounts of the credits `expr` holds (the column's value), as text: what diagnose.py looks through."""
    if _is_list(cols, "credits"):
        return f"json_extract_string(to_json({expr}), '$[*].amount')"
    text = f"CAST({expr} AS VARCHAR)"
    return (f"CASE WHEN json_valid({text}) THEN json_extract_string({text}, '$[*].amount') "
            f"ELSE regexp_extract_all({text}, {lit(AMOUNT_RE)}, 1) END")


def _money(cols: Columns, *candidates: str) -> str:
    """A number as DECIMAL. JSON and Parquet exports hold money as DOUBLE; its shortest text (`0.379332`) is
    what the export meant, where a direct cast would give 0.379331999999999980."""
    found = cols.name(*candidates)
    if found and cols.types.get(found) in ("DOUBLE", "FLOAT", "REAL"):
        return f"CAST(CAST({cols.ref(found)} AS VARCHAR) AS {MONEY})"
    return cols.money(*candidates)


def select(cols: Columns, catalog: Catalog) -> tuple[dict[str, str], list[tuple[str, str]]]:
    sku = cols.text("sku.description", "sku_description")
    s = f"COALESCE({sku}, '')"
    service = cols.text("service.description", "service_description")
    system_labels = _repeated_kv(cols, "system_labels")
    machine = f"NULLIF({system_labels}['compute.googleapis.com/machine_spec'], '')"
    gpu_name = f"regexp_extract({s}, '^(?:Spot Preemptible |Preemptible )?Nvidia (.+?) GPU', 1)"
    gpu_sku = case_map(gpu_name, GPU_SKUS)
    # Resource-based and spend-based commitments (COMMITTED_USAGE_DISCOUNT[_DOLLAR_BASE]) credit the usage they cover.
    committed = (f"len(list_filter({_field(cols, 'credits', 'type', TYPE_RE, 1)}, "
                 "lambda t: starts_with(t, 'COMMITTED_USAGE_DISCOUNT'))) > 0") if cols.name("credits") else "false"
    net = f"({_money(cols, 'cost')} + {_credits(cols)})"
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
    quantity = _money(cols, "usage.amount_in_pricing_units", "usage_amount_in_pricing_units")
    unit = cols.first_text("usage.pricing_unit", "usage_pricing_unit", "usage.unit", "usage_unit")
    project = cols.text("project.id", "project_id")
    resource = cols.first_text("resource.global_name", "resource.name", "resource_global_name", "resource_name")
    unused_reservation = (f"lower(COALESCE({system_labels}['compute.googleapis.com/is_unused_reservation'], '')) "
                          "= 'true'")
    exprs = {
        "BilledCost": f"CAST({net} AS {MONEY})",
        "EffectiveCost": f"CAST({net} AS {MONEY})",
        "ListCost": f"COALESCE({_money(cols, 'cost_at_list')}, {_money(cols, 'cost')})",
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
        "SubAccountId": project,
        "ResourceId": resource,
        "RegionId": region,
        "AvailabilityZone": cols.text("location.zone", "location_zone"),
        "SkuId": cols.text("sku.id", "sku_id"),
        "PricingCategory": f"""CASE WHEN {s} LIKE 'Spot Preemptible %' OR {s} LIKE 'Preemptible %' THEN 'Dynamic'
            WHEN {committed} OR {s} LIKE 'Commitment%' THEN 'Committed'
            WHEN {cost_type} = 'tax' THEN NULL  -- as FOCUS has it: a tax has no pricing category
            ELSE 'Standard' END""",
        # A reservation's idle capacity bills as its machine's SKUs with the system label is_unused_reservation.
        "CapacityReservationId": f"CASE WHEN {unused_reservation} THEN COALESCE({resource}, 'gcp-reservation:' || "
                                 f"COALESCE({project}, '-') || ':' || COALESCE({region}, '-') || ':' || "
                                 f"COALESCE({machine}, {sku}, '-')) END",
        "CapacityReservationStatus": f"CASE WHEN {unused_reservation} THEN 'Unused' END",
        "ConsumedQuantity": f"COALESCE({quantity}, {_money(cols, 'usage.amount', 'usage_amount')})",
        "ConsumedUnit": unit,
        "Tags": _repeated_kv(cols, "labels"),
        "x_Provider": "'gcp'",
        "x_UsageType": sku,
        "x_InstanceType": machine,
        # The GPU a line bills for, where the line itself says: a GPU SKU, or the core and RAM of a machine
        # family with built-in GPUs.
        # A GPU SKU bills GPU-hours, one GPU per unit. The core and RAM lines of a GPU machine bill vCPU-hours
        # and GiB-hours, no GPU-hours (its GPUs come on their own SKU line): 0, not the machine's GPU count
        # from the catalog, so that GPU-hours do not count core-hours.
        "_gpu_count": f"CASE WHEN {gpu_sku} IS NOT NULL THEN 1 WHEN {machine} IS NOT NULL OR "
                      f"regexp_matches({s}, {lit(BUILTIN_RE)}) THEN 0 END",
        "_gpu": f"COALESCE({gpu_sku}, {case_map(f'regexp_extract({s}, {lit(BUILTIN_RE)}, 1)', BUILTIN)})",
        **transfer_columns(transfer_kind, f"CASE WHEN {s} LIKE '%Ingress%' THEN 'in' ELSE 'out' END",
                           f"COALESCE(NULLIF(({src_dst}).src, ''), {region})", f"NULLIF(({src_dst}).dst, '')"),
        "_kind": kind,
    }
    checks = [(c, "money") for c in ("cost",) if cols.name(c)]
    checks += [(c, "time") for c in ("usage_start_time", "usage_end_time") if cols.name(c)]
    checks += [(c, "credits") for c in ("credits",) if cols.name(c)]
    return exprs, [(name, k) for c, k in checks if (name := cols.name(c))]


# Registered here, not with @reads: mutmut leaves a decorated function unmutated (docs/mutation.md).
reads("gcp-billing")(select)

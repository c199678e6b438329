"""The floor: a bare DuckDB query that only scans the billing files and computes the aggregates the audit's
rules read (spend per resource, transfer volume per usage type, spend per team tag, totals per currency and
category), with no normalization, classification or report. Nothing can do the audit's work faster than
scanning the same bytes, so this is the yardstick for `gpu-auditor audit`.

    python benchmarks/floor.py cur-parquet FILE...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb

# The few raw columns each format's aggregates need, by role.
COLUMNS = {
    "cur-parquet": {"resource": "line_item_resource_id", "currency": "line_item_currency_code",
                    "cost": "line_item_unblended_cost", "amount": "line_item_usage_amount",
                    "usage_type": "line_item_usage_type", "start": "line_item_usage_start_date",
                    "team": "resource_tags_user_team", "category": "product_product_family"},
    "cur-csv-gz": {"resource": "lineItem/ResourceId", "currency": "lineItem/CurrencyCode",
                   "cost": "lineItem/UnblendedCost", "amount": "lineItem/UsageAmount",
                   "usage_type": "lineItem/UsageType", "start": "lineItem/UsageStartDate",
                   "team": "resourceTags/user:team", "category": "product/productFamily"},
    "focus-parquet": {"resource": "ResourceId", "currency": "BillingCurrency", "cost": "BilledCost",
                      "amount": "ConsumedQuantity", "usage_type": "x_UsageType", "start": "ChargePeriodStart",
                      "team": "Tags", "category": "ServiceCategory"},
}
COLUMNS["cur-csv"] = COLUMNS["cur-csv-gz"]
BASE = {"churn-parquet": "cur-parquet", "parts-csv-gz": "cur-csv-gz", "tiny-files": "cur-csv",
        "tagchurn-parquet": "cur-parquet"}  # generate.BASE


def columns(fmt: str) -> dict[str, str]:
    """The raw columns of a format or of one of generate.py's shapes (which take a format's columns)."""
    return COLUMNS[BASE.get(fmt, fmt)]


def sources(args: list[str]) -> list[str]:
    """Files, and a folder as the glob of its data files: a folder of many parts is read as one scan."""
    out = []
    for a in args:
        if Path(a).is_dir():
            suffix = next(s for s in (".parquet", ".csv.gz", ".csv") if any(Path(a).rglob("*" + s)))
            out.append(f"{a}/**/*{suffix}")
        else:
            out.append(a)
    return out


def floor_sql(fmt: str, files: list[str]) -> str:
    c = {k: f'"{v}"' for k, v in columns(fmt).items()}
    listed = "[" + ", ".join(f"'{f}'" for f in sources(files)) + "]"
    source = f"read_parquet({listed})" if fmt.endswith("parquet") else f"read_csv({listed})"
    team = f"json_extract_string({c['team']}, '$.team')" if fmt.startswith("focus") else c["team"]
    return f"""
        SELECT GROUPING(resource, usage_type, team, category) AS g, resource, usage_type, team, category, currency,
               sum(cost) AS cost, sum(amount) AS amount, count(*) AS lines,
               CAST(max(start) AS VARCHAR) AS last
        FROM (SELECT {c['resource']} AS resource, {c['currency']} AS currency, {c['cost']} AS cost,
                     {c['amount']} AS amount, {c['start']} AS start, {team} AS team, {c['category']} AS category,
                     CASE WHEN {c['usage_type']} LIKE '%Bytes' THEN {c['usage_type']} END AS usage_type
              FROM {source})
        GROUP BY GROUPING SETS ((resource, currency), (usage_type, currency), (team, currency),
                                (category, currency), (currency))"""


def main() -> None:
    fmt, files = sys.argv[1], sys.argv[2:]
    con = duckdb.connect()
    rows = con.execute(floor_sql(fmt, files)).fetchall()
    total = {r[5]: float(r[6]) for r in rows if r[1] is None and r[2] is None and r[3] is None and r[4] is None
             and r[0] == 15}
    resources = sum(1 for r in rows if r[0] == 7 and r[1] is not None)
    print(json.dumps({"total": total, "lines": sum(r[8] for r in rows if r[0] == 15), "resources": resources,
                      "groups": len(rows)}))


if __name__ == "__main__":
    main()

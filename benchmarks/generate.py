"""A deterministic generator of realistic billing exports at any size, for the benchmarks.

One quarter (2026-Q3, three monthly files per format) of an ML organisation's AWS bill: GPU instances
(p3, p4d, p5, g5, g6) and other instances (m5, c5, r6i, t3), spot and on-demand, EBS and S3 storage,
transfer between regions and to the internet, CloudWatch, tax lines; cost-allocation tags present on most
resources and missing on some. Written as AWS CUR (legacy) Parquet in the Athena spelling
(`line_item_usage_type`), the same CUR as gzip CSV in the classic spelling (`lineItem/UsageType`), and FOCUS 1.0
Parquet; plus a matching inventory snapshot (the GPU machines, their utilisation per month, spot training jobs)
and a policy.

Beside those, the shapes that a large ML organisation's bill takes (issue 15):

- `churn-parquet`, high churn: the same CUR Parquet columns, but tens of thousands of short-lived nodes
  (autoscaled and spot, each with its own id, living 4 to 20 hours), four lines an hour each (the
  instance-hour and its transfer), a description that differs on every line (the spot price of the hour, the
  hour itself), and three in five nodes untagged. About 48 lines per resource: 21,000 resources at 1M lines.
- `parts-csv-gz`, many parts: today's CUR as gzip CSV, each month cut into 667 parts (2,001 files), as AWS
  delivers a large CUR; the same lines, so the same totals, as `cur-csv-gz`.
- `tiny-files`, a folder of 5,000 tiny CUR CSV files of 20 lines each (100,000 lines whatever --lines says).

And issue 28's:

- `tagchurn-parquet`, heavy tag churn: the high-churn columns and a fourth tag, `run`, over nodes that live 1 to
  5 days, thousands per team: the owner changes every 6 to 29 hours, the training run every 1 to 3 hours, and a
  third of the nodes move to another team halfway through the quarter (tags changed mid-quarter). About 300
  lines per node and two lines per distinct node and tag set. With ties made on purpose, for the choices
  among equals that must be broken by a stated key: every line of one node in seven costs exactly $1 (so its
  instance-hours and each transfer usage type cost the same each day, and such nodes tie for the top of a
  transfer flow), and the last hour of every node's life is billed under two tag sets of its own, half the
  lines each (two tag sets charged last, at equal cost for those nodes).

Every line is made by DuckDB SQL from `range()` with hash-based pseudo-random columns: no Python loop over
lines, so 10M lines take seconds, and the same size always gives the same bytes of data.

    python benchmarks/generate.py --lines 1000000 --out /tmp/bench-1m
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import duckdb

MONTHS = ("2026-07-01", "2026-08-01", "2026-09-01")
FORMATS = ("cur-parquet", "cur-csv-gz", "focus-parquet")
SHAPES = ("churn-parquet", "parts-csv-gz", "tiny-files", "tagchurn-parquet")  # issues 15 and 28, beside today's
BASE = {"churn-parquet": "cur-parquet", "parts-csv-gz": "cur-csv-gz", "tiny-files": "cur-csv",
        "tagchurn-parquet": "cur-parquet"}  # their columns
PARTS = 667  # per month: 2,001 gzip parts
TINY_FILES, TINY_LINES = 5000, 20
QUARTER_HOURS = 92 * 24
CHURN_LINES = 48  # lines per short-lived resource, on average: 4 to 20 hours of 4 lines
TAGCHURN_LIFE = (24, 97)  # hours a node of the heavy tag churn shape lives: 24 + (0 to 96)
TAGCHURN_LINES = 4 * (TAGCHURN_LIFE[0] + (TAGCHURN_LIFE[1] - 1) // 2)  # lines per node, on average
VERSION = 3  # of the generated data: a cached data set of another version is made again
GPU_TYPES = {"p4d.24xlarge": 21.96, "p5.48xlarge": 55.04, "g5.xlarge": 1.006, "g5.12xlarge": 5.672,
             "g6.xlarge": 0.8048, "p3.2xlarge": 3.06}
OTHER_TYPES = {"m5.xlarge": 0.192, "c5.2xlarge": 0.34, "r6i.large": 0.126, "t3.medium": 0.0416}
REGIONS = {"us-east-1": ("USE1", "US East (N. Virginia)"), "us-west-2": ("USW2", "US West (Oregon)"),
           "eu-west-1": ("EU", "EU (Ireland)")}
TEAMS = ("vision", "nlp", "platform")
PROJECTS = {"vision": "detector", "nlp": "llm-finetune", "platform": "inference"}
ACCOUNTS = ("444455556666", "777788889999", "123456789012")
PAYER = "111122223333"


def _arr(values) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _pick(values, h: str) -> str:
    """One of `values`, chosen by the hash expression h (DuckDB lists are 1-based)."""
    return f"{_arr(values)}[1 + CAST(({h}) % {len(values)} AS BIGINT)]"


def resources_sql(n_resources: int) -> str:
    """One row per resource: what it is, where, whose. Resource r's kind, type, region and tags are fixed,
    so its lines agree with each other and with the inventory."""
    gpu_rates = " ".join(f"WHEN '{t}' THEN {p}" for t, p in {**GPU_TYPES, **OTHER_TYPES}.items())
    return f"""
    SELECT r, kind, itype, region, account, spot, team,
        CASE WHEN hash(r, 16) % 10 < 7 THEN 'user' || (hash(r, 17) % 40) || '@example.com' END AS owner,
        CASE WHEN team IS NOT NULL AND hash(r, 18) % 10 < 8 THEN project END AS project,
        CASE kind WHEN 'gpu' THEN 'i-0gpu' WHEN 'compute' THEN 'i-0cpu' WHEN 'transfer' THEN 'i-0net'
                  WHEN 'ebs' THEN 'vol-0' WHEN 's3' THEN 'ml-data-' ELSE NULL END
            || lpad(to_hex(r), 11, '0') AS rid,
        CASE itype {gpu_rates} END AS od_rate
    FROM (
        SELECT r,
            CASE WHEN k < 30 THEN 'gpu' WHEN k < 52 THEN 'compute' WHEN k < 70 THEN 'ebs' WHEN k < 80 THEN 's3'
                 WHEN k < 94 THEN 'transfer' ELSE 'other' END AS kind,
            CASE WHEN k < 30 THEN {_pick(GPU_TYPES, 'hash(r, 12)')}
                 WHEN k < 52 OR (k >= 80 AND k < 94) THEN {_pick(OTHER_TYPES, 'hash(r, 12)')} END AS itype,
            {_pick(REGIONS, 'hash(r, 11)')} AS region,
            {_pick(ACCOUNTS, 'hash(r, 15)')} AS account,
            k < 52 AND hash(r, 13) % 100 < 35 AS spot,
            CASE WHEN hash(r, 14) % 10 < 8 THEN {_pick(TEAMS, 'hash(r, 19)')} END AS team,
            {_pick([PROJECTS[t] for t in TEAMS], 'hash(r, 19)')} AS project
        FROM (SELECT range AS r, hash(range, 10) % 100 AS k FROM range({n_resources}))
    )"""


def lines_sql(n_lines: int, month: int) -> str:
    """The billing lines of one month, one row per line, in neutral names; cost as DECIMAL."""
    n_resources = max(60, n_lines // 2000)
    start = MONTHS[month]
    prefix = " ".join(f"WHEN '{r}' THEN '{p}'" for r, (p, _) in REGIONS.items())
    name = " ".join(f"WHEN '{r}' THEN '{n}'" for r, (_, n) in REGIONS.items())
    dest = " ".join(f"WHEN '{r}' THEN '{d}'" for r, d in zip(REGIONS, list(REGIONS)[1:] + list(REGIONS)[:1],
                                                              strict=True))
    return f"""
    WITH res AS ({resources_sql(n_resources)}),
    l AS (
        SELECT i, hash(i, 2) % {n_resources} AS r, i % 211 = 7 AS tax,
            TIMESTAMP '{start}' + to_hours(CAST(hash(i, 3) % (24 * day(last_day(DATE '{start}'))) AS BIGINT)) AS t0,
            hash(i, 4) AS h
        FROM range({month}, {n_lines}, 3) AS x(i)
    ),
    j AS (
        SELECT l.i, l.t0, l.h, l.tax, res.*,
            CASE res.region {prefix} END AS pfx, CASE res.region {name} END AS region_name,
            CASE res.region {dest} END AS dst, CASE (CASE res.region {dest} END) {name} END AS dst_name,
            CASE (CASE res.region {dest} END) {prefix} END AS dst_pfx
        FROM l JOIN res USING (r)
    ),
    v AS (
        SELECT *,
            CASE WHEN tax THEN 'Tax' ELSE 'Usage' END AS line_type,
            CASE WHEN tax THEN NULL
                 WHEN kind IN ('gpu', 'compute') THEN CASE WHEN h % 10 = 0 THEN (h % 4 + 1) / 4.0 ELSE 1 END
                 WHEN kind = 'ebs' THEN (h % 2000 + 20) / 744.0
                 WHEN kind = 's3' THEN (h % 50000 + 100) / 744.0
                 WHEN kind = 'transfer' THEN (h % 40000) / 100.0
                 ELSE (h % 1000) / 10.0 END AS amount
        FROM j
    ),
    w AS (
        SELECT *,
            CASE WHEN tax THEN NULL
                 WHEN kind IN ('gpu', 'compute') THEN
                    (CASE WHEN pfx = 'USE1' THEN '' ELSE pfx || '-' END)
                    || CASE WHEN spot THEN 'SpotUsage:' ELSE 'BoxUsage:' END || itype
                 WHEN kind = 'ebs' THEN pfx || '-EBS:VolumeUsage.gp3'
                 WHEN kind = 's3' THEN pfx || '-TimedStorage-ByteHrs'
                 WHEN kind = 'transfer' AND h % 4 = 0 THEN pfx || '-DataTransfer-Out-Bytes'
                 WHEN kind = 'transfer' THEN pfx || '-' || dst_pfx || '-AWS-Out-Bytes'
                 ELSE pfx || '-CW:MetricMonitorUsage' END AS usage_type,
            CAST(round(CASE WHEN tax THEN (h % 5000) / 100.0
                 WHEN kind IN ('gpu', 'compute') THEN amount * od_rate * CASE WHEN spot THEN 0.35 ELSE 1 END
                 WHEN kind = 'ebs' THEN amount * 0.08
                 WHEN kind = 's3' THEN amount * 0.023
                 WHEN kind = 'transfer' THEN amount * CASE WHEN h % 4 = 0 THEN 0.09 ELSE 0.02 END
                 ELSE amount * 0.3 END, 8) AS DECIMAL(18, 8)) AS cost,
            CAST(round(CASE WHEN kind IN ('gpu', 'compute') AND NOT tax THEN amount * od_rate END, 8)
                 AS DECIMAL(18, 8)) AS list_cost
        FROM v
    )
    SELECT *,
        CASE WHEN tax THEN NULL WHEN kind IN ('gpu', 'compute', 'transfer', 'ebs') THEN 'AmazonEC2'
             WHEN kind = 's3' THEN 'AmazonS3' ELSE 'AmazonCloudWatch' END AS product_code,
        CASE WHEN tax THEN 'Tax for product code AmazonEC2'
             WHEN kind IN ('gpu', 'compute') AND spot THEN '$' || round(od_rate * 0.35, 4) || ' per Linux ' || itype
                 || ' Spot Instance-hour'
             WHEN kind IN ('gpu', 'compute') THEN '$' || od_rate || ' per On Demand Linux ' || itype
                 || ' Instance Hour'
             WHEN kind = 'ebs' THEN '$0.08 per GB-month of General Purpose (gp3) provisioned storage'
             WHEN kind = 's3' THEN '$0.023 per GB - first 50 TB / month of storage used'
             WHEN kind = 'transfer' AND h % 4 = 0 THEN '$0.09 per GB - first 10 TB / month data transfer out'
             WHEN kind = 'transfer' THEN '$0.02 per GB - ' || region_name || ' data transfer to ' || dst_name
             ELSE '$0.30 per metric-month - first 10,000 metrics' END AS description,
        CASE WHEN tax THEN NULL WHEN kind IN ('gpu', 'compute') THEN 'Compute Instance'
             WHEN kind = 'ebs' THEN 'Storage' WHEN kind = 's3' THEN 'Storage' WHEN kind = 'transfer'
             THEN 'Data Transfer' ELSE 'Metric' END AS family,
        CASE WHEN tax THEN NULL WHEN kind IN ('gpu', 'compute') THEN 'Hrs' WHEN kind IN ('ebs', 's3') THEN 'GB-Mo'
             WHEN kind = 'transfer' THEN 'GB' ELSE 'Metrics' END AS unit
    FROM w"""


def churn_resources_sql(n_resources: int, life: tuple[int, int] = (4, 17), tagged: int = 4) -> str:
    """Short-lived nodes, one row each: born at some hour of the quarter, living `life[0]` + (0 to life[1] - 1)
    hours (4 to 20); 45% GPU, 70% spot; `tagged` in ten tagged. `off` is the number of lines of the nodes
    before it."""
    rates = " ".join(f"WHEN '{t}' THEN {p}" for t, p in {**GPU_TYPES, **OTHER_TYPES}.items())
    return f"""
    SELECT *, CASE itype {rates} END AS od_rate,
        COALESCE(sum(4 * life) OVER (ORDER BY r ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS off
    FROM (
        SELECT r, CASE WHEN k < 45 THEN 'gpu' ELSE 'compute' END AS rkind,
            CASE WHEN k < 45 THEN {_pick(GPU_TYPES, 'hash(r, 12)')} ELSE {_pick(OTHER_TYPES, 'hash(r, 12)')} END
                AS itype,
            {_pick(REGIONS, 'hash(r, 11)')} AS region,
            {_pick(ACCOUNTS, 'hash(r, 15)')} AS account,
            hash(r, 13) % 100 < 70 AS spot,
            CASE WHEN tagged THEN {_pick(TEAMS, 'hash(r, 19)')} END AS team,
            CASE WHEN tagged AND hash(r, 16) % 10 < 8 THEN 'user' || (hash(r, 17) % 40) || '@example.com' END
                AS owner,
            CASE WHEN tagged AND hash(r, 18) % 10 < 8 THEN {_pick([PROJECTS[t] for t in TEAMS], 'hash(r, 19)')} END
                AS project,
            'i-0' || lpad(to_hex(r), 14, '0') AS rid,
            {life[0]} + CAST(hash(r, 20) % {life[1]} AS BIGINT) AS life,
            CAST(hash(r, 21) % {QUARTER_HOURS - life[0] - life[1] + 1} AS BIGINT) AS birth
        FROM (SELECT range AS r, hash(range, 10) % 100 AS k, hash(range, 14) % 10 < {tagged} AS tagged
              FROM range({n_resources}))
    )"""


def churn_lines_sql(n_lines: int, month: int, per_resource: int = CHURN_LINES, life: tuple[int, int] = (4, 17),
                    tagged: int = 4) -> str:
    """The lines of one month of the high-churn shape, in lines_sql's neutral names (so cur_columns applies):
    every node has, each hour of its life, its instance-hour (spot price of that hour and zone) and three
    transfer lines (regional, to the internet, to another region), each line's description its own."""
    n_resources = n_lines * 6 // (5 * per_resource) + 60  # enough: each has `per_resource` lines on average
    start, end = MONTHS[month], (MONTHS[month + 1] if month + 1 < len(MONTHS) else "2026-10-01")
    prefix = " ".join(f"WHEN '{r}' THEN '{p}'" for r, (p, _) in REGIONS.items())
    name = " ".join(f"WHEN '{r}' THEN '{n}'" for r, (_, n) in REGIONS.items())
    dest = " ".join(f"WHEN '{r}' THEN '{d}'" for r, d in zip(REGIONS, list(REGIONS)[1:] + list(REGIONS)[:1],
                                                              strict=True))
    return f"""
    WITH res AS ({churn_resources_sql(n_resources, life, tagged)}),
    l AS (SELECT *, unnest(range(4 * life)) AS j FROM res WHERE off < {n_lines}),
    m AS (
        SELECT *, off + j AS i, j // 4 AS hr, j % 4 AS lt,
            TIMESTAMP '2026-07-01' + to_hours(birth + j // 4) AS t0
        FROM l WHERE off + j < {n_lines}
    ),
    v AS (
        SELECT *, false AS tax, 'Usage' AS line_type,
            -- h % 4 = 0 marks transfer to the internet in cur_columns (product/toLocation)
            (hash(i, 4) >> 2 << 2) + CASE WHEN lt = 2 THEN 0 ELSE 1 END AS h,
            CASE WHEN lt = 0 THEN rkind ELSE 'transfer' END AS kind,
            CASE region {prefix} END AS pfx, CASE region {name} END AS region_name,
            CASE WHEN lt = 1 THEN region ELSE CASE region {dest} END END AS dst,
            CASE WHEN lt = 0 THEN CASE WHEN hr = life - 1 THEN (hash(i, 5) % 4 + 1) / 4.0 ELSE 1 END
                 WHEN lt = 1 THEN (hash(i, 5) % 500) / 100.0
                 WHEN lt = 2 THEN (hash(i, 5) % 2000) / 100.0
                 ELSE (hash(i, 5) % 1000) / 100.0 END AS amount,
            CASE WHEN lt > 0 THEN [0.01, 0.09, 0.02][lt]
                 WHEN spot THEN round(od_rate * (0.25 + (hash(itype, region, birth + hr) % 40) / 100.0), 4)
                 ELSE od_rate END AS rate
        FROM m WHERE t0 >= TIMESTAMP '{start}' AND t0 < TIMESTAMP '{end}'
    ),
    w AS (
        SELECT *, CASE dst {name} END AS dst_name, CASE dst {prefix} END AS dst_pfx,
            CASE lt WHEN 0 THEN (CASE WHEN pfx = 'USE1' THEN '' ELSE pfx || '-' END)
                                || CASE WHEN spot THEN 'SpotUsage:' ELSE 'BoxUsage:' END || itype
                    WHEN 1 THEN pfx || '-DataTransfer-Regional-Bytes'
                    WHEN 2 THEN pfx || '-DataTransfer-Out-Bytes'
                    ELSE pfx || '-' || (CASE dst {prefix} END) || '-AWS-Out-Bytes' END AS usage_type,
            CAST(round(amount * rate, 8) AS DECIMAL(18, 8)) AS cost,
            CAST(CASE WHEN lt = 0 THEN round(amount * od_rate, 8) END AS DECIMAL(18, 8)) AS list_cost,
            'AmazonEC2' AS product_code,
            CASE lt WHEN 0 THEN 'Compute Instance' ELSE 'Data Transfer' END AS family,
            CASE lt WHEN 0 THEN 'Hrs' ELSE 'GB' END AS unit
        FROM v
    )
    SELECT *,
        '$' || rate || CASE lt WHEN 0 THEN CASE WHEN spot THEN ' per Linux ' || itype || ' Spot Instance-hour'
                                               ELSE ' per On Demand Linux ' || itype || ' Instance Hour' END
                               WHEN 1 THEN ' per GB - regional data transfer - in/out/between EC2 AZs'
                               WHEN 2 THEN ' per GB - first 10 TB / month data transfer out'
                               ELSE ' per GB - ' || region_name || ' data transfer to ' || dst_name END
            || ' (' || strftime(t0, '%Y-%m-%d %H:00') || ')' AS description
    FROM w"""


def tagchurn_lines_sql(n_lines: int, month: int) -> str:
    """The lines of one month of the heavy tag churn shape: the high-churn lines of longer-lived, nine in ten
    tagged nodes, with tags that change as they live and the ties described in the module's docstring."""
    lines = churn_lines_sql(n_lines, month, TAGCHURN_LINES, TAGCHURN_LIFE, tagged=9)
    half = QUARTER_HOURS // 2  # the reorganisation: an hour halfway through the quarter
    last = "hr = life - 1"
    moved = _pick(TEAMS, "hash(r, 19) + 1")
    return f"""
    SELECT * REPLACE (
        CASE WHEN team IS NULL THEN NULL WHEN r % 3 = 0 AND birth + hr >= {half} THEN {moved} ELSE team END AS team,
        CASE WHEN team IS NULL THEN NULL
             ELSE 'user' || ((r * 7 + (hr // (6 + r % 24))) % 60) || '@example.com' END AS owner,
        CAST(CASE WHEN r % 7 = 0 THEN 1 ELSE cost END AS DECIMAL(18, 8)) AS cost,
        CAST(CASE WHEN r % 7 = 0 AND lt = 0 THEN 1 ELSE list_cost END AS DECIMAL(18, 8)) AS list_cost),
        CASE WHEN team IS NULL THEN NULL
             WHEN {last} THEN rid || CASE WHEN lt % 2 = 0 THEN '-a' ELSE '-b' END
             ELSE 'run-' || (r * 1000 + hr // (1 + r % 3)) END AS run
    FROM ({lines})"""


def cur_columns(csv: bool) -> list[tuple[str, str]]:
    """Legacy CUR columns (classic spelling) and their SQL over lines_sql(); the Parquet file renames them to
    the Athena spelling. CSV holds text as AWS writes it; Parquet holds doubles and timestamps."""
    ts = (lambda e: f"strftime({e}, '%Y-%m-%dT%H:%M:%SZ')") if csv else (lambda e: e)
    num = (lambda e: f"CAST({e} AS VARCHAR)") if csv else (lambda e: f"CAST({e} AS DOUBLE)")
    compute = "kind IN ('gpu', 'compute') AND NOT tax"
    return [
        ("identity/LineItemId", "'li' || lpad(to_hex(i), 12, '0')"),
        ("identity/TimeInterval", f"{ts('t0')} || '/' || {ts('t0 + INTERVAL 1 HOUR')}"),
        ("bill/InvoiceId", "'EUINUS26-' || strftime(t0, '%m')"),
        ("bill/BillingEntity", "'AWS'"),
        ("bill/BillType", "'Anniversary'"),
        ("bill/PayerAccountId", f"'{PAYER}'"),
        ("bill/BillingPeriodStartDate", ts("date_trunc('month', t0)")),
        ("bill/BillingPeriodEndDate", ts("date_trunc('month', t0) + INTERVAL 1 MONTH")),
        ("lineItem/UsageAccountId", "account"),
        ("lineItem/LineItemType", "line_type"),
        ("lineItem/UsageStartDate", ts("t0")),
        ("lineItem/UsageEndDate", ts("t0 + INTERVAL 1 HOUR")),
        ("lineItem/ProductCode", "COALESCE(product_code, 'AmazonEC2')"),
        ("lineItem/UsageType", "usage_type"),
        ("lineItem/Operation", f"CASE WHEN {compute} THEN 'RunInstances' END"),
        ("lineItem/AvailabilityZone", f"CASE WHEN {compute} OR kind = 'ebs' THEN region || 'a' END"),
        ("lineItem/ResourceId", "CASE WHEN NOT tax THEN rid END"),
        ("lineItem/UsageAmount", num("amount")),
        ("lineItem/NormalizationFactor", num(f"CASE WHEN {compute} THEN 8 END")),
        ("lineItem/CurrencyCode", "'USD'"),
        ("lineItem/UnblendedRate", num("CASE WHEN amount > 0 THEN round(cost / amount, 8) END")),
        ("lineItem/UnblendedCost", num("cost")),
        ("lineItem/BlendedCost", num("cost")),
        ("lineItem/LineItemDescription", "description"),
        ("lineItem/TaxType", "CASE WHEN tax THEN 'VAT' END"),
        ("product/ProductName", "CASE product_code WHEN 'AmazonEC2' THEN 'Amazon Elastic Compute Cloud' "
                                "WHEN 'AmazonS3' THEN 'Amazon Simple Storage Service' "
                                "WHEN 'AmazonCloudWatch' THEN 'AmazonCloudWatch' END"),
        ("product/instanceType", f"CASE WHEN {compute} THEN itype END"),
        ("product/instanceFamily", f"CASE WHEN {compute} THEN split_part(itype, '.', 1) END"),
        ("product/operatingSystem", f"CASE WHEN {compute} THEN 'Linux' END"),
        ("product/tenancy", f"CASE WHEN {compute} THEN 'Shared' END"),
        ("product/vcpu", f"CASE WHEN {compute} THEN '8' END"),
        ("product/productFamily", "family"),
        ("product/regionCode", "CASE WHEN NOT tax THEN region END"),
        ("product/location", "CASE WHEN NOT tax THEN region_name END"),
        ("product/fromLocation", "CASE WHEN kind = 'transfer' AND NOT tax THEN region_name END"),
        ("product/toLocation", "CASE WHEN kind = 'transfer' AND NOT tax THEN "
                               "CASE WHEN h % 4 = 0 THEN 'External' ELSE dst_name END END"),
        ("product/sku", "CASE WHEN NOT tax THEN upper(to_hex(hash(usage_type, region) % 1000000000)) END"),
        ("pricing/publicOnDemandCost", num("COALESCE(list_cost, cost)")),
        ("pricing/publicOnDemandRate", num("CASE WHEN amount > 0 THEN round(COALESCE(list_cost, cost) / amount, 8) "
                                           "END")),
        ("pricing/term", "CASE WHEN tax THEN NULL WHEN spot AND kind IN ('gpu', 'compute') THEN NULL "
                         "ELSE 'OnDemand' END"),
        ("pricing/unit", "unit"),
        ("reservation/ReservationARN", "CAST(NULL AS VARCHAR)"),
        ("reservation/EffectiveCost", num("CAST(NULL AS DECIMAL(18, 8))")),
        ("savingsPlan/SavingsPlanARN", "CAST(NULL AS VARCHAR)"),
        ("savingsPlan/SavingsPlanEffectiveCost", num("CAST(NULL AS DECIMAL(18, 8))")),
        ("resourceTags/user:team", "CASE WHEN NOT tax THEN team END"),
        ("resourceTags/user:owner", "CASE WHEN NOT tax THEN owner END"),
        ("resourceTags/user:project", "CASE WHEN NOT tax THEN project END"),
    ]


def athena(column: str) -> str:
    """`lineItem/UsageType` -> `line_item_usage_type`, `resourceTags/user:team` -> `resource_tags_user_team`."""
    import re

    category, name = column.split("/", 1)
    snake = lambda s: re.sub(r"(?<!^)(?=[A-Z])", "_", s).lower()  # noqa: E731
    return f"{snake(category)}_{snake(name.replace(':', '_'))}"


def focus_columns() -> list[tuple[str, str]]:
    """FOCUS 1.0 columns as AWS's FOCUS export writes them, Tags as JSON text."""
    compute = "kind IN ('gpu', 'compute') AND NOT tax"
    tags = ("CASE WHEN tax THEN '{}' ELSE to_json(map_from_entries(list_filter("
            "[{'k': 'team', 'v': team}, {'k': 'owner', 'v': owner}, {'k': 'project', 'v': project}], "
            "lambda e: e.v IS NOT NULL)))::VARCHAR END")
    money = lambda e: f"CAST({e} AS DOUBLE)"  # noqa: E731
    return [
        ("AvailabilityZone", f"CASE WHEN {compute} OR kind = 'ebs' THEN region || 'a' END"),
        ("BilledCost", money("cost")),
        ("BillingAccountId", f"'{PAYER}'"),
        ("BillingAccountName", "'Example ML'"),
        ("BillingCurrency", "'USD'"),
        ("BillingPeriodEnd", "date_trunc('month', t0) + INTERVAL 1 MONTH"),
        ("BillingPeriodStart", "date_trunc('month', t0)"),
        ("ChargeCategory", "line_type"),
        ("ChargeClass", "CAST(NULL AS VARCHAR)"),
        ("ChargeDescription", "description"),
        ("ChargeFrequency", "'Usage-Based'"),
        ("ChargePeriodEnd", "t0 + INTERVAL 1 HOUR"),
        ("ChargePeriodStart", "t0"),
        ("CommitmentDiscountCategory", "CAST(NULL AS VARCHAR)"),
        ("CommitmentDiscountId", "CAST(NULL AS VARCHAR)"),
        ("ConsumedQuantity", money("amount")),
        ("ConsumedUnit", "CASE unit WHEN 'Hrs' THEN 'Hours' ELSE unit END"),
        ("ContractedCost", money("cost")),
        ("EffectiveCost", money("cost")),
        ("InvoiceIssuerName", "'Amazon Web Services, Inc.'"),
        ("ListCost", money("COALESCE(list_cost, cost)")),
        ("PricingCategory", "CASE WHEN tax THEN NULL WHEN spot AND kind IN ('gpu', 'compute') THEN 'Dynamic' "
                            "ELSE 'Standard' END"),
        ("PricingQuantity", money("amount")),
        ("PricingUnit", "unit"),
        ("ProviderName", "'AWS'"),
        ("PublisherName", "'Amazon Web Services, Inc.'"),
        ("RegionId", "CASE WHEN NOT tax THEN region END"),
        ("RegionName", "CASE WHEN NOT tax THEN region_name END"),
        ("ResourceId", "CASE WHEN NOT tax THEN rid END"),
        ("ResourceType", "CASE WHEN tax THEN NULL WHEN kind IN ('gpu', 'compute') THEN 'Instance' "
                         "WHEN kind = 'ebs' THEN 'Volume' WHEN kind = 's3' THEN 'Bucket' END"),
        ("ServiceCategory", "CASE WHEN tax THEN NULL WHEN kind IN ('gpu', 'compute') THEN 'Compute' "
                            "WHEN kind IN ('ebs', 's3') THEN 'Storage' WHEN kind = 'transfer' THEN 'Networking' "
                            "ELSE 'Management and Governance' END"),
        ("ServiceName", "CASE product_code WHEN 'AmazonEC2' THEN 'Amazon Elastic Compute Cloud' "
                        "WHEN 'AmazonS3' THEN 'Amazon Simple Storage Service' "
                        "WHEN 'AmazonCloudWatch' THEN 'Amazon CloudWatch' ELSE 'Tax' END"),
        ("SkuId", "CASE WHEN NOT tax THEN upper(to_hex(hash(usage_type, region) % 1000000000)) END"),
        ("SubAccountId", "account"),
        ("SubAccountName", "'ml-' || account"),
        ("Tags", tags),
        ("x_UsageType", "usage_type"),
        ("x_Operation", f"CASE WHEN {compute} THEN 'RunInstances' END"),
        ("x_ServiceCode", "product_code"),
    ]


def write_billing(con: duckdb.DuckDBPyConnection, n_lines: int, out: Path, fmt: str) -> list[Path]:
    """The files of one format or shape; a folder for the many-files shapes (the way they are read)."""
    folder = out / fmt
    folder.mkdir(parents=True, exist_ok=True)
    if fmt in ("parts-csv-gz", "tiny-files"):
        return [write_parts(con, n_lines, folder, fmt)]
    paths = []
    for month in range(len(MONTHS)):
        tag = MONTHS[month][:7]
        if fmt == "focus-parquet":
            cols, path, options = focus_columns(), folder / f"focus-{tag}.parquet", "FORMAT parquet"
        elif fmt in ("cur-parquet", "churn-parquet", "tagchurn-parquet"):
            cols = [(athena(c), e) for c, e in cur_columns(csv=False)]
            if fmt == "tagchurn-parquet":
                cols.append((athena("resourceTags/user:run"), "run"))
            path, options = folder / f"cur-{tag}.parquet", "FORMAT parquet"
        else:
            cols, path = cur_columns(csv=True), folder / f"cur-{tag}.csv.gz"
            options = "FORMAT csv, HEADER true, COMPRESSION gzip"
        lines = {"churn-parquet": churn_lines_sql, "tagchurn-parquet": tagchurn_lines_sql}.get(fmt, lines_sql)(
            n_lines, month)
        select = ", ".join(f'{e} AS "{c}"' for c, e in cols)
        tmp = path.with_name(path.name + ".tmp")
        con.execute(f"COPY (SELECT {select} FROM ({lines})) TO '{tmp}' ({options})")
        tmp.replace(path)
        paths.append(path)
    return paths


def write_parts(con: duckdb.DuckDBPyConnection, n_lines: int, folder: Path, fmt: str) -> Path:
    """Today's CUR lines as CSV cut into parts, a folder per month (`2026-07/cur-2026-07-00001.csv.gz`):
    PARTS gzip parts a month, or TINY_FILES tiny plain files in all. Returns the folder."""
    if fmt == "tiny-files":
        n_lines, per_month, suffix, options = TINY_FILES * TINY_LINES, TINY_FILES // 3 + 1, "csv", ""
    else:
        per_month, suffix, options = PARTS, "csv.gz", ", COMPRESSION gzip"
    select = ", ".join(f'{e} AS "{c}"' for c, e in cur_columns(csv=True))
    for month in range(len(MONTHS)):
        tag = MONTHS[month][:7]
        month_lines = (n_lines - month + 2) // 3  # lines month, month + 3, ... of range(n_lines)
        tmp = folder / f".{tag}.tmp"
        con.execute(f"""COPY (SELECT {select}, CAST((i // 3) * {per_month} // {month_lines} AS INTEGER) AS part
                            FROM ({lines_sql(n_lines, month)}))
                        TO '{tmp}' (FORMAT csv, HEADER true{options}, PARTITION_BY (part), OVERWRITE true)""")
        done = folder / tag
        done.mkdir(exist_ok=True)
        for f in done.iterdir():
            f.unlink()
        for k, f in enumerate(sorted(tmp.rglob(f"*.{suffix}"), key=lambda f: (int(f.parent.name.split("=")[1]),
                                                                                f.name)), 1):
            f.rename(done / f"cur-{tag}-{k:05d}.{suffix}")
        for d in sorted(tmp.rglob("*"), reverse=True):
            d.rmdir()
        tmp.rmdir()
    return folder


def inventory(con: duckdb.DuckDBPyConnection, n_lines: int) -> dict:
    """The GPU machines the billing names, their utilisation per month, and spot training jobs: small
    (thousands of machines at 10M lines), so built as JSON."""
    n_resources = max(60, n_lines // 2000)
    rows = con.execute(f"""
        SELECT rid, account, region, itype, spot, team, owner, project, hash(r, 30) % 100 AS busy, r
        FROM ({resources_sql(n_resources)}) WHERE kind = 'gpu' ORDER BY r""").fetchall()
    assets, usage, jobs = [], [], []
    for rid, account, region, itype, spot, team, owner, project, busy, r in rows:
        tags = {k: v for k, v in (("team", team), ("owner", owner), ("project", project)) if v}
        assets.append({"id": rid, "provider": "aws", "account": account, "region": region, "zone": region + "a",
                       "name": f"gpu-{r}", "kind": "vm", "instance_type": itype, "gpu_model": None,
                       "gpu_count": None, "gpu_memory_gb": None, "lifecycle": "spot" if spot else "on_demand",
                       "state": "running", "launch_time": "2026-06-01T00:00:00Z", "tags": tags})
        for month in range(len(MONTHS)):
            start = MONTHS[month]
            end = MONTHS[month + 1] if month + 1 < len(MONTHS) else "2026-10-01"
            mean = 3.0 + (busy + 7 * month) % 90  # a few idle, most busy
            usage.append({"asset_id": rid, "window_start": start + "T00:00:00Z", "window_end": end + "T00:00:00Z",
                          "samples": 720, "mean_util_pct": mean, "p95_util_pct": min(100.0, mean * 1.3),
                          "peak_mem_gb": 4.0 + busy % 70, "source": "cloudwatch_agent"})
        if spot and len(jobs) < 200:
            jobs.append({"id": f"arn:aws:sagemaker:{region}:{account}:training-job/train-{r}", "platform": "sagemaker",
                         "provider": "aws", "account": account, "region": region, "name": f"train-{r}",
                         "state": "Completed", "instance_type": "ml." + itype, "instance_count": 1,
                         "gpu_model": None, "gpu_count": None, "spot": True,
                         "checkpoint_uri": f"s3://ckpt/train-{r}/" if busy % 3 else None,
                         "checkpoint_interval_min": 30.0 if busy % 3 == 1 else (120.0 if busy % 3 == 2 else None),
                         "max_runtime_s": 172800, "max_wait_s": 259200, "training_s": 86400,
                         "billable_s": 30240, "interruptions": busy % 4, "start_time": "2026-08-01T00:00:00Z",
                         "end_time": "2026-08-02T00:00:00Z", "tags": tags})
    return {"version": 1, "generated_at": "2026-10-01T00:00:00Z",
            "source": f"gpu-auditor benchmark generator ({n_lines} lines, synthetic)",
            "assets": assets, "gpu_usage": usage, "jobs": jobs}


def churn_inventory(con: duckdb.DuckDBPyConnection, n_lines: int, limit: int = 2000, fmt: str = "churn-parquet"
                    ) -> dict:
    """What an inventory snapshot knows of the short-lived nodes (of `fmt`, a churn shape): the first `limit`
    GPU nodes (most are gone by the time anyone looks), each with the utilisation of its life."""
    per, life, tagged = (TAGCHURN_LINES, TAGCHURN_LIFE, 9) if fmt == "tagchurn-parquet" else (CHURN_LINES, (4, 17), 4)
    n_resources = n_lines * 6 // (5 * per) + 60
    rows = con.execute(f"""
        SELECT rid, account, region, itype, spot, team, owner, project, hash(r, 30) % 100 AS busy, r,
            TIMESTAMP '2026-07-01' + to_hours(birth) AS born, TIMESTAMP '2026-07-01' + to_hours(birth + life) AS died
        FROM ({churn_resources_sql(n_resources, life, tagged)}) WHERE rkind = 'gpu' AND off < {n_lines} ORDER BY r
        LIMIT {limit}""").fetchall()
    assets, usage = [], []
    for rid, account, region, itype, spot, team, owner, project, busy, r, born, died in rows:
        tags = {k: v for k, v in (("team", team), ("owner", owner), ("project", project)) if v}
        assets.append({"id": rid, "provider": "aws", "account": account, "region": region, "zone": region + "a",
                       "name": f"node-{r}", "kind": "vm", "instance_type": itype, "gpu_model": None,
                       "gpu_count": None, "gpu_memory_gb": None, "lifecycle": "spot" if spot else "on_demand",
                       "state": "terminated", "launch_time": f"{born:%Y-%m-%dT%H:%M:%SZ}", "tags": tags})
        mean = 2.0 + busy % 95
        usage.append({"asset_id": rid, "window_start": f"{born:%Y-%m-%dT%H:%M:%SZ}",
                      "window_end": f"{died:%Y-%m-%dT%H:%M:%SZ}", "samples": int((died - born).total_seconds() // 60),
                      "mean_util_pct": mean, "p95_util_pct": min(100.0, mean * 1.3), "peak_mem_gb": 4.0 + busy % 70,
                      "source": "cloudwatch_agent"})
    return {"version": 1, "generated_at": "2026-10-01T00:00:00Z",
            "source": f"gpu-auditor benchmark generator ({n_lines} lines, high churn, synthetic)",
            "assets": assets, "gpu_usage": usage, "jobs": []}


POLICY = """\
policy: Benchmark GPU policy
version: "2026.3"
owner: finops@example.com
currency: USD
attribution: {team_tags: [team], owner_tags: [owner], project_tags: [project]}
teams:
  vision: {lead: lead-vision@example.com, budget_per_quarter: 25000000, projects: [detector]}
  nlp: {lead: lead-nlp@example.com, budget_per_quarter: 12000000, projects: [llm-finetune]}
  platform: {lead: lead-platform@example.com, budget_per_quarter: 9000000, projects: [inference]}
clauses:
  idle:
    text: A GPU machine under 10% mean utilisation for a day is stopped.
    max_mean_util_pct: 10
    min_hours: 24
  tagging:
    text: Every resource carries team, owner and project tags.
    required_tags: [team, owner, project]
  egress:
    text: No resource moves more than 1000 GB a month between regions.
    max_gb_per_month: 1000
  spot_checkpoint:
    text: Spot training checkpoints every hour.
    max_interval_min: 60
"""


def generate(n_lines: int, out: Path, formats: tuple[str, ...] = FORMATS, threads: int | None = None) -> dict:
    """Write the exports, inventories and policy for n_lines lines per format or shape into out; keep what is
    already there (same size, same bytes: the generator is deterministic). Returns the paths: `formats` maps
    each to its files (a folder for the many-files shapes), `inventories` each to its inventory."""
    out.mkdir(parents=True, exist_ok=True)
    done = out / "DONE.json"
    info = {"version": VERSION, "lines": n_lines, "formats": {}, "inventories": {}, "seconds": {}}
    if done.exists():
        cached = json.loads(done.read_text())
        if (cached.get("version"), cached["lines"]) == (VERSION, n_lines):
            info = cached
    if set(formats) <= set(info["formats"]):
        return info
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {threads}")
    for fmt in formats:
        if fmt in info["formats"]:
            continue
        t = time.perf_counter()
        info["formats"][fmt] = [str(p) for p in write_billing(con, n_lines, out, fmt)]
        info["seconds"][fmt] = round(time.perf_counter() - t, 2)
        path = out / "inventory.json"
        if fmt in ("churn-parquet", "tagchurn-parquet"):
            path = out / f"inventory-{fmt.split('-')[0]}.json"
            path.write_text(json.dumps(churn_inventory(con, n_lines, fmt=fmt)))
        info["inventories"][fmt] = str(path)
        done.write_text(json.dumps(info, indent=2))  # after each: a run stopped midway keeps what it wrote
    if not (out / "inventory.json").exists():
        (out / "inventory.json").write_text(json.dumps(inventory(con, n_lines)))
    (out / "policy.yml").write_text(POLICY)
    info["inventory"], info["policy"] = str(out / "inventory.json"), str(out / "policy.yml")
    done.write_text(json.dumps(info, indent=2))
    return info


def lines_of(info: dict, fmt: str) -> int:
    """The billing lines a format's files hold (the tiny-files folder is the same size whatever --lines says)."""
    return TINY_FILES * TINY_LINES if fmt == "tiny-files" else info["lines"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, required=True, help="billing lines per format (over three months)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--formats", nargs="+", choices=FORMATS + SHAPES, default=list(FORMATS))
    args = ap.parse_args()
    info = generate(args.lines, args.out, tuple(args.formats))
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()

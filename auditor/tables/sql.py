"""SQL fragments over the `costs` table, each written once: units, GPU-hours, pricing, tag and team lookups."""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.sql import lit

if TYPE_CHECKING:
    from auditor.policy import Policy

# Usage counted in hours.
HOURS = "ConsumedUnit IN ('Hrs', 'Hours', 'Hour', 'h', 'hour', 'hours')"

# The billing lines whose usage is GPU time: GPU compute usage in hours with a known GPU count.
GPU_USAGE = (f"x_GpuCount IS NOT NULL AND ChargeCategory = 'Usage' AND x_CostCategory = 'gpu_compute' "
             f"AND {HOURS}")
# GPU-hours of billing lines: usage in hours, times the GPUs per unit. Every GPU-hour figure is this sum.
GPU_HOURS = f"sum(ConsumedQuantity * x_GpuCount) FILTER (WHERE {GPU_USAGE})"

PRICING_SQL = ("CASE PricingCategory WHEN 'Dynamic' THEN 'spot' WHEN 'Committed' THEN 'committed' "
               "ELSE 'on_demand' END")

# Stored volume in GB-months (NULL for lines not counted in GB-months: disks billed per disk, requests).
GB_MONTHS = """CASE WHEN ConsumedUnit IN ('GB-Mo', 'GB-Month', 'GB/Month', 'GB Month', 'GB-month') THEN ConsumedQuantity
                    WHEN ConsumedUnit IN ('GiB-Mo', 'GiB Month', 'gibibyte month', 'GibiByte-Month')
                    THEN ConsumedQuantity * 1.073741824 END"""
# Storage classes that a lifecycle rule or automatic tiering moves data into (S3, GCS, Azure Blob).
TIERED = r"(-SIA-|-ZIA-|Glacier|-GDA-|-GIR-|-INT-|Intelligent|Archive|\bCool\b|\bCold|Nearline)"

# Transfer volume in GB, whatever unit the export counts it in.
GB = """CAST(CASE WHEN ConsumedUnit IN ('Bytes', 'bytes', 'byte') THEN ConsumedQuantity / 1000000000
              WHEN ConsumedUnit IN ('TB', 'TiB', 'tebibyte') THEN ConsumedQuantity * 1000
              WHEN ConsumedUnit IN ('MB', 'MiB', 'mebibyte') THEN ConsumedQuantity / 1000
              WHEN ConsumedUnit IN ('gibibyte', 'GiB') THEN ConsumedQuantity * 1.073741824
              ELSE ConsumedQuantity END AS DECIMAL(38, 9))"""


def tag_sql(keys: list[str]) -> str:
    """The value of the first of `keys` a billing line's Tags carry (case and stray spaces in the key ignored)."""
    names = ", ".join(lit(k.strip().lower()) for k in keys) or "NULL"
    return f"NULLIF(list_filter(map_entries(Tags), lambda e: lower(trim(e.key)) IN ({names}))[1].value, '')"


def team_sql(policy: Policy) -> str:
    """The team of a billing line, by the same attribution rules as Context.attribute: a team tag, else a
    project tag mapped to its team through the policy."""
    projects = {p: t.name for t in policy.teams.values() for p in t.projects}
    whens = " ".join(f"WHEN {lit(p)} THEN {lit(t)}" for p, t in projects.items())
    by_project = f"CASE {tag_sql(policy.project_tags)} {whens} END" if whens else "NULL"
    return f"COALESCE({tag_sql(policy.team_tags)}, {by_project})"


TAX = "(tax)"  # the team key of tax lines: tax is no team's spend, and not spend that lacks a team


def spend_team_sql(policy: Policy) -> str:
    """A billing line's team for the spend views (summary.by_team, team reports, forecast): team_sql, with tax
    lines under TAX, never unattributed."""
    return f"CASE WHEN x_CostCategory = 'tax' THEN {lit(TAX)} ELSE {team_sql(policy)} END"


# Each tag set once, as one map of its entries sorted (what a team or a tag is looked up in: tag_sql, team_sql),
# by its id (costs.x_TagSet: Store.tag_set_ids, which writes `tag_sets` a row a set).
TAG_SET_MAPS = "(SELECT tag_set, Tags FROM tag_sets)"
# Of the tag sets of one thing's lines, the one charged last: the latest end of a line (an engine's rows carry
# their lines' latest end, whatever their grain), of those the costliest, then the first by id, over rows of
# (tag_set, last, cost) summed per tag set.
LATEST_TAG_SET = "first(tag_set ORDER BY last DESC, cost DESC, tag_set)"


def latest_tag_sets(key: str, where: str) -> str:
    """A query of (k, tag_set): for each value of `key` (an expression over the lines of `costs` that match
    `where`), its tag set charged last (LATEST_TAG_SET)."""
    return f"""SELECT k, {LATEST_TAG_SET} AS tag_set FROM (
        SELECT {key} AS k, x_TagSet AS tag_set, max(ChargePeriodEnd) AS last, sum(BilledCost) AS cost
        FROM costs WHERE {where} GROUP BY ALL) GROUP BY k"""

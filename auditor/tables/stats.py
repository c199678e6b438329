"""Figures of the billing in the store, per file and per window: totals per currency, by category, provider and
transfer kind, line counts, GPU-hours; and spend grouped by any key. One scan each, exact DECIMAL sums."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb

from auditor.sql import lit, q
from auditor.tables.normalize import referenced
from auditor.tables.schema import COSTS
from auditor.tables.sql import GB, GPU_HOURS
from auditor.window import Window


def per_currency(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> dict[str, dict[str, Decimal]]:
    """Rows of (key, currency, amount) into {key: {currency: amount}}."""
    out: dict[str, dict[str, Decimal]] = {}
    for key, currency, amount in con.execute(sql, params or []).fetchall():
        out.setdefault(key, {})[currency] = amount
    return out


def file_stats(con: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, dict[str, Any]]:
    """The figures of each of these files, in one scan."""
    figures = _stats(con, among(paths), per_file=True)
    return {p: figures.get(p) or _figures([]) for p in paths}


def scan_stats(con: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, Any]:
    """The figures of files read as one scan, all together (their rows are grouped across them)."""
    return _stats(con, among(paths)).get(None) or _figures([])


def among(paths: list[str]) -> str:
    """The SQL condition of a `costs` row read from one of these files."""
    return f"x_SourceFile IN ({', '.join(lit(p) for p in paths)})"


def window_stats(con: duckdb.DuckDBPyConnection, window: Window) -> dict[str, Any]:
    return _stats(con, window.where()).get(None) or _figures([])


def _stats(con: duckdb.DuckDBPyConnection, where: str, per_file: bool = False) -> dict[str | None, dict[str, Any]]:
    # One scan of the lines into a few dozen groups (per file, where asked); every figure is then summed from
    # those (exact DECIMAL sums of sums), the breakdowns as grouping sets and the subsets as FILTERs.
    gpu, spot, out = "cat = 'gpu_compute'", "spot", "x_out"
    rows = con.execute(f"""
        WITH g AS (
            SELECT {'x_SourceFile' if per_file else 'NULL'} AS file, BillingCurrency AS cur, x_CostCategory AS cat,
                   x_Provider AS provider, x_TransferKind AS kind,
                   COALESCE(PricingCategory = 'Dynamic', false) AS spot,
                   COALESCE(x_TransferKind IS NOT NULL AND x_TransferDirection = 'out', false) AS x_out,
                   sum(x_Lines) AS n, min(ChargePeriodStart) AS first, max(ChargePeriodEnd) AS last,
                   sum(BilledCost) AS billed, sum(EffectiveCost) AS effective, sum(ListCost) AS listed,
                   sum({GB}) FILTER (x_TransferKind IS NOT NULL AND x_TransferDirection = 'out') AS gb,
                   {GPU_HOURS} AS hours
            FROM costs WHERE {where} GROUP BY ALL)
        SELECT file, GROUPING(cur, cat, provider, kind), cur, cat, provider, kind, sum(n), min(first), max(last),
               sum(billed), sum(effective), sum(listed),
               sum(n) FILTER ({gpu}), sum(billed) FILTER ({gpu}),
               sum(n) FILTER ({spot}), sum(billed) FILTER ({spot}),
               sum(n) FILTER ({spot} AND {gpu}), sum(billed) FILTER ({spot} AND {gpu}),
               sum(n) FILTER ({out}), sum(gb) FILTER ({out}), sum(hours)
        FROM g
        GROUP BY GROUPING SETS ((file), (file, cur), (file, cat, cur), (file, provider, cur), (file, kind))
        ORDER BY 1, 2, 4 NULLS LAST, 5 NULLS LAST, 6 NULLS LAST, 3""").fetchall()
    by_file: dict[str | None, list[tuple]] = {}
    for file, *row in rows:
        by_file.setdefault(file, []).append(tuple(row))
    return {file: _figures(rows) for file, rows in by_file.items()}


def _figures(rows: list[tuple]) -> dict[str, Any]:
    """The figures of one file or window from its grouping-set rows (see _stats)."""
    totals: dict[str, dict[str, Decimal]] = {k: {} for k in ("billed", "effective", "list", "gpu", "spot",
                                                              "gpu_spot")}
    by_category: dict[str, dict[str, Decimal]] = {}
    by_provider: dict[str, dict[str, Decimal]] = {}
    lines: dict[str, int] = {}
    transfer: dict[str, str] = {}
    start = end = gpu_hours = None
    count = 0
    for (g, cur, cat, provider, kind, n, first, last, billed, effective, listed, n_gpu, gpu_cost, n_spot,
         spot_cost, n_gpu_spot, gpu_spot_cost, n_out, gb, hours) in rows:
        if g == 0b1111:  # everything
            count, start, end, gpu_hours = n or 0, first, last, hours
        elif g == 0b0111:  # per currency
            totals["billed"][cur], totals["effective"][cur], totals["list"][cur] = billed, effective, listed
            for key, k, amount in (("gpu", n_gpu, gpu_cost), ("spot", n_spot, spot_cost),
                                   ("gpu_spot", n_gpu_spot, gpu_spot_cost)):
                if k:
                    totals[key][cur] = amount
        elif g == 0b0011:
            by_category.setdefault(cat, {})[cur] = billed
            lines[cat or "other"] = lines.get(cat or "other", 0) + n
        elif g == 0b0101:
            by_provider.setdefault(provider, {})[cur] = billed
        elif g == 0b1110 and kind is not None and n_out:
            transfer[kind] = str(gb.quantize(Decimal("0.001")))
    return {
        "rows": count, "period_start": start, "period_end": end,
        "billed_cost": totals["billed"], "effective_cost": totals["effective"],
        "list_cost": totals["list"], "gpu_cost": totals["gpu"], "spot_cost": totals["spot"],
        "gpu_spot_cost": totals["gpu_spot"], "by_category": by_category, "by_provider": by_provider,
        "transfer_gb_out": transfer, "lines_by_category": dict(sorted(lines.items())),
        "gpu_hours": str(gpu_hours.quantize(Decimal("0.1"))) if gpu_hours is not None else None,
    }


def keyed(key_sql: str, where: str, sums: str, maps: str, source: str = "costs") -> str:
    """SQL of the lines of `where` in `source` (`costs`, or a relation of its columns such as split.with_split's)
    summed (`sums`: named aggregates) per currency and distinct value of the columns `key_sql` (a tag or team
    lookup, say) reads, with that key as `key`: computed once per distinct value, not per line; the tags by their
    tag set id (costs.x_TagSet), each set's map joined back once from `maps` (tagmaps.tag_set_maps)."""
    reads = sorted(referenced(key_sql, [c for c in COSTS if c != "BillingCurrency"]))
    group = "".join(f"{q('x_TagSet' if c == 'Tags' else c)}, " for c in reads)
    tags = f" JOIN {maps} ON tag_set = x_TagSet" if "Tags" in reads else ""
    return (f"(SELECT {key_sql} AS key, * FROM (SELECT {group}BillingCurrency, {sums} FROM {source} WHERE {where} "
            f"GROUP BY ALL){tags})")

"""The GPU fleet for the report: each GPU machine with its utilisation, cost and what the rules said of it,
and how the measured GPU-hours spread over utilisation bands (under 10%, 10-50%, over 50%)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from auditor.model import UNATTRIBUTED, Finding, GpuAsset
from auditor.sql import lit
from auditor.tables.breakdown import hours_text
from auditor.tables.store import Store
from auditor.window import Window

MACHINES = 200  # machines listed, most expensive first; the count of all is kept beside them
BANDS = ("under_10", "10_to_50", "over_50")
# What a machine's findings make it, by the policy clause of the rule that found it.
STATUS_BY_CLAUSE = {"idle": "idle", "rightsizing": "oversized"}


def machines(assets: list[GpuAsset], findings: list[Finding], currency: str,
             attribute: Callable[[dict[str, str]], tuple[str | None, str | None]]) -> list[dict[str, Any]]:
    """Every GPU machine (a few hundred at most: the inventory, not billing lines), most expensive first."""
    found: dict[str, list[Finding]] = {}
    for f in findings:
        if f.entity_type == "GpuAsset":
            found.setdefault(f.resource, []).append(f)
    out: list[dict[str, Any]] = []
    for a in assets:
        team, owner = attribute(a.tags)
        status = [STATUS_BY_CLAUSE[f.clause] + (" (waived)" if f.waived else "")
                  for f in found.get(a.id, []) if f.clause in STATUS_BY_CLAUSE]
        if not status:
            status = ["no metrics"] if a.mean_util_pct is None else ["ok"]
        out.append({
            "id": a.id, "name": a.name, "provider": a.provider, "account": a.account, "region": a.region,
            "instance_type": a.instance_type, "gpu_model": a.gpu_model, "gpu_count": a.gpu_count,
            "lifecycle": a.lifecycle, "state": a.state, "team": team or UNATTRIBUTED, "owner": owner,
            "mean_util_pct": None if a.mean_util_pct is None else round(a.mean_util_pct, 1),
            "p95_util_pct": a.p95_util_pct, "peak_mem_gb": a.peak_mem_gb, "gpu_memory_gb": a.gpu_memory_gb,
            "metric_hours": None if a.usage_hours is None else hours_text(Decimal(str(a.usage_hours))),
            "billed_cost": dict(a.cost), "status": sorted(set(status)),
            "rules": sorted({f.rule for f in found.get(a.id, [])}),
        })
    out.sort(key=lambda m: (-m["billed_cost"].get(currency, Decimal(0)), m["id"]))
    return out


def utilisation(store: Store, window: Window, gpu_counts: dict[str, int],
                teams: dict[str, str]) -> dict[str, dict[str, str]]:
    """{team: {band: GPU-hours}}: each utilisation window's hours inside the audit window, times the machine's
    GPUs, in the band of that window's mean GPU utilisation."""
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    rows = store.con.execute(f"""
        SELECT asset_id,
               CASE WHEN mean_util_pct < 10 THEN 'under_10' WHEN mean_util_pct <= 50 THEN '10_to_50'
                    ELSE 'over_50' END,
               sum(greatest(epoch(least(window_end, TIMESTAMP {we})) - epoch(greatest(window_start, TIMESTAMP {ws})),
                            0) / 3600.0)
        FROM gpu_usage
        WHERE window_start < TIMESTAMP {we} AND window_end > TIMESTAMP {ws} AND mean_util_pct IS NOT NULL
        GROUP BY ALL ORDER BY 1, 2""").fetchall()
    out: dict[str, dict[str, Decimal]] = {}
    for asset, band, hours in rows:  # one row per machine and band
        if asset not in gpu_counts:
            continue  # not a GPU machine, as far as the inventory and the catalog know
        per = out.setdefault(teams[asset], {b: Decimal(0) for b in BANDS})
        per[band] += Decimal(str(hours)) * gpu_counts[asset]
    return {t: {b: hours_text(h) for b, h in per.items()} for t, per in sorted(out.items())}


def total_bands(by_team: dict[str, dict[str, str]]) -> dict[str, str]:
    total = {b: Decimal(0) for b in BANDS}
    for per in by_team.values():
        for b, h in per.items():
            total[b] += Decimal(h)
    return {b: hours_text(h) for b, h in total.items()}

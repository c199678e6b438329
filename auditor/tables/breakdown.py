"""Where the money went, in SQL: spend by provider, account, region, team and project; GPU-hours by pricing
(spot, on-demand, committed); per-team detail for a team's own view of the report; billing coverage of the
window; the spend of the window before; and the next window's forecast at the current run rate.

Every amount stays per currency ({currency: Decimal}); the engine rounds once, to the cent, at output.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from auditor.model import HOURS_PER_MONTH, UNATTRIBUTED
from auditor.sql import lit
from auditor.tables import split, stats
from auditor.tables.sql import GPU_HOURS, PRICING_SQL
from auditor.tables.store import Store
from auditor.tables.tagmaps import tag_set_maps
from auditor.window import Window, add_months, next_window, previous_window

TOP = 20  # rows kept per breakdown; the rest are summed into one "(N more)" row
PRICING = ("on_demand", "spot", "committed")
DIMENSIONS = {
    "provider": "x_Provider",
    "account": "x_Provider || ' ' || COALESCE(SubAccountId, BillingAccountId, '(no account)')",
    "region": "COALESCE(RegionId, '(global)')",
}


def hours_text(value: Decimal | None) -> str:
    """GPU-hours go to JSON as a string with one decimal, as the summary's gpu_hours does."""
    return str(Decimal(value or 0).quantize(Decimal("0.1")))


def _add(into: dict[str, Decimal], cur: str, amount: Decimal | None) -> None:
    if amount is not None:
        into[cur] = into.get(cur, Decimal(0)) + amount


def attributed(store: Store, window: Window, team_key: str, project_key: str) -> str:
    """The window's `costs` rows, with the provider's split moved among them (split.with_split), with `team` and
    `project` columns: the lookups run once per distinct tag set id and category (tax is no team's: tables/sql.py
    spend_team_sql), into a table kept for the store's life, and are joined back by the id, rather than once per
    row or once per query. The split's rows carry the tag set id of the tags they move to or from."""
    rows = split.with_split(store, window.where())  # the provider's split of shared nodes moved (split.py)
    key = (window, team_key, project_key)
    if key not in store.attributions:
        store.tag_set_ids()
        store.attributions[key] = f"attribution_{len(store.attributions)}"
        store.con.execute(f"""
            CREATE OR REPLACE TEMP TABLE {store.attributions[key]} AS
            SELECT tag_set, x_CostCategory, COALESCE({team_key}, {lit(UNATTRIBUTED)}) AS team,
                   COALESCE({project_key}, '(no project)') AS project
            FROM (SELECT DISTINCT x_TagSet AS tag_set, x_CostCategory FROM {rows})
            JOIN {tag_set_maps(store)} USING (tag_set)""")
        store.con.execute(f"""
            CREATE OR REPLACE TEMP TABLE {store.attributions[key]}_spend AS
            SELECT team, project, x_CostCategory, x_Provider, PricingCategory, x_GpuModel, BillingCurrency,
                   date_trunc('week', ChargePeriodStart) AS week, sum(BilledCost) AS billed, {GPU_HOURS} AS gh
            FROM {_joined(rows, store.attributions[key])} GROUP BY ALL""")
    return _joined(rows, store.attributions[key])


def _joined(rows: str, table: str) -> str:
    return f"""(SELECT c.*, t.team, t.project FROM {rows} c
                JOIN {table} t ON c.x_TagSet = t.tag_set AND c.x_CostCategory IS NOT DISTINCT FROM t.x_CostCategory)"""


def spend_by_team(store: Store, window: Window, team_key: str, project_key: str) -> dict[str, dict[str, Decimal]]:
    """{team: {currency: amount}} of the window's lines as billed, without the provider's split (which the
    summary moves in after: split.apply): each tag set's team as `attributed` looks it up, once."""
    attributed(store, window, team_key, project_key)
    return stats.per_currency(store.con, f"""
        WITH g AS (SELECT x_TagSet, x_CostCategory, BillingCurrency, sum(BilledCost) AS cost FROM costs
                   WHERE {window.where()} GROUP BY ALL)
        SELECT t.team, BillingCurrency, sum(cost) FROM g JOIN {store.attributions[(window, team_key, project_key)]} t
            ON g.x_TagSet = t.tag_set AND g.x_CostCategory IS NOT DISTINCT FROM t.x_CostCategory
        GROUP BY ALL ORDER BY 1, 2""")


def attributed_spend(store: Store, window: Window, team_key: str, project_key: str) -> str:
    """The rows of `attributed` summed in one scan, made with its table, by team, project, category, provider,
    pricing, GPU model, currency and ISO week (`week`): cost (`billed`) and GPU-hours (`gh`), exact sums of
    sums. Every spend view at those grains (the team and project breakdowns, a team's own report, the weekly
    chart) sums this table's few rows, rather than each scanning the lines again."""
    attributed(store, window, team_key, project_key)
    return f"{store.attributions[(window, team_key, project_key)]}_spend"


def spend_breakdown(store: Store, window: Window, currency: str, team_key: str,
                    project_key: str) -> dict[str, list[dict[str, Any]]]:
    """{dimension: [{key, billed_cost, gpu_cost}]}, largest first in the policy's currency; at most TOP rows
    each, the rest summed per currency into one last row."""
    keys = {**DIMENSIONS, "team": "team", "project": "project"}
    spend = attributed_spend(store, window, team_key, project_key)
    out = {}
    for dim, key in keys.items():
        # the team and project from their summed rows; the lines' own dimensions from the lines (without the split)
        amount = "billed" if dim in ("team", "project") else "BilledCost"
        rows = store.con.execute(f"""
            WITH b AS (
                SELECT {key} AS k, BillingCurrency AS cur, sum({amount}) AS billed,
                       sum({amount}) FILTER (WHERE x_CostCategory = 'gpu_compute') AS gpu
                FROM {spend if dim in ("team", "project") else f"costs WHERE {window.where()}"} GROUP BY ALL),
            r AS (SELECT k, sum(billed) FILTER (WHERE cur = ?) AS main FROM b GROUP BY k)
            SELECT b.k, b.cur, b.billed, b.gpu FROM b JOIN r USING (k)
            ORDER BY r.main DESC NULLS LAST, b.k, b.cur""", [currency]).fetchall()
        items: list[dict[str, Any]] = []
        for k, cur, billed, gpu in rows:  # one row per key and currency: a handful, not billing lines
            if not items or items[-1]["key"] != k:
                items.append({"key": k, "billed_cost": {}, "gpu_cost": {}})
            _add(items[-1]["billed_cost"], cur, billed)
            _add(items[-1]["gpu_cost"], cur, gpu)
        if len(items) > TOP:
            rest: dict[str, Any] = {"key": f"({len(items) - TOP + 1} more)", "billed_cost": {}, "gpu_cost": {},
                                    "rest": True}
            for item in items[TOP - 1:]:
                for field in ("billed_cost", "gpu_cost"):
                    for cur, amount in item[field].items():
                        _add(rest[field], cur, amount)
            items = items[:TOP - 1] + [rest]
        out[dim] = items
    return out


def team_spend(store: Store, window: Window, team_key: str, project_key: str) -> dict[str, dict[str, Any]]:
    """Per team (UNATTRIBUTED for the rest): spend by category, provider and project, GPU compute by provider
    and project, and GPU-hours by pricing and by GPU model, so that a team's own report shows its own money."""
    rows = attributed_spend(store, window, team_key, project_key)
    out: dict[str, dict[str, Any]] = {}

    def entry(t: str) -> dict[str, Any]:
        return out.setdefault(t, {"by_category": {}, "by_provider": {}, "by_project": {}, "gpu_by_provider": {},
                                  "gpu_by_project": {}, "gpu_hours_by_pricing": {p: Decimal(0) for p in PRICING},
                                  "by_model": {}})

    for part, key in (("by_category", "COALESCE(x_CostCategory, 'other')"), ("by_provider", "x_Provider"),
                      ("by_project", "project")):
        for t, k, cur, amount, gpu in store.con.execute(
                f"SELECT team, {key}, BillingCurrency, sum(billed), "
                f"sum(billed) FILTER (WHERE x_CostCategory = 'gpu_compute') FROM {rows} "
                "GROUP BY ALL ORDER BY 1, 2, 3").fetchall():
            _add(entry(t)[part].setdefault(k, {}), cur, amount)
            if part != "by_category" and gpu is not None:
                _add(entry(t)["gpu_" + part].setdefault(k, {}), cur, gpu)
    for t, pricing, hours in store.con.execute(
            f"SELECT team, {PRICING_SQL}, sum(gh) AS h FROM {rows} "
            "GROUP BY ALL HAVING h IS NOT NULL ORDER BY 1, 2").fetchall():
        entry(t)["gpu_hours_by_pricing"][pricing] += hours
    for t, model, cur, hours, amount in store.con.execute(
            f"SELECT team, x_GpuModel, BillingCurrency, sum(gh), sum(billed) FROM {rows} "
            "WHERE x_CostCategory = 'gpu_compute' GROUP BY ALL ORDER BY 1, 2, 3").fetchall():
        m = entry(t)["by_model"].setdefault(model or "(unknown)", {"gpu_hours": Decimal(0), "billed_cost": {}})
        m["gpu_hours"] += hours or 0
        _add(m["billed_cost"], cur, amount)
    for detail in out.values():
        detail["gpu_hours_by_pricing"] = {p: hours_text(h) for p, h in detail["gpu_hours_by_pricing"].items()}
        detail["by_model"] = {k: {"gpu_hours": hours_text(v["gpu_hours"]), "billed_cost": v["billed_cost"]}
                              for k, v in detail["by_model"].items()}
    return out


def gpu_hours_by_pricing(teams: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The organisation's GPU-hours by spot, on-demand and committed: the teams' added up (hours, not money)."""
    total = {p: Decimal(0) for p in PRICING}
    for detail in teams.values():
        for p, h in (detail.get("gpu_hours_by_pricing") or {}).items():
            total[p] += Decimal(h)
    return {p: hours_text(h) for p, h in total.items()}


def gpu_by_model(teams: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """GPU-hours and billed GPU spend by GPU model for the organisation, most GPU-hours first."""
    models: dict[str, dict[str, Any]] = {}
    for detail in teams.values():
        for model, v in (detail.get("by_model") or {}).items():
            m = models.setdefault(model, {"model": model, "gpu_hours": Decimal(0), "billed_cost": {}})
            m["gpu_hours"] += Decimal(v["gpu_hours"])
            for cur, amount in v["billed_cost"].items():
                _add(m["billed_cost"], cur, amount)
    ordered = sorted(models.values(), key=lambda m: (-m["gpu_hours"], m["model"]))
    return [{**m, "gpu_hours": hours_text(m["gpu_hours"])} for m in ordered]


def previous_spend(store: Store, window: Window) -> dict[str, Any] | None:
    """The window before, when the billing read covers it: its spend, for the quarter-over-quarter change."""
    prev = previous_window(window)
    rows = store.value(f"SELECT COALESCE(sum(x_Lines), 0) FROM costs WHERE {prev.where()}")
    if not rows:
        return None
    totals = stats.per_currency(store.con,
        f"SELECT 'billed', BillingCurrency, sum(BilledCost) FROM costs WHERE {prev.where()} GROUP BY ALL "
        f"UNION ALL SELECT 'gpu', BillingCurrency, sum(BilledCost) FROM costs WHERE {prev.where()} "
        "AND x_CostCategory = 'gpu_compute' GROUP BY ALL")
    return {"label": prev.label, "start": prev.start, "end": prev.end, "rows": rows,
            "billed_cost": totals.get("billed", {}), "gpu_cost": totals.get("gpu", {})}


def coverage(store: Store, window: Window) -> dict[str, Any]:
    """Billing lines per provider and calendar month of the window, and the months a provider has none."""
    counts = store.con.execute(
        f"SELECT strftime(date_trunc('month', ChargePeriodStart), '%Y-%m'), x_Provider, sum(x_Lines) FROM costs "
        f"WHERE {window.where()} GROUP BY ALL ORDER BY 1, 2").fetchall()
    months = []
    m = window.start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    while m < window.end:
        months.append(m.strftime("%Y-%m"))
        m = add_months(m, 1)
    providers = sorted({p for _, p, _ in counts})
    by_month: dict[str, dict[str, int]] = {mo: {} for mo in months}
    for mo, p, n in counts:
        by_month.setdefault(mo, {})[p] = n
    missing = [f"no {p} billing lines for {mo}" for mo in months for p in providers if not by_month[mo].get(p)]
    if not counts:
        missing.append(f"no billing lines in the window {window.label}")
    return {"months": [{"month": mo, "lines": by_month[mo]} for mo in months], "missing": missing}


def over_next(window: Window, monthly: dict[str, Decimal]) -> dict[str, Decimal]:
    """Monthly amounts (730-hour months) over the hours of the next window: the one quarterly savings figure,
    the forecast's and the summary's alike."""
    hours = next_window(window).hours
    return {cur: amount * hours / HOURS_PER_MONTH for cur, amount in monthly.items()}


def forecast(store: Store, window: Window, team_key: str,
             monthly_savings: dict[str, Decimal]) -> dict[str, Any] | None:
    """Next window's spend at the current run rate: the billed cost per hour of the window's last calendar month
    (up to where the billing ends), times the hours of the next window; and the same less the recommended
    monthly savings over those hours. Per team with the provider's split moved in (split.with_split), as every
    view of team spend."""
    data_end = store.value(
        f"SELECT max(least(COALESCE(ChargePeriodEnd, ChargePeriodStart), TIMESTAMP {lit(window.end.isoformat(' '))}))"
        f" FROM costs WHERE {window.where()}")
    if data_end is None:
        return None
    month = (window.end - timedelta(microseconds=1)).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start = max(window.start, month)
    if data_end <= start:  # the billing stops before the last month: the run rate of what it covers
        start = window.start
    basis = Window.of(start, data_end)
    if basis.hours <= 0:
        return None
    nxt = next_window(window)
    total: dict[str, Decimal] = {}
    gpu: dict[str, Decimal] = {}
    by_team: dict[str, dict[str, Decimal]] = {}
    # The team looked up once per tag set (stats.keyed), not per line, over the rows with the provider's split
    # moved in: a team's run rate follows the split, as its spend does.
    lines = stats.keyed(team_key, "true", "sum(BilledCost) AS billed, "
                        "sum(BilledCost) FILTER (WHERE x_CostCategory = 'gpu_compute') AS gpu", tag_set_maps(store),
                        source=split.with_split(store, basis.where()))
    for t, cur, billed, gpu_billed in store.con.execute(
            f"SELECT COALESCE(key, {lit(UNATTRIBUTED)}), BillingCurrency, sum(billed), sum(gpu) FROM {lines} "
            "GROUP BY ALL ORDER BY 1, 2").fetchall():
        _add(total, cur, billed)
        _add(gpu, cur, gpu_billed)
        _add(by_team.setdefault(t, {}), cur, billed)

    def scale(amounts: dict[str, Decimal]) -> dict[str, Decimal]:  # multiply first: no precision lost to 1/3
        return {cur: amount * nxt.hours / basis.hours for cur, amount in amounts.items()}

    total, gpu, by_team = scale(total), scale(gpu), {t: scale(v) for t, v in by_team.items()}
    savings = over_next(window, monthly_savings)
    with_savings = {cur: max(amount - savings.get(cur, Decimal(0)), Decimal(0)) for cur, amount in total.items()}
    return {
        "basis": {"start": basis.start, "end": basis.end, "label": basis.label, "hours": str(basis.hours)},
        "next": {"start": nxt.start, "end": nxt.end, "label": nxt.label, "hours": str(nxt.hours)},
        "billed_cost": total, "gpu_cost": gpu, "by_team": by_team, "savings": savings,
        "with_savings": with_savings,
    }

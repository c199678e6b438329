"""Spend over time, for the charts: GPU compute per ISO week and team, GPU utilisation bands per ISO week, and
the daily spend of the resources of the findings a report shows first (their sparklines).

The weekly GPU compute is apportioned (figures.apportion_amounts) to the window's GPU compute as the summary
shows it, per currency, so the chart's cells add up to that figure to the cent."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from auditor.figures import TOP_ACTIONS, apportion_amounts
from auditor.model import UNATTRIBUTED, money
from auditor.sql import lit
from auditor.tables.breakdown import attributed_spend, hours_text
from auditor.tables.fleet import BANDS
from auditor.tables.store import Store
from auditor.window import Window

BAND_SQL = ("CASE WHEN mean_util_pct < 10 THEN 'under_10' WHEN mean_util_pct <= 50 THEN '10_to_50' "
            "ELSE 'over_50' END")  # the bands of fleet.utilisation


def _weeks(window: Window) -> list[datetime]:
    """The Mondays (UTC) of the ISO weeks the window touches."""
    start = window.start.replace(hour=0, minute=0, second=0, microsecond=0)
    week = start - timedelta(days=start.weekday())
    out = []
    while week < window.end:
        out.append(week)
        week += timedelta(days=7)
    return out


def _label(week: datetime) -> str:
    year, number, _ = week.isocalendar()
    return f"{year}-W{number:02d}"


def weekly(store: Store, window: Window, team_key: str, project_key: str, gpu_total: dict[str, Decimal],
           gpu_counts: dict[str, int], teams_of: dict[str, str]) -> dict[str, Any]:
    """{teams, weeks: [{week, start, gpu_cost: {currency: {team: amount}}, utilisation: {team: {band: hours}}}]}.
    Teams are listed by GPU compute in the window, largest first (currencies in their alphabetical order)."""
    weeks = _weeks(window)
    rows = store.con.execute(f"""
        SELECT week AS w, team, BillingCurrency, sum(billed)
        FROM {attributed_spend(store, window, team_key, project_key)}
        WHERE x_CostCategory = 'gpu_compute' GROUP BY ALL ORDER BY 1, 2, 3""").fetchall()
    cells: dict[tuple[str, str], dict[str, Decimal]] = {}
    for w, team, cur, amount in rows:
        if amount is not None:
            cells.setdefault((_label(w), team or UNATTRIBUTED), {})[cur] = amount
    shares = apportion_amounts(cells, {c: money(v) for c, v in gpu_total.items()})
    totals: dict[str, dict[str, Decimal]] = {}
    for (_, team), amounts in shares.items():
        for cur, amount in amounts.items():
            t = totals.setdefault(team, {})
            t[cur] = t.get(cur, Decimal(0)) + amount
    # the costliest first, then by name; the amounts a tuple of their own (a team may spend in fewer currencies:
    # one amount beside a name compared a Decimal with a str)
    teams = sorted(totals, key=lambda t: (tuple(-v for _, v in sorted(totals[t].items())), t))

    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    usage = store.con.execute(f"""
        WITH w AS (SELECT unnest(generate_series(TIMESTAMP {lit(weeks[0].isoformat(' '))},
                                                 TIMESTAMP {we} - INTERVAL 1 MICROSECOND, INTERVAL 7 DAY)) AS s)
        SELECT w.s, u.asset_id, {BAND_SQL},
               sum(greatest(epoch(least(u.window_end, w.s + INTERVAL 7 DAY, TIMESTAMP {we}))
                            - epoch(greatest(u.window_start, w.s, TIMESTAMP {ws})), 0) / 3600.0)
        FROM gpu_usage u JOIN w ON u.window_start < least(w.s + INTERVAL 7 DAY, TIMESTAMP {we})
                                AND u.window_end > greatest(w.s, TIMESTAMP {ws})
        WHERE u.mean_util_pct IS NOT NULL GROUP BY ALL ORDER BY 1, 2, 3""").fetchall() if weeks else []
    bands: dict[str, dict[str, dict[str, Decimal]]] = {}
    for w, asset, band, hours in usage:
        if asset in gpu_counts:  # a GPU machine, as the inventory and the catalog know it (fleet.utilisation)
            per = bands.setdefault(_label(w), {}).setdefault(teams_of[asset], {b: Decimal(0) for b in BANDS})
            per[band] += Decimal(str(hours)) * gpu_counts[asset]
    out = []
    for week in weeks:
        label = week.strftime("%Y-%m-%d")
        gpu: dict[str, dict[str, Decimal]] = {}
        for team in teams:
            for cur, amount in shares.get((_label(week), team), {}).items():
                gpu.setdefault(cur, {})[team] = amount
        util = {t: {b: hours_text(h) for b, h in per.items()} for t, per in sorted(bands.get(_label(week), {}).items())}
        out.append({"week": _label(week), "start": label, "gpu_cost": gpu, "utilisation": util or None})
    return {"teams": teams, "weeks": out}


def shown_first(acts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The actions a report lists first, for the organisation and for each team (outputs/view.py's top
    actions): they are ranked already (figures.actions)."""
    by_team: dict[str, list[dict[str, Any]]] = {}  # each team's first, in one pass over the actions
    for a in acts:
        first = by_team.setdefault(a["team"] or UNATTRIBUTED, [])
        if len(first) < TOP_ACTIONS:
            first.append(a)
    return acts[:TOP_ACTIONS] + [a for team in sorted(by_team) for a in by_team[team]]


def sparklines(store: Store, window: Window, acts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{resource: {currency, start, days: [amount per UTC day of the window]}} for the resources of the actions
    shown first, in the action's currency, where the billing has the resource on two days or more; one query."""
    wanted = {a["resource"]: a["currency"] for a in shown_first(acts)}
    if not wanted:
        return {}
    rows = store.con.execute(f"""
        SELECT ResourceId, CAST(ChargePeriodStart AS DATE), BillingCurrency, sum(BilledCost)
        FROM costs WHERE {window.where()} AND ResourceId IN ({', '.join(lit(r) for r in sorted(wanted))})
        GROUP BY ALL ORDER BY 1, 2, 3""").fetchall()
    first = window.start.date()
    midnight = datetime.combine(first, datetime.min.time(), window.start.tzinfo)
    days = max(1, -(-(window.end - midnight) // timedelta(days=1)))  # the UTC days the window touches
    series: dict[str, dict[int, Decimal]] = {}
    for resource, day, cur, amount in rows:
        if cur == wanted[resource] and amount is not None:
            series.setdefault(resource, {})[(day - first).days] = amount
    return {r: {"currency": wanted[r], "start": first.isoformat(),
                "days": [money(per.get(i, Decimal(0))) for i in range(days)]}
            for r, per in sorted(series.items()) if len(per) >= 2}

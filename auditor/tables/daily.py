"""GPU compute usage day by day (UTC, the grain of the `costs` table) per team, account and instance family: the series
the spend-anomaly rule (ANOM001) judges, each with the daily spend of its costliest resources, so that a day out of
line can name what drove it, and which of those resources are jobs."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from auditor.model import UNATTRIBUTED, GpuSpendSeries
from auditor.providers.catalog import family_sql
from auditor.tables.breakdown import attributed
from auditor.tables.sql import spend_team_sql, tag_sql
from auditor.tables.store import Store
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.policy import Policy

DIMENSIONS = ("team", "account", "family")
RESOURCES = 200  # resources kept per series, by their costliest day: a day's drivers are among them


def _jobs(store: Store) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Jobs by lower-case id, and their ids by last segment: billing names a job by its id or an ARN ending in it."""
    names = {rid.lower(): name or rid for rid, name in store.con.execute("SELECT id, name FROM jobs").fetchall()}
    tails: dict[str, list[str]] = {}
    for rid in names:
        tails.setdefault(re.split(r"[/:]", rid)[-1], []).append(rid)
    return names, tails


def _job_of(rid: str, names: dict[str, str], tails: dict[str, list[str]]) -> str | None:
    if rid in names:
        return names[rid]
    for job in tails.get(re.split(r"[/:]", rid)[-1], []):
        if rid.endswith("/" + job) or rid.endswith(":" + job):
            return names[job]
    return None


def spend_series(store: Store, window: Window, policy: Policy) -> list[GpuSpendSeries]:
    """One series per dimension, key and currency with GPU compute in the window; days without any billing line
    (before an export starts, after it ends) are None, not 0."""
    team_key, project_key = spend_team_sql(policy), tag_sql(policy.project_tags)
    first = window.start.date()
    n = max(1, -(-(window.end - window.start.replace(hour=0, minute=0, second=0, microsecond=0))
                 // timedelta(days=1)))
    billed = {d for (d,) in store.con.execute(
        f"SELECT DISTINCT CAST(ChargePeriodStart AS DATE) FROM costs WHERE {window.where()}").fetchall()}
    account = "x_Provider || ' ' || COALESCE(SubAccountId, BillingAccountId, '(no account)')"
    family = f"x_Provider || ' ' || COALESCE({family_sql('x_Provider', 'x_InstanceType')}, '(no instance type)')"
    store.con.execute(f"""
        CREATE OR REPLACE TEMP TABLE daily_gpu AS
        WITH g AS (SELECT team, {account} AS account, {family} AS family, BillingCurrency AS cur,
                          CAST(ChargePeriodStart AS DATE) AS day, COALESCE(lower(ResourceId), '') AS rid,
                          sum(BilledCost) AS cost
                   FROM {attributed(store, window, team_key, project_key)}
                   WHERE x_CostCategory = 'gpu_compute' AND ChargeCategory = 'Usage' AND BilledCost IS NOT NULL
                   GROUP BY ALL)
        SELECT 'team' AS dim, team AS k, cur, day, rid, sum(cost) AS cost FROM g GROUP BY ALL
        UNION ALL SELECT 'account', account, cur, day, rid, sum(cost) FROM g GROUP BY ALL
        UNION ALL SELECT 'family', family, cur, day, rid, sum(cost) FROM g GROUP BY ALL""")
    totals = store.con.execute("SELECT dim, k, cur, day, sum(cost) FROM daily_gpu GROUP BY ALL").fetchall()
    top = store.con.execute(f"""
        WITH r AS (SELECT dim, k, cur, rid, max(cost) AS peak FROM daily_gpu WHERE rid <> '' GROUP BY dim, k, cur, rid
                   QUALIFY row_number() OVER (PARTITION BY dim, k, cur ORDER BY peak DESC, rid) <= {RESOURCES})
        SELECT d.dim, d.k, d.cur, d.rid, d.day, d.cost FROM daily_gpu d JOIN r USING (dim, k, cur, rid)""").fetchall()
    store.con.execute("DROP TABLE daily_gpu")
    series: dict[tuple[str, str, str], GpuSpendSeries] = {}
    for dim, key, cur, day, amount in totals:
        s = series.get((dim, key, cur))
        if s is None:
            days: list[Decimal | None] = [Decimal(0) if first + timedelta(days=i) in billed else None
                                          for i in range(n)]
            tags = {policy.team_tags[0]: key} if dim == "team" and key != UNATTRIBUTED else {}
            s = series[(dim, key, cur)] = GpuSpendSeries(f"gpu-spend/{dim}/{key}/{cur}", dim, key, cur, first,
                                                         days, tags=tags)
        s.days[(day - first).days] = amount
    names, tails = _jobs(store)
    for dim, key, cur, rid, day, amount in top:
        s = series[(dim, key, cur)]
        if (spent := s.resources.get(rid)) is None:  # a resource's job looked up once, not once a day
            spent = s.resources[rid] = {}
            if (job := _job_of(rid, names, tails)) is not None:
                s.jobs[rid] = job
        spent[(day - first).days] = amount
    order = {d: i for i, d in enumerate(DIMENSIONS)}
    return sorted(series.values(), key=lambda s: (order[s.dimension], s.key, s.currency))

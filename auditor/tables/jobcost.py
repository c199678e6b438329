"""Cost per training job and sweep in the window, computed once in SQL over `jobs` and `costs`.

A job's cost is found the first of these ways that finds billing lines:
- `resource`: lines whose resource id is the job (a SageMaker training job ARN), or ends with it;
- `label`: lines whose job label (policy `attribution.job_tags`) names the job's id or name (the labels a team puts
  on a Vertex AI or Azure ML job, which the provider copies onto its billing lines);
- `node_share`: a job on machines billed as machines (Kubernetes and the like): its GPU-hours in the window times
  the billed cost per GPU-hour of the same instance type, provider and region (lines no job label claims).
A sweep costs what its trials (jobs whose `sweep_id` is the sweep) cost, plus any line found for the sweep itself.

GPU-hours are the billing's (usage hours x GPUs) where the lines say, else the job's training time (or its run in
the window) x instances x GPUs. Waste counts what is known to be lost: GPU-hours redone after interruptions (half
the checkpoint interval each time, where the interval is known) and, where utilisation was measured, the idle
share of the rest; efficiency (useful / billed GPU-hours) is given only where utilisation was measured. Rows are
one per job and currency (a job with no cost found: one row without a currency); trials are rows of their own, so
totals are summed over the rows without a `sweep_id`.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from auditor.audit_model import JobTotals
from auditor.model import gpus
from auditor.sql import last_segment, lit
from auditor.tables.sql import GPU_HOURS, GPU_USAGE, tag_sql, team_sql
from auditor.tables.store import Store
from auditor.tables.tagmaps import tag_set_maps
from auditor.window import Window

if TYPE_CHECKING:
    from auditor.model import Finding
    from auditor.policy import Policy

MANAGED = ("sagemaker", "vertex-ai", "azureml")  # billed per job, never through the machines' share
HOURS = Decimal("0.1")  # GPU-hours to one decimal, as everywhere in audit.json


def job_costs(store: Store, window: Window, policy: Policy, findings: Sequence[Finding] = ()) -> list[dict[str, Any]]:
    ws, we = lit(window.start.isoformat(" ")), lit(window.end.isoformat(" "))
    managed = ", ".join(lit(p) for p in MANAGED)
    rows = store.con.execute(f"""
        WITH j AS (
            SELECT j.*, lower(j.id) AS lid, lower(COALESCE(j.name, j.id)) AS lname,
                   COALESCE(j.gpu_count, ct.gpu_count) AS gpus, COALESCE(j.gpu_model, ct.gpu_model) AS model,
                   lower(regexp_replace(j.instance_type, '^ml\\.', '')) AS itype,
                   COALESCE(j.instance_count, 1) * COALESCE(j.gpu_count, ct.gpu_count) AS gpus_held,
                   greatest(epoch(least(COALESCE(j.end_time, TIMESTAMP {we}), TIMESTAMP {we}))
                            - epoch(greatest(j.start_time, TIMESTAMP {ws})), 0) / 3600.0 AS run_h
            FROM jobs j LEFT JOIN catalog_instance_types ct ON ct.provider = j.provider
                 AND ct.instance_type = lower(regexp_replace(j.instance_type, '^ml\\.', ''))
            WHERE (j.start_time IS NULL OR j.start_time < TIMESTAMP {we})
              AND (j.end_time IS NULL OR j.end_time >= TIMESTAMP {ws})),
        ids AS (SELECT ResourceId, BillingCurrency AS cur, sum(BilledCost) AS cost, {GPU_HOURS} AS gh
                FROM costs WHERE {window.where()} AND ResourceId IS NOT NULL GROUP BY ALL),
        r AS (SELECT lower(ResourceId) AS rid, {last_segment("lower(ResourceId)")} AS tail,
                     cur, sum(cost) AS cost, sum(gh) AS gh FROM ids GROUP BY ALL),
        by_resource AS (
            SELECT id, cur, sum(cost) AS cost, sum(gh) AS gh FROM (
                SELECT j.id, r.cur, r.cost, r.gh FROM j JOIN r ON r.rid = j.lid
                UNION ALL
                SELECT j.id, r.cur, r.cost, r.gh FROM j JOIN r ON r.tail = j.lid AND r.rid <> j.lid)
            GROUP BY ALL),
        labels AS (SELECT tag_set, {tag_sql(policy.job_tags)} AS label FROM {tag_set_maps(store)}),
        t AS (SELECT x_TagSet AS tag_set, BillingCurrency AS cur, sum(BilledCost) AS cost, {GPU_HOURS} AS gh
              FROM costs WHERE {window.where()} GROUP BY ALL),
        l AS (SELECT lower(label) AS label, cur, sum(cost) AS cost, sum(gh) AS gh FROM t JOIN labels USING (tag_set)
              GROUP BY ALL HAVING label IS NOT NULL),
        by_label AS (SELECT id, cur, sum(cost) AS cost, sum(gh) AS gh FROM (  -- by id, else by name: two joins
                         SELECT j.id, l.cur, l.cost, l.gh FROM j JOIN l ON l.label = j.lid
                         UNION ALL SELECT j.id, l.cur, l.cost, l.gh FROM j
                                   JOIN l ON l.label = j.lname AND l.label IS DISTINCT FROM j.lid)
                     GROUP BY ALL),
        machines AS (SELECT x_TagSet AS tag_set, x_Provider, RegionId, x_InstanceType, BillingCurrency,
                            sum(BilledCost) AS cost, sum(ConsumedQuantity * x_GpuCount) AS gh
                     FROM costs WHERE {window.where()} AND {GPU_USAGE} GROUP BY ALL),
        rate AS (SELECT x_Provider AS provider, RegionId AS region, lower(x_InstanceType) AS itype,
                        BillingCurrency AS cur, sum(cost) AS cost, sum(gh) AS gh
                 FROM machines JOIN labels USING (tag_set) WHERE label IS NULL
                 GROUP BY ALL HAVING gh > 0),  -- the machines' lines, not those a job label claims
        by_share AS (
            SELECT j.id, rate.cur,
                   CAST(rate.cost AS DECIMAL(38, 10))
                   * CAST(round(j.run_h * j.gpus_held / rate.gh, 12) AS DECIMAL(38, 12)) AS cost,
                   j.run_h * j.gpus_held AS gh
            FROM j JOIN rate ON rate.provider = j.provider AND rate.region = j.region AND rate.itype = j.itype
            WHERE j.platform NOT IN ({managed}) AND j.kind IS DISTINCT FROM 'sweep' AND j.run_h > 0
              AND j.gpus_held > 0),
        direct AS (
            SELECT id, cur, cost, gh, 'resource' AS basis FROM by_resource
            UNION ALL SELECT id, cur, cost, gh, 'label' FROM by_label
                WHERE id NOT IN (SELECT id FROM by_resource)
            UNION ALL SELECT id, cur, cost, gh, 'node_share' FROM by_share
                WHERE id NOT IN (SELECT id FROM by_resource) AND id NOT IN (SELECT id FROM by_label)),
        per AS (
            SELECT j.id, d.cur, d.cost, d.basis, j.sweep_id, j.state, j.interruptions, j.mean_util_pct,
                   CAST(COALESCE(d.gh, COALESCE(j.training_s / 3600.0, j.run_h) * j.gpus_held) AS DOUBLE) AS gh,
                   CASE WHEN COALESCE(j.interruptions, 0) = 0 THEN 0.0
                        WHEN j.checkpoint_interval_min IS NOT NULL
                        THEN j.interruptions * j.checkpoint_interval_min / 120.0 * j.gpus_held END AS lost
            FROM j LEFT JOIN direct d USING (id)),
        m AS (SELECT *, (gh - COALESCE(lost, 0)) * COALESCE(mean_util_pct, 100) / 100 AS useful FROM per),
        trials AS (SELECT sweep_id, count(DISTINCT id) AS n,
                          count(DISTINCT id) FILTER (WHERE state = 'completed') AS done,
                          count(DISTINCT id) FILTER (WHERE state = 'stopped') AS stopped,
                          sum(interruptions) AS interruptions, bool_and(mean_util_pct IS NOT NULL) AS measured
                   FROM m WHERE sweep_id IS NOT NULL GROUP BY 1),
        trial_money AS (SELECT sweep_id, cur, sum(cost) AS cost, sum(gh) AS gh, sum(useful) AS useful,
                               sum(lost) AS lost, string_agg(DISTINCT basis, ',' ORDER BY basis) AS basis
                        FROM m WHERE sweep_id IS NOT NULL AND cur IS NOT NULL GROUP BY ALL),
        rows AS (
            SELECT m.id, m.cur, m.cost, m.basis, m.gh, m.useful, m.lost, m.mean_util_pct IS NOT NULL AS measured
            FROM m JOIN j USING (id) WHERE j.kind IS DISTINCT FROM 'sweep'
            UNION ALL
            SELECT s.id, COALESCE(tm.cur, s.cur),
                   CASE WHEN tm.cost IS NULL THEN s.cost WHEN s.cur = tm.cur THEN s.cost + tm.cost ELSE tm.cost END,
                   COALESCE(tm.basis, s.basis), COALESCE(tm.gh, s.gh), COALESCE(tm.useful, s.useful),
                   COALESCE(tm.lost, s.lost), COALESCE(tr.measured, s.mean_util_pct IS NOT NULL)
            FROM (SELECT m.* FROM m JOIN j USING (id) WHERE j.kind = 'sweep') s
                 LEFT JOIN trial_money tm ON tm.sweep_id = s.id LEFT JOIN trials tr ON tr.sweep_id = s.id)
        SELECT j.id, j.name, j.platform, j.provider, j.account, j.region, COALESCE(j.kind, 'job'), j.sweep_id,
               {team_sql(policy)}, {tag_sql(policy.owner_tags)},
               j.state, j.instance_type, j.instance_count, j.model, j.gpus, j.spot,
               CASE WHEN j.kind = 'sweep' THEN tr.interruptions ELSE j.interruptions END, j.mean_util_pct,
               j.start_time, j.end_time, rows.cur, rows.cost, rows.basis, rows.gh, rows.useful, rows.lost,
               rows.measured, tr.n, tr.done, tr.stopped
        FROM rows JOIN j USING (id) LEFT JOIN trials tr ON tr.sweep_id = j.id
        ORDER BY rows.cost DESC NULLS LAST, j.id, rows.cur""").fetchall()
    on_job: dict[str, list[dict[str, str]]] = {}
    for f in findings:
        on_job.setdefault(f.resource, []).append({"rule": f.rule, "fingerprint": f.fingerprint,
                                                  "severity": f.severity.label, "message": f.message})
    return [_row(r, on_job) for r in rows]


def job_totals(rows: list[dict[str, Any]]) -> JobTotals:
    """The jobs' cost and known waste per currency, exact (summed before any rounding), over the jobs and sweeps
    (a trial is in its sweep), with how many there are and how many had no billing found."""
    cost: dict[str, Decimal] = {}
    waste: dict[str, Decimal] = {}
    top = [r for r in rows if not r["sweep_id"]]
    for r in top:
        if r["cost"] is not None:
            cost[r["currency"]] = cost.get(r["currency"], Decimal(0)) + r["cost"]
            waste[r["currency"]] = waste.get(r["currency"], Decimal(0)) + (r["waste"] or Decimal(0))
    return {"count": len({r["id"] for r in top}), "unpriced": sum(1 for r in top if r["cost"] is None),
            "cost": cost, "waste": waste}


def _hours(value: float | None) -> str | None:
    return None if value is None else str(Decimal(repr(value)).quantize(HOURS))


def _row(r: tuple, on_job: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    (jid, name, platform, provider, account, region, kind, sweep_id, team, owner, state, itype, count, model, gpus,
     spot, interruptions, util, start, end, cur, cost, basis, gh, useful, lost, measured, trials, done,
     stopped) = r
    waste = None
    if cost is not None and gh:
        # the share of GPU-hours known to be lost, applied to the cost (rounded once, where it is written)
        waste = cost * Decimal(repr(max(gh - useful, 0.0) / gh))
    sweep = kind == "sweep"
    return {
        "id": jid, "name": name, "platform": platform, "provider": provider, "account": account, "region": region,
        "kind": kind, "sweep_id": sweep_id, "team": team, "owner": owner, "state": state, "instance_type": itype,
        "instance_count": count, "gpu_model": model, "gpu_count": _gpu_count(gpus), "spot": bool(spot),
        "interruptions": interruptions, "mean_util_pct": util, "start_time": start, "end_time": end,
        "currency": cur, "cost": cost, "cost_basis": basis, "gpu_hours": _hours(gh),
        "useful_gpu_hours": _hours(useful) if measured else None, "lost_gpu_hours": _hours(lost),
        "efficiency_pct": (str(Decimal(repr(useful * 100 / gh)).quantize(Decimal("0.1")))
                           if measured and gh else None),
        "waste": waste,
        "trials": trials if sweep else None, "trials_completed": done if sweep else None,
        "trials_stopped_early": stopped if sweep else None,
        "cost_per_completed_trial": (cost / done if sweep and cost is not None and done else None),
        "findings": on_job.get(jid, []),
    }


def _gpu_count(count) -> int | float | None:
    """GPUs per instance as audit.json writes them: whole GPUs as an integer, a fractional GPU (an eighth of an
    L4 on a g6f) as a number."""
    count = gpus(count)
    return float(count) if isinstance(count, Decimal) else count

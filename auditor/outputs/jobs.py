"""The jobs of an audit (audit.json `jobs`, tables/jobcost.py) as views: `jobs.csv`, written row by row, and the
report's Jobs section (the top jobs and sweeps by cost, and by waste per team)."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from typing import Any, TextIO

from auditor.audit_model import AuditDoc
from auditor.model import UNATTRIBUTED
from auditor.text import safe_row

JOBS_CSV = "jobs.csv"
JOBS_FIELDS = ("id", "name", "kind", "sweep_id", "platform", "provider", "account", "region", "team", "owner",
               "state", "instance_type", "instance_count", "gpu_model", "gpu_count", "spot", "interruptions",
               "start_time", "end_time", "currency", "cost", "cost_basis", "gpu_hours", "mean_util_pct",
               "useful_gpu_hours", "lost_gpu_hours", "efficiency_pct", "waste", "trials", "trials_completed",
               "trials_stopped_early", "cost_per_completed_trial", "findings")
TOP_JOBS = 10
TOP_WASTE = 5


def _mine(job: dict[str, Any], team: str | None) -> bool:
    return team is None or (job.get("team") or UNATTRIBUTED) == team


def write_jobs_csv(doc: AuditDoc, fh: TextIO, team: str | None = None) -> None:
    """Every job, sweep and trial (with `team`, that team's), one row per job and currency, written as it goes."""
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(JOBS_FIELDS)
    for job in doc.get("jobs") or []:
        if _mine(job, team):
            row = {**job, "findings": json.dumps([f["fingerprint"] for f in job.get("findings") or []])}
            w.writerow(safe_row(list(map(row.get, JOBS_FIELDS))))


def _d(value: Any) -> Decimal:
    return Decimal(str(value)) if value not in (None, "") else Decimal(0)


def jobs_view(doc: AuditDoc, team: str | None = None) -> dict[str, Any]:
    """What the Jobs section shows: the costliest jobs and sweeps (trials are counted in their sweep), the
    costliest waste per team, and the totals by currency."""
    rows = [j for j in doc.get("jobs") or [] if _mine(j, team) and not j.get("sweep_id")]
    priced = [j for j in rows if j.get("cost") is not None]
    totals: dict[str, Decimal] = {}
    waste: dict[str, Decimal] = {}
    if team is None:  # the audit's exact totals (summary.jobs); a team's, summed from its rows' cents
        exact = doc["summary"].get("jobs")
        totals, waste = ({c: _d(v) for c, v in exact[k].items()} if exact else {} for k in ("cost", "waste"))
    for j in priced if team is not None else ():
        totals[j["currency"]] = totals.get(j["currency"], Decimal(0)) + _d(j["cost"])
        waste[j["currency"]] = waste.get(j["currency"], Decimal(0)) + _d(j.get("waste"))
    by_cost = sorted(priced, key=lambda j: (-_d(j["cost"]), j["id"]))[:TOP_JOBS]
    by_team: dict[str, list[dict[str, Any]]] = {}
    for j in sorted((j for j in priced if _d(j.get("waste")) > 0), key=lambda j: (-_d(j["waste"]), j["id"])):
        by_team.setdefault(j.get("team") or UNATTRIBUTED, []).append(j)
    return {"count": len({j["id"] for j in rows}), "unpriced": len(rows) - len(priced), "total": totals,
            "waste": waste,
            "by_cost": by_cost, "sweeps": [j for j in priced if j.get("kind") == "sweep"],
            "waste_by_team": [{"team": t, "jobs": js[:TOP_WASTE]} for t, js in sorted(by_team.items())]}

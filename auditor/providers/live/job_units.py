"""A job's tokens and samples from Prometheus counters the policy names (`attribution.token_series`,
`sample_series`): what the unit costs divide a job's cost by where the job has no label that says it.

Each series is a counter (a job's pod or rank counts its own): its total over the window is read from its hourly
maxima (`max_over_time(metric[1h])` at each hour), counted from 0 at its first point and with every fall taken as
a restart from 0 (the value after it counted whole), as Prometheus' `increase` treats a counter reset. The series
of one job are added. A series names its job in the first of the policy's `series_job_labels` whose value is a
job's name or id (`namespace/name`; with a `namespace` label, the job of that namespace); one that names none, or
several, is counted as unread. The total is written as the job's tag of the series' name, which the unit costs
look up after the job's own labels."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from auditor.providers.live import prometheus
from auditor.providers.live.pull import Pull

PERIOD = 3600


def counter_total(values: list[Decimal]) -> Decimal:
    """A counter's increase from 0 over its points, a fall being a restart from 0."""
    total, prev = Decimal(0), None
    for v in values:
        total += v if prev is None or v < prev else v - prev
        prev = v
    return total


def _job_of(labels: dict[str, str], names: list[str], jobs: list[dict[str, Any]]) -> dict[str, Any] | None:
    for label in names:
        value = labels.get(label)
        if not value:
            continue
        found = [j for j in jobs if value in (j["id"], j["name"])]
        if labels.get("namespace"):
            found = [j for j in found if j["id"] == f"{labels['namespace']}/{value}"] or found
        if len(found) == 1:
            return found[0]
    return None


def read(p: Pull) -> dict[str, int]:
    w = p.options.window
    start, end = w.start.replace(tzinfo=UTC), min(w.end.replace(tzinfo=UTC), datetime.now(UTC))
    totals: dict[tuple[str, str], Decimal] = {}  # (job id, metric) -> its series added
    jobs = {id(j): j for j in p.jobs}
    series = 0
    for names in p.options.unit_series.values():
        for metric in names:
            for s in prometheus.query_range(p, f"max_over_time({metric}[{PERIOD}s])", start, end, PERIOD):
                series += 1
                job = _job_of(s.get("metric") or {}, p.options.series_job_labels, list(jobs.values()))
                if job is None:
                    p.unread(f"{metric} series naming no job of the pull, or several")
                    continue
                values = []
                for pair in s.get("values") or []:
                    try:
                        v = Decimal(str(pair[1]))
                    except (InvalidOperation, IndexError, TypeError):
                        v = Decimal("NaN")
                    if v.is_finite() and v >= 0:
                        values.append(v)
                    else:
                        p.unread(f"{metric} samples that are not finite counts (NaN, Inf, negative)")
                key = (job["id"], metric)
                totals[key] = totals.get(key, Decimal(0)) + counter_total(values)
    by_id = {j["id"]: j for j in p.jobs}
    for (job_id, metric), total in totals.items():
        by_id[job_id].setdefault("tags", {})[metric] = format(total.normalize(), "f")
    return {"series": series, "jobs": len({job_id for job_id, _ in totals})}

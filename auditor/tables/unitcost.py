"""Unit costs (audit.json `summary.unit_costs`): what a GPU-hour of work and a million training tokens (or samples)
cost, per job, per team and for the window, in each currency, and how that moved against the previous audit.

- Cost per used GPU-hour: a job's cost / its useful GPU-hours (tables/jobcost.py: billed GPU-hours less those
  lost to interruptions, weighted by measured GPU utilisation), over the jobs whose utilisation was measured.
- Cost per million tokens (samples): a job's cost x 10^6 / the tokens (samples) it reports in a label or
  annotation the policy names (`attribution.token_tags`, `sample_tags`), else in a Prometheus counter it names
  (`token_series`, `sample_series`: the pull writes each job's total as its tag of the series' name,
  providers/live/job_units.py), over the jobs that report them.

A team's and the window's figures are ratios of sums over their jobs (a sweep counted once, its trials in it), so
a large job weighs as much as it cost. Amounts are exact until shown: rounded once, to the cent."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from auditor.model import money
from auditor.tables.store import Store

if TYPE_CHECKING:
    from auditor.policy import Policy

MILLION = Decimal(1_000_000)
UNITS = ("tokens", "samples")
NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kKmMbBtT]?)\s*")  # 2.5B, 300M, 1200000
SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


def count_of(tags: dict[str, str], keys: list[str]) -> Decimal | None:
    """The first of `keys` (case and spaces ignored) whose value is a count (`1200000`, `300M`, `2.5B`)."""
    folded = {k.strip().lower(): v for k, v in tags.items()}
    for key in keys:
        m = NUMBER.fullmatch(str(folded.get(key.strip().lower(), "")))
        if m:
            return Decimal(m.group(1)) * SCALE[m.group(2).lower()]
    return None


def _ratio(amount: Decimal, units: Decimal, per: Decimal = Decimal(1)) -> Decimal | None:
    return money(amount * per / units) if units else None


def _figures(cost: Decimal, used: Decimal, used_cost: Decimal, counts: dict[str, tuple[Decimal, Decimal]]
             ) -> dict[str, Any]:
    out: dict[str, Any] = {"cost": money(cost), "used_gpu_hours": str(used.quantize(Decimal("0.1"))),
                           "cost_per_used_gpu_hour": _ratio(used_cost, used)}
    for unit in UNITS:
        amount, n = counts.get(unit, (Decimal(0), Decimal(0)))
        out[unit] = str(n) if n else None
        out[f"cost_per_million_{unit}"] = _ratio(amount, n, MILLION)
    return out


def _change(now: Any, before: Any) -> float | None:
    if now is None or before in (None, "", "0", "0.00") or Decimal(str(before)) == 0:
        return None
    return round(float((Decimal(str(now)) - Decimal(str(before))) * 100 / Decimal(str(before))), 1)


class _Sum:
    def __init__(self) -> None:
        self.cost = Decimal(0)
        self.used = Decimal(0)
        self.used_cost = Decimal(0)
        self.counts: dict[str, tuple[Decimal, Decimal]] = {}

    def add(self, cost: Decimal, used: Decimal | None, counts: dict[str, Decimal | None]) -> None:
        self.cost += cost
        if used:
            self.used += used
            self.used_cost += cost
        for unit, n in counts.items():
            if n:
                amount, total = self.counts.get(unit, (Decimal(0), Decimal(0)))
                self.counts[unit] = (amount + cost, total + n)

    def figures(self) -> dict[str, Any]:
        return _figures(self.cost, self.used, self.used_cost, self.counts)


def unit_costs(store: Store, policy: Policy, label: str, jobs: list[dict[str, Any]],
               previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """{window, previous_window, jobs: [...], teams: {team: {currency: figures}}, total: {currency: figures}};
    figures carry `change_pct` against the previous audit's same team and currency where it had them."""
    tags = {rid: dict(t or {}) for rid, t in store.con.execute("SELECT id, tags FROM jobs").fetchall()}
    rows: list[dict[str, Any]] = []
    teams: dict[str, dict[str, _Sum]] = {}  # team -> currency -> its jobs' sums
    total: dict[str, _Sum] = {}  # currency -> every job's sums
    for j in jobs:
        if j["cost"] is None or j["currency"] is None:
            continue
        used = Decimal(j["useful_gpu_hours"]) if j.get("useful_gpu_hours") else None
        counts = {"tokens": count_of(tags.get(j["id"], {}), policy.token_tags + policy.token_series),
                  "samples": count_of(tags.get(j["id"], {}), policy.sample_tags + policy.sample_series)}
        if not used and not any(counts.values()):
            continue
        one = _Sum()
        one.add(j["cost"], used, counts)
        rows.append({"id": j["id"], "name": j["name"], "team": j["team"], "currency": j["currency"],
                     "sweep_id": j["sweep_id"], **one.figures()})
        if not j["sweep_id"]:  # a trial's cost is in its sweep's
            team = j["team"] or "(unattributed)"
            teams.setdefault(team, {}).setdefault(j["currency"], _Sum()).add(j["cost"], used, counts)
            total.setdefault(j["currency"], _Sum()).add(j["cost"], used, counts)
    before = ((previous or {}).get("summary") or {}).get("unit_costs") or {}
    out_teams = {t: {c: s.figures() for c, s in sorted(per.items())} for t, per in sorted(teams.items())}
    out_total = {c: s.figures() for c, s in sorted(total.items())}
    for team, per in out_teams.items():
        for cur, fig in per.items():
            _changes(fig, ((before.get("teams") or {}).get(team) or {}).get(cur))
    for cur, fig in out_total.items():
        _changes(fig, (before.get("total") or {}).get(cur))
    return {"window": label, "previous_window": before.get("window") if before else None,
            "jobs": rows, "teams": out_teams, "total": out_total}


def _changes(fig: dict[str, Any], before: dict[str, Any] | None) -> None:
    fig["change_pct"] = {k: _change(fig[k], (before or {}).get(k)) for k in
                         ("cost_per_used_gpu_hour", "cost_per_million_tokens", "cost_per_million_samples")}

from __future__ import annotations

import dataclasses
from datetime import date, timedelta
from decimal import Decimal
from statistics import median
from typing import Any

from auditor.model import Finding, GpuSpendSeries, Severity, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field

MAD_SCALE = Decimal("1.4826")  # MAD x 1.4826 estimates the standard deviation of normal data
MEAN_AD_SCALE = Decimal("1.2533")  # mean absolute deviation x 1.2533 does, where the MAD is 0
DIMENSIONS = ("team", "account", "family")  # the series of tables/daily.py


def is_weekend(day: date) -> bool:
    return day.weekday() >= 5


def baseline_of(days: list[Decimal | None], i: int, start: date, window: int) -> list[int]:
    """The days before day i, at most `window` back, of the same kind (a weekday for a weekday, a Saturday or
    Sunday for a weekend day) and with billing, from the series' first day with spend."""
    weekend = is_weekend(start + timedelta(days=i))
    return [j for j in range(max(0, i - window), i)
            if days[j] is not None and is_weekend(start + timedelta(days=j)) == weekend]


def score(value: Decimal, base: list[Decimal]) -> tuple[Decimal, Decimal | None]:
    """The median of the baseline and how many robust standard deviations `value` is above it (None: the
    baseline does not vary at all, so any rise is out of line)."""
    mid = median(base)
    deviations = [abs(b - mid) for b in base]
    spread = median(deviations) * MAD_SCALE or sum(deviations, Decimal(0)) / len(deviations) * MEAN_AD_SCALE
    return mid, (value - mid) / spread if spread else None


def headline(dimension: str, key: str, currency: str, anomalies: list[dict[str, Any]], elsewhere: int = 0) -> str:
    """A series' finding in words: its largest anomalous day that counts in it (amounts as Decimals or their
    text), how many more count, and how many of its days count under another series (`elsewhere`)."""
    worst = max(anomalies, key=lambda a: (Decimal(str(a["excess"])), a["date"]))
    more = len(anomalies) - 1

    def amount(a: Any) -> str:
        return fmt_money(Decimal(str(a)), currency)

    names = ", ".join(f"{d['job'] or d['resource']} +{amount(d['change'])}" for d in worst["drivers"][:2])
    label = {"team": "team", "account": "account", "family": "instance family"}[dimension]
    return (f"GPU spend of {label} {key} was {amount(worst['spend'])} on {worst['date']} against a baseline of "
            f"{amount(worst['baseline'])} (+{amount(worst['excess'])})"
            + (f"; driven by {names}" if names else "")
            + (f"; {more} more anomalous day{'s' if more > 1 else ''}" if more else "")
            + (f"; {elsewhere} more counted under another series" if elsewhere else ""))


@register
class GpuSpendAnomaly(Rule):
    """Day on which a team's, account's or instance family's GPU spend rose far above its own baseline.

    ## What it does
    Reads GPU compute usage (not the purchases and fees of commitments: COM001-COM004's) day by day
    (UTC) per team, per account and per instance family (the `dimensions` judged), in each currency.
    Each day is judged against its baseline: the same series over the `baseline_days` days before it,
    weekday-aware (a weekday against the weekdays of that span, a Saturday or Sunday against the weekend
    days), from the series' first day with spend, once there are at least `min_baseline_days` such days;
    days without any billing line (before the export starts, after it ends) are neither judged nor part of
    a baseline. The baseline is their median, its spread the median absolute deviation (MAD) x 1.4826, or,
    where the MAD is 0, the mean absolute deviation x 1.2533. A day is an anomaly when its spend is at
    least `threshold` spreads above the median (any rise counts where the baseline does not vary at all)
    and at least `min_excess` above it, in the policy's currency. One finding per series: its anomalous
    days, each with its spend, baseline and excess, and the `drivers` resources (jobs named as jobs) whose
    spend that day rose most above their own median over the same baseline days. It claims no saving: a
    spike may be a planned run.

    The three dimensions are partitions of the same spend, so one jump shows in several series. Anomalous
    days of one currency and date whose rising resources overlap (or that name none) are one jump, counted
    once: in the dimension that sees most of it (the largest sum of excess; ties: team, then account, then
    family), where each series counts its own excess (they share no spend). The same day in the other
    series is listed as `counted_under` those and adds nothing; a series none of whose days counts makes
    no finding. The finding's cost is the sum of the excess of the days that count in it, so each jump's
    dollars are in the actions, the headline and the team views once.

    ## Why it matters
    A quarterly total hides the week a team's GPU spend tripled: a runaway sweep, a cluster scaled up and
    not down, a job restarted in a loop. The days and the machines and jobs behind them are the first
    thing a team lead asks for.

    ## Example
    ```yaml
    - {id: gpu-spend/team/nlp/USD, dimension: team, key: nlp, start: 2026-07-01,
       days: [100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 900],
       resources: {i-0big: {14: 800}}, tags: {team: nlp}}
    ```

    ## How to fix
    Open the drivers of each day: stop what should not have run (a sweep without limits, a node pool left
    scaled up), cap what may run again (a job cost cap, a sweep's trial limit, an autoscaler's maximum),
    or, for a planned run, waive the finding with its reason.
    """

    id = "ANOM001"
    name = "gpu-spend-anomaly"
    severity = Severity.MEDIUM
    entity = GpuSpendSeries
    clause = "spend_anomalies"
    options = {
        "baseline_days": Field("int", default=28, minimum=7, maximum=366,
                               doc="days before a day that make its baseline (those of the same kind)"),
        "min_baseline_days": Field("int", default=6, minimum=3,
                                   doc="days of the same kind needed in the baseline before a day is judged"),
        "threshold": Field("number", default=3.5, minimum=0,
                           doc="robust standard deviations (MAD x 1.4826) above the median that make an anomaly"),
        "min_excess": Field("number", default=500, minimum=0,
                            doc="least excess over the baseline for an anomaly, in the policy's currency"),
        "drivers": Field("int", default=5, minimum=1, maximum=50, doc="resources named per anomalous day"),
        "dimensions": Field("list", item=Field("str", choices=DIMENSIONS), default=list(DIMENSIONS),
                            doc="the series judged: team, account and/or family"),
    }

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._driven: dict[tuple[str, str], frozenset[str]] = {}  # (series, day) -> every resource that rose

    def check(self, series: GpuSpendSeries, ctx):
        if series.dimension not in self.opt("dimensions") or series.start is None:
            return
        days: list[Decimal | None] = [None if d is None else Decimal(str(d)) for d in series.days]
        first = next((i for i, d in enumerate(days) if d), None)
        if first is None:
            return
        days = [None if i < first else d for i, d in enumerate(days)]  # before its first spend: no baseline of it
        anomalies: list[dict[str, Any]] = []
        excess_total = Decimal(0)
        for i, value in enumerate(days):
            if value is None:
                continue
            base = baseline_of(days, i, series.start, self.opt("baseline_days"))
            if len(base) < self.opt("min_baseline_days"):
                continue
            mid, z = score(value, [d for j in base if (d := days[j]) is not None])  # all of them: baseline_of
            excess = value - mid
            if excess <= 0 or self.short_of(excess, series.currency, "min_excess", ctx):
                continue
            if z is not None and z < Decimal(str(self.opt("threshold"))):
                continue
            excess_total += money(excess)
            day = (series.start + timedelta(days=i)).isoformat()
            drivers = self._drivers(series, i, base)
            self._driven[(series.id, day)] = frozenset(d["resource"] for d in drivers)
            anomalies.append({
                "date": day, "spend": money(value), "baseline": money(mid), "excess": money(excess),
                "score": None if z is None else round(float(z), 1), "baseline_days": len(base),
                "drivers": drivers[:self.opt("drivers")]})
        if not anomalies:
            return
        cur = series.currency
        yield self.finding(
            series, ctx, headline(series.dimension, series.key, cur, anomalies),
            evidence={"dimension": series.dimension, "key": series.key, "start": series.start.isoformat(),
                      "days": [None if d is None else str(money(d)) for d in series.days],
                      "anomalies": [{**a, "spend": str(a["spend"]), "baseline": str(a["baseline"]),
                                     "excess": str(a["excess"]),
                                     "drivers": [{**d, "spend": str(d["spend"]), "baseline": str(d["baseline"]),
                                                  "change": str(d["change"])} for d in a["drivers"]]}
                                    for a in anomalies],
                      "threshold": self.opt("threshold"), "baseline_window_days": self.opt("baseline_days")},
            cost=excess_total, currency=cur)

    def _drivers(self, series: GpuSpendSeries, i: int, base: list[int]) -> list[dict[str, Any]]:
        """The resources whose spend on day i rose above their median over the same baseline days, most first."""
        out: list[dict[str, Any]] = []
        for rid, per in series.resources.items():
            amounts = {int(k): Decimal(str(v)) for k, v in per.items()}
            spend = amounts.get(i, Decimal(0))
            mid = median([amounts.get(j, Decimal(0)) for j in base])
            if spend - mid > 0:
                out.append({"resource": rid, "job": series.jobs.get(rid), "spend": money(spend),
                            "baseline": money(mid), "change": money(spend - mid)})
        out.sort(key=lambda d: (-d["change"], d["resource"]))
        return out

    def fold(self, findings: list[Finding], ctx) -> list[Finding]:
        """Each jump counted once (see the docstring's last paragraph): days linked by resources in common
        (union-find), each group's counting dimension chosen, the other days marked `counted_under`; a finding
        keeps the days that count in it, its message their largest."""
        days = [(f, a) for f in findings for a in f.evidence["anomalies"]]
        parent = list(range(len(days)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        same_day: dict[tuple[str, str], list[int]] = {}  # (currency, date) -> its days
        holder: dict[tuple[str, str, str], int] = {}  # (currency, date, resource) -> a day on which it rose
        for i, (f, a) in enumerate(days):
            same_day.setdefault((f.currency, a["date"]), []).append(i)
            for rid in self._driven.get((f.resource, a["date"]), frozenset()):
                parent[root(i)] = root(holder.setdefault((f.currency, a["date"], rid), i))
        for i, (f, a) in enumerate(days):
            if not self._driven.get((f.resource, a["date"])):  # names no resource: one jump with its whole day
                for j in same_day[(f.currency, a["date"])]:
                    parent[root(j)] = root(i)
        jumps: dict[int, list[tuple[Finding, dict[str, Any]]]] = {}
        for i, day in enumerate(days):
            jumps.setdefault(root(i), []).append(day)
        for jump in jumps.values():
            seen: dict[str, Decimal] = {}
            for f, a in jump:
                dim = f.evidence["dimension"]
                seen[dim] = seen.get(dim, Decimal(0)) + Decimal(a["excess"])
            counting = max(seen, key=lambda d: (seen[d], -DIMENSIONS.index(d)))
            under = sorted(f.resource for f, _ in jump if f.evidence["dimension"] == counting)
            for f, a in jump:
                if f.evidence["dimension"] != counting:
                    a["counted_under"] = under
        out = []
        for f in findings:
            counted = [a for a in f.evidence["anomalies"] if "counted_under" not in a]
            if not counted:
                continue
            # its words name a day that counts in it, never one another series counts
            elsewhere = len(f.evidence["anomalies"]) - len(counted)
            message = headline(f.evidence["dimension"], f.evidence["key"], f.currency, counted, elsewhere) \
                if elsewhere else f.message
            out.append(dataclasses.replace(f, cost=money(sum((Decimal(a["excess"]) for a in counted), Decimal(0))),
                                           message=message))
        return out

"""The spend-anomaly charts' view of audit.json: each open ANOM001 finding's daily GPU spend as bars (table cells,
as reports/charts.html.j2 draws them, so they show in mail clients), its anomalous days marked, and the table of
those days with their baseline, excess and drivers beside it (reports/anomalies.*.j2)."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

RULE = "ANOM001"
CHARTS = 6  # series charted; the rest are in the findings
BAR_PX = 40  # the tallest day's height
DRIVERS = 3  # drivers shown per day
COLOURS = {"day": "#0969da", "anomaly": "#cf222e", "none": "#d0d7de"}
ORDER = {"team": 0, "account": 1, "family": 2}
LABELS = {"team": "Team", "account": "Account", "family": "Instance family"}


def _bars(days: list[Any], marked: set[int]) -> list[dict[str, Any]]:
    """One bar per day (2 px wide; days of the same height and kind drawn as one cell)."""
    values = [None if v is None else Decimal(v) for v in days]
    peak = max((v for v in values if v is not None), default=Decimal(0))
    out: list[dict[str, Any]] = []
    for i, v in enumerate(values):
        kind = "none" if v is None else "anomaly" if i in marked else "day"
        height = 0 if not v or v <= 0 or peak <= 0 else max(1, int(v * BAR_PX / peak))
        if out and out[-1]["height"] == height and out[-1]["kind"] == kind and kind != "anomaly":
            out[-1]["width"] += 2
        else:
            out.append({"height": height, "kind": kind, "colour": COLOURS[kind], "width": 2})
    return out


def title_of(resource: str) -> str:
    """A series' title from its id (gpu-spend/<dimension>/<key>/<currency>): `Team nlp`."""
    _, dimension, rest = resource.split("/", 2)
    return f"{LABELS.get(dimension, dimension)} {rest.rsplit('/', 1)[0]}"


def _charted(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The open ANOM001 findings with a daily series, in the order they are charted: teams first, then accounts,
    then instance families; the largest excess first."""
    open_ = [f for f in findings if f["rule"] == RULE and not f["waived"] and f.get("evidence", {}).get("days")]
    return sorted(open_, key=lambda f: (ORDER.get(f["evidence"]["dimension"], 3), -Decimal(f["cost"] or 0),
                                        f["resource"]))


def series(findings: list[dict[str, Any]]) -> int:
    """How many series `charts` would chart with no limit."""
    return len(_charted(findings))


def charts(findings: list[dict[str, Any]], limit: int = CHARTS, days: int | None = None) -> list[dict[str, Any]]:
    """The open ANOM001 findings (`_charted`), at most `limit`, each as {title, currency, start, end, bars,
    days: [anomalous days], more_days, more_excess, excess, counted_elsewhere, resource}: `excess` is what the
    finding counts, its days' excess but that of the days `counted_under` another series's (ANOM001 counts a jump
    once), each such day naming them, `counted_elsewhere` how many. `days`: at most that many anomalous days
    listed per series (the largest excess, in date order), the rest counted in more_days and summed in
    more_excess; every day stays marked on its bars. None: every day."""
    out = []
    for f in _charted(findings)[:limit]:
        e = f["evidence"]
        start = date.fromisoformat(e["start"])
        marked = {(date.fromisoformat(a["date"]) - start).days for a in e["anomalies"]}
        listed = list(e["anomalies"])
        if days is not None and len(listed) > days:
            kept = sorted(listed, key=lambda a: (-Decimal(a["excess"]), a["date"]))[:days]
            listed = [a for a in listed if a in kept]
        rest = [a for a in e["anomalies"] if a not in listed]
        out.append({
            "title": f"{LABELS.get(e['dimension'], e['dimension'])} {e['key']}", "currency": f["currency"],
            "counted_elsewhere": sum(1 for a in e["anomalies"] if a.get("counted_under")),
            "resource": f["resource"], "start": e["start"],
            "end": (start + timedelta(days=len(e["days"]) - 1)).isoformat(), "excess": f["cost"],
            "bars": _bars(e["days"], marked), "anomalous": len(e["anomalies"]),
            "days": [{**a, "drivers": [{"name": d.get("job") or d["resource"], "change": d["change"],
                                        "job": bool(d.get("job"))} for d in a["drivers"][:DRIVERS]],
                      "counted_under": [title_of(r) for r in a.get("counted_under") or []]}
                     for a in listed],
            "more_days": len(rest), "more_excess": str(sum((Decimal(a["excess"]) for a in rest), Decimal(0)))})
    return out

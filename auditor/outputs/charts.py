"""The charts' view of audit.json (summary.weekly, summary.sparklines): widths, heights and colours for charts
drawn as table cells (reports/charts.html.j2), so they show in mail clients that strip images, SVG and CSS; every
chart has its numbers in a table beside it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

# Colour-blind-safe hues, one per team in the order of their GPU compute; teams beyond them share OTHER.
PALETTE = ("#0969da", "#bc4c00", "#1a7f37", "#8250df", "#bf3989", "#0a7b83", "#9a6700")
OTHER = "#8c959f"
BAND_COLOURS = {"under_10": "#cf222e", "10_to_50": "#bf8700", "over_50": "#1a7f37"}
BAND_LABELS = {"under_10": "Under 10%", "10_to_50": "10% to 50%", "over_50": "Over 50%"}
SPARK_PX = 18  # a sparkline's height


def band_keys() -> list[dict[str, str]]:
    return [{"name": label, "colour": BAND_COLOURS[b]} for b, label in BAND_LABELS.items()]


def _d(value: Any) -> Decimal:
    return Decimal(str(value)) if value not in (None, "") else Decimal(0)


def _width(part: Decimal, whole: Decimal) -> int:
    return 0 if part <= 0 or whole <= 0 else max(1, int(part * 100 / whole))


def weekly(summary: Mapping[str, Any], cur: str, team: str | None = None) -> dict[str, Any] | None:
    """{teams: [{name, colour}], weeks: [{week, start, cells, total, others, bands, band_hours}], has_bands}
    for the organisation or one team; None where the audit has no weekly figures (an older audit.json)."""
    w = summary.get("weekly")
    if not w or not w.get("weeks"):
        return None
    names = [t for t in w["teams"] if team is None or t == team]
    shown = names if len(names) <= len(PALETTE) else names[:len(PALETTE) - 1]
    teams = [{"name": t, "colour": PALETTE[i]} for i, t in enumerate(shown)]
    if len(shown) < len(names):
        teams.append({"name": f"{len(names) - len(shown)} more teams", "colour": OTHER, "rest": True})
    weeks = []
    for week in w["weeks"]:
        mine = {t: _d(v) for t, v in (week["gpu_cost"].get(cur) or {}).items() if t in names}
        amounts = [mine.get(t["name"], Decimal(0)) for t in teams if not t.get("rest")]
        if len(shown) < len(names):
            amounts.append(sum((v for t, v in mine.items() if t not in shown), Decimal(0)))
        others = {c: sum((_d(v) for t, v in per.items() if t in names), Decimal(0))
                  for c, per in week["gpu_cost"].items() if c != cur}
        util = week.get("utilisation") or {}
        hours = {b: sum((_d(per.get(b)) for t, per in util.items() if team is None or t == team), Decimal(0))
                 for b in BAND_COLOURS}
        weeks.append({"week": week["week"], "start": week["start"], "amounts": amounts, "total": sum(amounts),
                      "others": {c: v for c, v in others.items() if v}, "hours": hours,
                      "hours_total": sum(hours.values())})
    top = max((wk["total"] for wk in weeks), default=Decimal(0))
    for wk in weeks:
        wk["cells"] = [{"colour": t["colour"], "width": _width(a, top)}
                       for t, a in zip(teams, wk["amounts"], strict=True)]
        wk["rest"] = max(0, 100 - sum(c["width"] for c in wk["cells"]))
        wk["bands"] = [{"colour": BAND_COLOURS[b], "width": _width(h, wk["hours_total"])}
                       for b, h in wk["hours"].items()]
    return {"currency": cur, "teams": teams, "weeks": weeks, "has_bands": any(wk["hours_total"] > 0 for wk in weeks),
            "has_spend": top > 0}


def sparkline(summary: Mapping[str, Any], resource: str) -> dict[str, Any] | None:
    """A finding's resource's daily spend as bar heights, with its peak, total and first day; None where the
    audit has no time series for it."""
    series = (summary.get("sparklines") or {}).get(resource)
    if not series:
        return None
    days = [_d(v) for v in series["days"]]
    peak = max(days)
    first = date.fromisoformat(series["start"])
    at = days.index(peak)
    return {"currency": series["currency"], "peak": peak, "peak_day": (first + timedelta(days=at)).isoformat(),
            "total": sum(days), "start": series["start"], "days": len(days),
            "bars": _runs([0 if v <= 0 or peak <= 0 else max(1, int(v * SPARK_PX / peak)) for v in days])}


def _runs(heights: list[int]) -> list[dict[str, int]]:
    """Days of the same height drawn as one cell (2 px a day): a steady spend is one cell, not 90, in an email."""
    out: list[dict[str, int]] = []
    for h in heights:
        if out and out[-1]["height"] == h:
            out[-1]["width"] += 2
        else:
            out.append({"height": h, "width": 2})
    return out

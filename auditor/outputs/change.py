"""What changed since the last quarter, in words, for the views that are not templates of the report (the
terminal's summary and the e-mails): from audit.json's `trend` (auditor/trend.py, computed once), as the report's
summary says it ("spend up $1,234.56 (+4.3%)")."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from auditor.model import fmt_money


def change_words(change: dict[str, Any] | None) -> str:
    """One trend.change_of figure, per currency: `up $1,234.56 (+4.3%)`, `down ...`, `unchanged`."""
    if change is None:
        return ""
    words: list[str] = []
    for cur, delta in (change.get("change") or {}).items():
        d = Decimal(delta)
        text = f"up {fmt_money(d, cur)}" if d > 0 else f"down {fmt_money(-d, cur)}" if d < 0 else "unchanged"
        pct = change["change_pct"].get(cur)
        words.append(text + (f" ({pct:+.1f}%)" if pct is not None else ""))
    return "; ".join(words)


def change_sentence(doc: dict[str, Any], team: str | None = None) -> str | None:
    """`Compared with 2026-Q2: spend up ..., GPU compute up ..., savings found down ... a month`, where the audit
    was given last quarter's (--previous); a team's spend only for a team. None without a previous audit."""
    trend = doc.get("trend")
    if not trend:
        return None
    if team is not None:
        spend = (trend.get("by_team") or {}).get(team)
        return f"Compared with {trend['previous']['label']}: spend {change_words(spend)}." if spend else None
    parts = [f"spend {change_words(trend['billed_cost'])}", f"GPU compute {change_words(trend['gpu_cost'])}"]
    if (trend.get("monthly_savings") or {}).get("change"):
        parts.append(f"savings found {change_words(trend['monthly_savings'])} a month")
    return f"Compared with {trend['previous']['label']}: {', '.join(parts)}."

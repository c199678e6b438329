"""Figures over findings and breakdowns, each computed here once and rendered by every view.

- Savings are counted once per resource: two findings on one resource are alternatives (stop the machine, or
  downsize it) or one flow seen by two rules (cross-region egress, training far from its data), so the resource
  counts with its largest saving, under the rule that found it; the other findings' savings are shown as
  already counted there.
- A breakdown's parts are rounded so that they add up to the total rounded once (largest remainder).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from decimal import ROUND_FLOOR, Decimal
from typing import TypeVar

from auditor.model import CENT, Finding, money

K = TypeVar("K", bound=Hashable)
TOP_ACTIONS = 5  # the findings a report lists first, largest saving first (and their sparklines)
Claim = tuple[str, str, str, Decimal | None]  # (resource, currency, rule, monthly saving) of one open finding


def sum_money(findings: list[Finding], attr: str) -> dict[str, Decimal]:
    """An amount attribute of the findings (`cost`, `monthly_savings`) summed per currency."""
    out: dict[str, Decimal] = {}
    for f in findings:
        amount = getattr(f, attr)
        if amount is not None:
            out[f.currency] = out.get(f.currency, Decimal(0)) + amount
    return out


def count_savings(rows: Iterable[Claim]) -> tuple[dict[str, Decimal], list[str | None]]:
    """`rows`: the open findings' claims. Returns the savings per currency, each resource's largest saving once;
    and for each row, the rule that counts its saving when that is another finding's (None where the row counts
    its own, or has none). Ties go to the rule first by ID."""
    rows = list(rows)
    holder: dict[tuple[str, str], int] = {}
    for i, (resource, currency, rule, amount) in enumerate(rows):
        if amount is None:
            continue
        key = (resource, currency)
        j = holder.get(key)
        if j is None or amount > rows[j][3] or (amount == rows[j][3] and rule < rows[j][2]):
            holder[key] = i
    totals: dict[str, Decimal] = {}
    for (_, currency), i in holder.items():
        totals[currency] = totals.get(currency, Decimal(0)) + rows[i][3]
    under = [None if amount is None or holder[(resource, currency)] == i else rows[holder[(resource, currency)]][2]
             for i, (resource, currency, _, amount) in enumerate(rows)]
    return totals, under


def claims(findings: list[Finding]) -> list[Claim]:
    return [(f.resource, f.currency, f.rule, f.monthly_savings) for f in findings]


def savings_total(findings: list[Finding]) -> dict[str, Decimal]:
    """Monthly savings per currency of the open findings given, each resource counted once (count_savings)."""
    return count_savings(claims(findings))[0]


def mark_overlaps(findings: list[Finding]) -> None:
    """Set each open finding's `counted_under`: the rule whose finding on the same resource counts its saving,
    or None where it counts its own (or has none). Every view reads the mark from audit.json."""
    for f, under in zip(findings, count_savings(claims(findings))[1], strict=True):
        f.counted_under = under


def savings_by(findings: list[Finding], key: Callable[[Finding], K]) -> dict[K, dict[str, Decimal]]:
    """The savings that count (see mark_overlaps), per `key` (team, rule) and currency: the groups add up to
    savings_total, whatever the grouping."""
    out: dict[K, dict[str, Decimal]] = {}
    for f in findings:
        if f.monthly_savings is not None and f.counted_under is None:
            into = out.setdefault(key(f), {})
            into[f.currency] = into.get(f.currency, Decimal(0)) + f.monthly_savings
    return out


def apportion(parts: Mapping[K, Decimal], target: Decimal | None = None) -> dict[K, Decimal]:
    """Each part rounded to the cent so that the parts add up to `target` (by default their sum, rounded once):
    every part is rounded down, and the cents left go to the parts with the largest remainders (ties: by key).
    A target a cent off the parts' own sum (a team's total, itself apportioned) moves one cent more or less."""
    target = money(sum(parts.values(), Decimal(0)) if target is None else target)
    down = {k: Decimal(v).quantize(CENT, rounding=ROUND_FLOOR) for k, v in parts.items()}
    left = int((target - sum(down.values(), Decimal(0))) / CENT)
    order = sorted(parts, key=lambda k: (-(Decimal(parts[k]) - down[k]), str(k)))
    if left < 0:
        order.reverse()
    for i in range(abs(left) if order else 0):
        down[order[i % len(order)]] += CENT if left > 0 else -CENT
    return down


def apportion_amounts(items: Mapping[K, Mapping[str, Decimal]], targets: Mapping[str, Decimal] | None = None,
                      pinned: Mapping[K, Mapping[str, Decimal]] | None = None) -> dict[K, dict[str, Decimal]]:
    """{key: {currency: amount}} with each currency's parts apportioned (see apportion) to their own rounded sum,
    or to `targets[currency]` where given. `pinned` parts are figures already shown elsewhere (GPU compute in
    the headline): they keep their value and the other parts make up the rest of the target."""
    pinned = {k: v for k, v in (pinned or {}).items() if k in items}
    out: dict[K, dict[str, Decimal]] = {k: dict(pinned.get(k, {})) for k in items}
    for cur in sorted({c for k, v in items.items() if k not in pinned for c in v}):
        target = targets.get(cur) if targets is not None else None
        if target is not None:
            target = money(target) - sum((v.get(cur, Decimal(0)) for v in pinned.values()), Decimal(0))
        shares = apportion({k: v[cur] for k, v in items.items() if cur in v and k not in pinned}, target)
        for k, amount in shares.items():
            out[k][cur] = amount
    return out

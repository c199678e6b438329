"""Figures over a list of findings, each computed here once and rendered by every view."""

from __future__ import annotations

from decimal import Decimal

from auditor.model import Finding


def sum_money(findings: list[Finding], attr: str) -> dict[str, Decimal]:
    """An amount attribute of the findings (`cost`, `monthly_savings`) summed per currency."""
    out: dict[str, Decimal] = {}
    for f in findings:
        amount = getattr(f, attr)
        if amount is not None:
            out[f.currency] = out.get(f.currency, Decimal(0)) + amount
    return out


def savings_total(findings: list[Finding]) -> dict[str, Decimal]:
    """Monthly savings per currency. Two findings on one resource are alternatives (shut it down, or
    downsize it), not savings to add: each resource counts with its largest."""
    best: dict[tuple[str, str], Decimal] = {}
    for f in findings:
        if f.monthly_savings is not None:
            key = (f.resource, f.currency)
            best[key] = max(best.get(key, f.monthly_savings), f.monthly_savings)
    out: dict[str, Decimal] = {}
    for (_, currency), amount in best.items():
        out[currency] = out.get(currency, Decimal(0)) + amount
    return out

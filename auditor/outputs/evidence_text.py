"""A finding's evidence as a person reads it, in every view that shows it (HTML, Markdown, the e-mails): money as the
report shows money (`$250,000.00`, in the finding's currency), unit prices to the hundredth of a cent,
percentages as `2.4%`, other numbers rounded to two decimals with thousands separators; lists, maps, yes/no and
none in words. audit.json and findings.csv keep the exact values.

A number's kind is told by its key, as the rules name their evidence: `*_pct` a percentage; `*price*` and
`*_per_hour` a unit price; `*_cost` money; a key naming hours, gigabytes, days, counts or FLOPS a quantity; then
the words of money (`budget`, `spent`, `forecast`, `on_demand`, `unused`, ...). A key that names a line, an id or a
year keeps its digits as they are."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from auditor.model import fmt_money

PCT = re.compile(r"(^|_)pct($|_)")
PRICE = re.compile(r"(^|_)price($|_)|_per_hour$")
QUANTITY = re.compile(r"(^|_)(hours|gb|tflops|days|count|lines|trials|gpus)($|_)")
MONEY = re.compile(r"(^|_)(cost|spent|budget|forecast|on_demand|committed|unused|used|total|unattributed|saving|"
                   r"savings|amount|covered_per_month)($|_)")
AS_IS = re.compile(r"(^|_)(line|id|year|port|version|account|zone|sha256)$")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
_CURRENCY = re.compile(r"[A-Z]{3}")  # a map by currency, as audit.json holds money


def evidence_items(evidence: dict[str, Any] | None, currency: str | None) -> list[tuple[str, str]]:
    """(label, text) for each item of a finding's evidence, in its order."""
    return [(k.replace("_", " "), value_text(k, v, currency)) for k, v in (evidence or {}).items()]


def value_text(key: str, value: Any, currency: str | None = None) -> str:
    """One evidence value as a person reads it (see the module's docstring)."""
    if isinstance(value, list | tuple):
        return ", ".join(value_text(key, v, currency) for v in value) or "none"
    if isinstance(value, dict):  # a map's values are what its key names ({aws: 30} under discount_pct: 30%)
        return ", ".join(f"{k} {value_text(key, v, str(k) if _CURRENCY.fullmatch(str(k)) else currency)}"
                         for k, v in value.items()) or "none"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    number = _number(value)
    if number is None or AS_IS.search(key):
        return str(value)
    if PCT.search(key):
        return f"{_plain(number, 1)}%"
    if PRICE.search(key):
        return _price(number, currency)
    if key.endswith("cost") or (not QUANTITY.search(key) and MONEY.search(key)):
        return fmt_money(number, currency)
    return _plain(number, 2)


def _number(value: Any) -> Decimal | None:
    """An int, a float or a decimal string as its exact Decimal (a float by its shortest repr); else None."""
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value))
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        try:
            return Decimal(value)
        except InvalidOperation:
            return None
    return None


def _plain(number: Decimal, digits: int) -> str:
    """At most `digits` decimals, no trailing zeros, thousands separated: 2.4000000000000004 -> 2.4."""
    text = f"{round(number, digits):,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _price(number: Decimal, currency: str | None) -> str:
    """A unit price: two to four decimals ($16.288, $0.023), in the finding's currency."""
    text = f"{abs(round(number, 4)):,.4f}".rstrip("0")
    if len(text.split(".")[1]) < 2:
        text += "0" * (2 - len(text.split(".")[1]))
    sign = "-" if number < 0 else ""
    return f"{sign}${text}" if currency in (None, "USD") else f"{sign}{text} {currency}"

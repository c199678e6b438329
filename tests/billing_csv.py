"""Billing written for a test: charges made from the first row of the demo's FOCUS export (one day of an Azure
Standard_NC24ads_A100_v4 at $3.673 an hour: $88.152, USD), each changed in what the test states, and the CSV they
make. The tests of ANOM001, OFF001, unit costs and the FOCUS export write their quarters with it."""

from __future__ import annotations

import csv
import functools
import json
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from conftest import REPO

TEMPLATE = REPO / "fixtures" / "demo" / "billing" / "focus-azure-2026-q3.csv"
MONEY = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")


@functools.cache
def _template() -> tuple[tuple[str, str], ...]:
    with TEMPLATE.open(newline="", encoding="utf-8") as fh:
        return tuple(next(csv.DictReader(fh)).items())


def template() -> dict[str, str]:
    """The demo's row (a fresh copy): its columns are the header `write` gives."""
    return dict(_template())


def charge(resource: str, day: date | datetime, tags: dict[str, Any] | None = None, cost: str | None = None,
           **columns: str) -> dict[str, str]:
    """One day's charge (from `day`'s midnight, or its time, to a day later) of `resource` with `tags`; `cost`,
    where given, as every cost column (else the template's $88.152); other columns as given."""
    start = day if isinstance(day, datetime) else datetime(day.year, day.month, day.day)
    row = {**template(), "ResourceId": resource, "Tags": json.dumps(tags or {}),
           "ChargePeriodStart": f"{start:%Y-%m-%dT%H:%M:%SZ}",
           "ChargePeriodEnd": f"{start + timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}"}
    if cost is not None:
        row.update(dict.fromkeys(MONEY, cost))
    row.update(columns)
    return row


def write(path: Path, charges: list[dict[str, str]]) -> Path:
    """The charges as a FOCUS CSV with the template's header."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(template()))
        w.writeheader()
        w.writerows(charges)
    return path

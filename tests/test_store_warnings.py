"""The warnings the store gives for legal but odd billing files, at their thresholds: a file in two currencies is
already one to warn about (each is totalled on its own); a file in one is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.tables.store import Store

HEADER = ("identity/LineItemId,lineItem/LineItemType,lineItem/UsageStartDate,lineItem/UsageEndDate,"
          "lineItem/UsageType,lineItem/UsageAmount,lineItem/CurrencyCode,lineItem/UnblendedCost\n")


def cur(path: Path, currencies: list[str]) -> Path:
    lines = [f"li-{i},Usage,2026-07-01T0{i}:00:00Z,2026-07-01T0{i + 1}:00:00Z,BoxUsage:g5.xlarge,1,{c},1.50\n"
             for i, c in enumerate(currencies)]
    path.write_text(HEADER + "".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(("currencies", "warned"), [
    (["USD", "USD", "USD"], None),
    (["EUR"], None),
    (["USD", "EUR", "USD"], "lines in 2 currencies (EUR, USD); each is totalled on its own"),
    (["USD", "EUR", "JPY"], "lines in 3 currencies (EUR, JPY, USD); each is totalled on its own"),
])
def test_mixed_currency_warning_from_two_currencies(tmp_path, currencies, warned):
    path = cur(tmp_path / "cur.csv", currencies)
    store = Store()
    try:
        store.load_billing([path])
        about = [w for w in store.warnings if "currencies" in w]
    finally:
        store.close()
    assert about == ([f"{path}: {warned}, never added to another"] if warned else [])

"""Our own checks of the FOCUS 1.3 columns that focus-validator 1.0.0 (the last release that runs on Python 3.11,
and which checks FOCUS 1.0 only) does not know, written from the FOCUS 1.3 text of each column: the allocation
columns of a data generator-calculated split cost allocation (AllocatedMethodId, AllocatedMethodDetails,
AllocatedResourceId, AllocatedResourceName, AllocatedTags) and the provider columns 1.3 adds (ServiceProviderName,
HostProviderName). Rows as csv.DictReader reads a FOCUS CSV: an empty field is null."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

ALLOCATION = ("AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName",
              "AllocatedTags")
MANDATORY_1_3 = ("ServiceProviderName", "HostProviderName")
ELEMENT_KEYS = {"AllocatedRatio", "UsageUnit", "UsageQuantity"}  # FOCUS-defined; others must be x_-prefixed


def _json_object(text: str) -> Any:
    try:
        value = json.loads(text, parse_float=Decimal)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _number(value: Any) -> bool:
    return isinstance(value, (int, Decimal)) and not isinstance(value, bool)


def row_errors(row: dict[str, str]) -> list[str]:
    """What one row breaks of the 1.3 rules (each message names its column)."""
    errors = [f"{c}: missing" for c in (*ALLOCATION, *MANDATORY_1_3) if c not in row]
    if errors:
        return errors
    errors += [f"{c}: null" for c in MANDATORY_1_3 if not row[c]]  # MUST NOT be null
    method, details, rid, name, tags = (row[c] for c in ALLOCATION)
    if not method:  # not related to a split: every allocation column null
        errors += [f"{c}: not null on a charge with no AllocatedMethodId" for c in ALLOCATION[1:] if row[c]]
        return errors
    # AllocatedResourceName is null exactly when AllocatedResourceId is
    if bool(rid) != bool(name):
        errors.append("AllocatedResourceName: null where AllocatedResourceId is not, or the reverse")
    if not details:  # SHOULD NOT be null on an allocated charge: held as a MUST here
        errors.append("AllocatedMethodDetails: null on an allocated charge")
    else:
        obj = _json_object(details)
        elements = obj.get("Elements") if obj is not None else None
        if not isinstance(elements, list) or not elements:
            errors.append("AllocatedMethodDetails: not an object with a non-empty Elements array")
        else:
            for top in obj:
                if top != "Elements" and not top.startswith("x_"):
                    errors.append(f"AllocatedMethodDetails: custom key {top!r} not prefixed x_")
            for e in elements:
                if not isinstance(e, dict) or not _number(e.get("AllocatedRatio")):
                    errors.append("AllocatedMethodDetails: an element without a numeric AllocatedRatio")
                    continue
                if not Decimal(0) <= e["AllocatedRatio"] <= Decimal(1):
                    errors.append("AllocatedMethodDetails: AllocatedRatio outside 0..1")
                if "UsageQuantity" in e and ("UsageUnit" not in e or not _number(e["UsageQuantity"])):
                    errors.append("AllocatedMethodDetails: UsageQuantity without a UsageUnit, or not a number")
                if "UsageUnit" in e and not isinstance(e["UsageUnit"], str):
                    errors.append("AllocatedMethodDetails: UsageUnit not a string")
                errors += [f"AllocatedMethodDetails: custom key {k!r} not prefixed x_"
                           for k in e if k not in ELEMENT_KEYS and not k.startswith("x_")]
    if tags:
        obj = _json_object(tags)
        if obj is None:
            errors.append("AllocatedTags: not a JSON object")
        else:
            if any(not (isinstance(v, str) or v is True) for v in obj.values()):
                errors.append("AllocatedTags: a value neither a string nor true")
            resource = _json_object(row.get("Tags") or "{}") or {}
            errors += [f"AllocatedTags: {k!r} already in Tags" for k in obj if k in resource]
    return errors


def ratio_errors(rows: list[dict[str, str]], origin: Any) -> list[str]:
    """The allocated charges of each origin charge (`origin(row)` its key): their AllocatedRatio add up to 1."""
    sums: dict[Any, Decimal] = {}
    for r in rows:
        if r["AllocatedMethodId"] and r["AllocatedMethodDetails"]:
            obj = _json_object(r["AllocatedMethodDetails"]) or {}
            for e in obj.get("Elements") or []:
                if isinstance(e, dict) and _number(e.get("AllocatedRatio")):
                    key = (origin(r), e.get("UsageUnit"))
                    sums[key] = sums.get(key, Decimal(0)) + e["AllocatedRatio"]
    return [f"AllocatedRatio of origin {k[0]!r} ({k[1]}) adds up to {v}, not 1" for k, v in sums.items() if v != 1]


def errors(rows: list[dict[str, str]], origin: Any) -> list[str]:
    """Every row's errors (with its line in the CSV: the header is line 1) and the origins' ratios."""
    out = [f"line {i}: {e}" for i, r in enumerate(rows, start=2) for e in row_errors(r)]
    return out + ratio_errors(rows, origin)

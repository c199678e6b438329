"""The billing readers by format: each reader module (aws.py, gcp.py, azure.py, focus.py) registers its `select`
with `reads(format, ...)` below the function, not as a decorator, so that mutation testing can mutate it (mutmut
leaves a decorated function unmutated; docs/mutation.md).

A reader is a map of normalized column to SQL expression (and the columns whose values it checks), built from a
file's `Columns`; the store looks one up by the format `detect.sniff` gave the file.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auditor.providers.billing.columns import Columns
    from auditor.providers.catalog import Catalog

Reader = Callable[["Columns", "Catalog"], tuple[dict[str, str], list[tuple[str, str]]]]

READERS: dict[str, Reader] = {}


def reads(*formats: str) -> Callable[[Reader], Reader]:
    """Register a reader for the formats it reads (each format has one reader)."""
    def register(fn: Reader) -> Reader:
        for fmt in formats:
            if READERS.get(fmt, fn) is not fn:
                raise ValueError(f"two billing readers for the format {fmt}")
            READERS[fmt] = fn
        return fn
    return register


def readers() -> dict[str, Reader]:
    """Every registered reader by format, the package's modules loaded first."""
    import auditor.providers.billing as package

    for mod in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{mod.name}")
    return READERS


def reader_for(fmt: str) -> Reader:
    return READERS[fmt] if fmt in READERS else readers()[fmt]

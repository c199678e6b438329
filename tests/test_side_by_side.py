"""Which billing files are read at once (store.side_by_side): only those DuckDB reads on one core."""

from __future__ import annotations

import os
from pathlib import Path

from auditor.providers.billing.detect import Sniffed
from auditor.tables.store import PARALLEL_FILES, side_by_side


def one(container: str, serial: bool) -> list[tuple[Sniffed, str]]:
    return [(Sniffed(Path(f"bill.{container}"), container, "gzip" if serial else "none", (), "aws-cur",
                     serial=serial), "digest")]


def test_gzip_csv_files_are_read_side_by_side_and_anything_else_one_at_a_time():
    cores = min(os.cpu_count() or 1, PARALLEL_FILES)
    assert side_by_side([one("csv", True)] * 3) == min(3, cores)
    assert side_by_side([one("csv", True)]) == 1
    # a Parquet file (or a plain CSV) is scanned on every core: beside another it would only share the memory
    assert side_by_side([one("parquet", False)] * 3) == 1
    assert side_by_side([one("csv", True), one("csv", True), one("parquet", False)]) == 1
    assert side_by_side([one("csv", True) + one("csv", True), one("csv", True)]) == 1  # a scan of several files
    assert side_by_side([]) == 1

"""Which billing files are read at once (store.side_by_side): only those DuckDB reads on one core; and once one
runs out of memory beside others, one at a time (store.Turns)."""

from __future__ import annotations

import gzip
import os
import threading
from datetime import date
from pathlib import Path

import billing_csv
import pytest

import auditor.tables.store as store_module
from auditor.errors import OutOfMemory, out_of_memory
from auditor.providers.billing.detect import Sniffed
from auditor.tables.store import PARALLEL_FILES, Store, Turns, side_by_side


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


# ---- a read that runs out of memory beside others ----------------------------------------------------------------

def gzip_bills(folder: Path, n: int) -> list[Path]:
    """`n` gzip FOCUS CSVs, each of its own machine and month (no line shared: none is a re-delivery), each in a
    folder of its own (small files of one folder would be read as one scan: parts.py)."""
    paths = []
    for i in range(n):
        (folder / str(i)).mkdir(parents=True)
        plain = billing_csv.write(folder / str(i) / f"bill-{i}.csv",
                                  [billing_csv.charge(f"vm-{i}", date(2026, 7 + i % 3, 1 + d), cost=f"{i + 1}.5")
                                   for d in range(5)])
        paths.append(plain.with_suffix(".csv.gz"))
        paths[-1].write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    return paths


def test_after_a_read_runs_out_of_memory_beside_others_the_rest_are_read_one_at_a_time(tmp_path, monkeypatch):
    paths = gzip_bills(tmp_path / "bills", 4)
    alone = {str(p): Store().load_billing([p])[0].stats for p in paths}
    monkeypatch.setattr(store_module, "side_by_side", lambda batches: 2)
    lock = threading.Lock()
    running, starts, failed = [0], [], []
    real_read = Store._read

    def read(self, batch, con, copy=None):
        path = str(batch[0][0].path)
        with lock:
            starts.append((path, running[0], bool(failed)))
            running[0] += 1
        try:
            if path == str(paths[1]) and not failed:
                failed.append(path)  # as DuckDB's refusal to pin a block: the read rolled back
                raise out_of_memory(path)
            return real_read(self, batch, con, copy)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(Store, "_read", read)
    store = Store()
    sources = store.load_billing(paths)
    assert [s.path for s in sources] == [str(p) for p in paths]
    assert {s.path: s.stats for s in sources} == alone  # every file read once, the one that ran out included
    assert [p for p, _, _ in starts].count(str(paths[1])) == 2
    after = [(p, others) for p, others, late in starts if late]
    assert after and all(others == 0 for _, others in after), starts  # none beside another after the first
    assert after[-1][0] == str(paths[1])  # read again last, alone


def test_a_read_waiting_its_turn_stops_with_the_load():
    turns = Turns()
    with pytest.raises(OutOfMemory), turns.turn():  # one read ran out of memory: the next waits for none to run
        raise out_of_memory("a.csv.gz")
    outcome = []
    entered, release = threading.Event(), threading.Event()

    def running():
        with turns.turn():
            entered.set()
            release.wait(10)

    def waiting():
        try:
            with turns.turn():
                outcome.append("read")
        except KeyboardInterrupt:
            outcome.append("stopped")

    first = threading.Thread(target=running)
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=waiting)
    second.start()
    second.join(0.2)
    assert second.is_alive() and outcome == []  # its turn has not come: one read runs
    turns.stop()
    second.join(10)
    release.set()
    first.join(10)
    assert outcome == ["stopped"]

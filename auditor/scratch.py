"""A run's scratch folder, and the end of a run by a signal.

Everything a run keeps on disk while it works (DuckDB's database file and spill files, Parquet copies of Avro
exports, inventory rows on their way into DuckDB) lies in one folder under the system temp folder,
`gpu-auditor-*`, removed when the run ends. The folder holds a lock (`.lock`, flock) for as long as its run
lives: a run killed with SIGKILL, or by the out-of-memory killer, cannot remove its folder, but its lock goes
with it, so the next run that starts removes every such folder whose lock it can take. A folder younger than a
minute is left alone: its run may be between creating it and locking it.

SIGTERM (what `timeout`, `kill` and a cancelled CI job send) is handled as Ctrl-C is: the run stops where it
is, nothing is half written, the scratch folder is removed, and the exit code is 143 (128 + 15).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import tempfile
import time
import weakref
from pathlib import Path

PREFIX = "gpu-auditor-"
LOCK = ".lock"
GRACE_S = 60  # a folder younger than this may not be locked yet by the run that made it

received: int | None = None  # the signal that ended the run, if one did


def _on_sigterm(signum, frame) -> None:
    global received
    received = signum
    raise KeyboardInterrupt  # unwinds like Ctrl-C: DuckDB's query is interrupted, outputs roll back


def handle_sigterm() -> None:
    """Treat SIGTERM as Ctrl-C for the rest of the run (the command line calls this; a library user need not)."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def interrupted_exit_code() -> int:
    """The exit code of a run stopped by a signal: 128 + its number (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + (received or signal.SIGINT)


class Scratch:
    """This run's scratch folder (`.name`), locked while the run lives; removed by `cleanup()` or at exit."""

    def __init__(self):
        remove_dead()
        self.name = tempfile.mkdtemp(prefix=PREFIX)
        self._lock = open(os.path.join(self.name, LOCK), "w")  # noqa: SIM115 - held until cleanup
        fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._finalizer = weakref.finalize(self, _remove, self.name, self._lock)

    def cleanup(self) -> None:
        self._finalizer()


def _remove(name: str, lock) -> None:
    shutil.rmtree(name, ignore_errors=True)
    lock.close()


def remove_dead(folder: str | None = None) -> list[Path]:
    """Remove the scratch folders of runs that died (their lock free) under the temp folder; what was removed."""
    removed = []
    now = time.time()
    for d in Path(folder or tempfile.gettempdir()).glob(PREFIX + "*"):
        lock_path = d / LOCK
        try:
            if d.is_symlink() or not d.is_dir() or d.stat().st_uid != os.getuid() or \
                    now - lock_path.stat().st_mtime < GRACE_S:
                continue  # not ours, no lock (another version's, or being made), or too young
            with open(lock_path) as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken: its run is gone
                shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        except OSError:  # held by a live run (BlockingIOError), or gone meanwhile
            continue
    return removed

"""The memory the store's database may use (DuckDB's limit, beyond which it spills to its temporary folder), and the
memory this process may have: its cgroup's limit where it runs in one, else the machine's."""

from __future__ import annotations

import os

MEMORY_LIMIT = 768 << 20  # bytes: the store's limit where the machine or container allows three times as much


def memory_limit() -> str:
    """The memory the store's database may use before it spills to its temporary folder: GPU_AUDITOR_MEMORY_LIMIT,
    else 768MB, or a third of the memory this process may have where that is less (a small container or CI
    runner: DuckDB spills rather than the kernel killing the audit). Two gzip CSVs of 3.3M lines read side by side
    share it; under 384MB to 640MB one of them now and then failed to pin a block and was read again alone, from
    the start (10M lines: 138 CPU s instead of 56); in none of five runs at 768MB, which also took a tenth less CPU
    on high and heavy tag churn, and whose peak stays under 1 GiB on every shape of the benchmark (high churn's
    comes after the store is closed)."""
    if given := os.environ.get("GPU_AUDITOR_MEMORY_LIMIT"):
        return given
    room = memory_available()
    if room is not None and room // 3 < MEMORY_LIMIT:
        return f"{max(room // 3, 128 << 20) >> 20}MB"
    return f"{MEMORY_LIMIT >> 20}MB"


def memory_available() -> int | None:
    """The bytes this process may use: the least limit of its memory cgroup and that cgroup's parents (v2, else v1;
    a container, a CI job, a systemd slice), else the machine's memory; None where neither can be read."""
    sizes = [size for path in _cgroup_limit_files() if (size := _limit(path)) is not None]
    if (machine := _machine_memory()) is not None:
        sizes.append(machine)
    return min(sizes) if sizes else None


def _machine_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not a POSIX system
        return None


def _cgroup_limit_files() -> list[str]:
    """The memory limit files of this process's cgroup and its parents, from /proc/self/cgroup."""
    files = []
    for line in _read("/proc/self/cgroup").splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":  # v2: one hierarchy
            base, name = "/sys/fs/cgroup", "memory.max"
        elif "memory" in controllers.split(","):
            base, name = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p and p != ".."]
        files += [f"{base}/{'/'.join(parts[:i])}/{name}".replace("//", "/") for i in range(len(parts), -1, -1)]
    return files


def _limit(path: str) -> int | None:
    text = _read(path).strip()
    return int(text) if text.isdigit() else None  # v2 writes "max" without a limit; v1 a number past any memory


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return ""

"""Errors a user can cause. Each prints as one line naming what and where, and exits 2."""

from __future__ import annotations

from auditor.text import one_line

# The exit codes of every command: clean, findings at or above --fail-on, bad input, partial (a source could not
# be read completely).
EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT, EXIT_PARTIAL = 0, 1, 2, 3


class AuditorError(Exception):
    """An error a user can act on: printed as one line naming the file (and line and column) it is about, exit
    code 2; the CLI catches these. Bad input is an InputError; running out of memory is not (OutOfMemory)."""

    exit_code = EXIT_INPUT

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 column: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = ""
        if self.path:
            where = str(self.path)
            if self.line is not None:
                where += f":{self.line}"
            where += ": "
        col = f"column {self.column!r}: " if self.column else ""
        return one_line(f"{where}{col}{self.message}")  # a file name's CR or LF never starts a new line


class InputError(AuditorError):
    """Bad input: a file, a policy, an option. Exit code 2."""


class OutOfMemory(AuditorError):
    """DuckDB ran out of the memory the store allows it (and of room to spill): not a bad file, a limit to raise;
    a read that meets it beside others is tried again alone (tables/store.py). Exit code 2, as for bad input."""


MEMORY_LIMIT = 768 << 20  # bytes: the store's limit where the machine or container allows three times as much


def memory_limit() -> str:
    """The memory the store's database may use before it spills to its temporary folder: GPU_AUDITOR_MEMORY_LIMIT,
    else 768MB, or a third of the memory this process may have where that is less (a small container or CI
    runner: DuckDB spills rather than the kernel killing the audit). Two gzip CSVs of 3.3M lines read side by side
    share it; under 384MB to 640MB one of them now and then failed to pin a block and was read again alone, from
    the start (10M lines: 138 CPU s instead of 56); in none of five runs at 768MB, which also took a tenth less CPU
    on high and heavy tag churn, and whose peak stays under 1 GiB on every shape of the benchmark (high churn's
    comes after the store is closed)."""
    import os

    if given := os.environ.get("GPU_AUDITOR_MEMORY_LIMIT"):
        return given
    room = memory_available()
    if room is not None and room // 3 < MEMORY_LIMIT:
        return f"{max(room // 3, 128 << 20) >> 20}MB"
    return f"{MEMORY_LIMIT >> 20}MB"


def memory_available() -> int | None:
    """The bytes this process may use: the least limit of its memory cgroup and that cgroup's parents (v2, else v1;
    a container, a CI job, a systemd slice), else the machine's memory; None where neither can be read."""
    import os

    sizes = [size for path in _cgroup_limit_files() if (size := _limit(path)) is not None]
    try:
        sizes.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):  # not a POSIX system
        pass
    return min(sizes) if sizes else None


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


def out_of_memory(path: str | None = None) -> OutOfMemory:
    """DuckDB ran out of the memory the store allows it (and of room to spill): not a bad file, a limit to raise."""
    limit = memory_limit()
    return OutOfMemory(f"ran out of memory{' reading the file' if path else ''} (the database may use {limit}, "
                      "spilling the rest to the temporary folder): set GPU_AUDITOR_MEMORY_LIMIT higher, e.g. "
                      "GPU_AUDITOR_MEMORY_LIMIT=2GB, or free disk space in the temporary folder", path=path)


class InputErrors(InputError):
    """Every error found in one input (a policy), in the order of their lines: printed one per line."""

    def __init__(self, errors: list[InputError]):
        first = errors[0]
        super().__init__(first.message, first.path, first.line, first.column)
        self.errors = errors

    def __str__(self) -> str:
        return "\n".join(AuditorError.__str__(e) for e in self.errors)

    @classmethod
    def raise_if_any(cls, errors: list[InputError]) -> None:
        """Raise the one error, or all of them; nothing when there is none."""
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise cls(sorted(errors, key=lambda e: (e.line is None, e.line or 0)))

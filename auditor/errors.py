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


def out_of_memory(path: str | None = None) -> OutOfMemory:
    """DuckDB ran out of the memory the store allows it (and of room to spill): not a bad file, a limit to raise."""
    from auditor.memory import memory_limit

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

"""Errors a user can cause. Each prints as one line naming what and where, and exits 2."""

from __future__ import annotations

# The exit codes of every command: clean, findings at or above --fail-on, bad input, partial (a source could not
# be read completely).
EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT, EXIT_PARTIAL = 0, 1, 2, 3


class InputError(Exception):
    """Bad input: a file, a policy, an option. Exit code 2."""

    exit_code = 2

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
        return f"{where}{col}{self.message}"

"""What every command shares: the group that turns errors into one line and an exit code, the common options,
the waiver day, and the progress line."""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import sys
from datetime import date
from pathlib import Path
from typing import Any

import click

from auditor.errors import EXIT_INPUT, AuditorError, out_of_memory
from auditor.model import Severity
from auditor.outputs.terminal import progress_line, safe
from auditor.secret_patterns import mask
from auditor.window import parse_day

SEVERITY_CHOICES = [s.label for s in reversed(Severity)] + ["none"]
DEFAULT_POLICY = Path("gpu-policy.yml")  # where `policy init` writes it, and where `gate` looks without --policy
# Paths are checked by the commands (auditor/readable.py), not by Click, whose `readable` check trusts os.access
# (true for root), prints four lines and names no folder on the way.
PATH = click.Path(path_type=Path, readable=False)
FOLLOW_SYMLINKS = click.option("--follow-symlinks", is_flag=True,
                               help="Write through a symbolic link in the output path (refused by default).")


# The sections of `--help`, after the required options: each option's section by its parameter name.
PULL_PARAMS = ("live", "providers", "regions", "profile", "assume_role", "accounts", "billing_uri", "kubeconfig",
               "context", "prometheus", "prices")
SECTIONS = {"Live pull (audit --live)": PULL_PARAMS}


class SectionedCommand(click.Command):
    """`--help` lists the required options first, then the ordinary ones, then each section of SECTIONS."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record is None:
                continue
            title = "Required" if getattr(param, "required", False) else \
                next((s for s, names in SECTIONS.items() if param.name in names), "Options")
            groups.setdefault(title, []).append(record)
        for title in ["Required", "Options", *SECTIONS]:
            if groups.get(title):
                with formatter.section(title):
                    formatter.write_dl(groups[title])


class AuditorGroup(click.Group):
    """Turns the errors a user can cause into one line and exit code 2; a traceback only with --debug. Its
    commands may be `lazy`: name -> "module:attribute" in auditor/cli, imported when first asked for."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attr = self.lazy[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(f"auditor.cli.{module}"), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except AuditorError as e:  # bad input, or out of memory: one line each
            if sys.stderr.isatty():  # start clean of a progress line left on the terminal
                click.echo("\r\033[K", err=True, nl=False)
            for line in str(e).splitlines():  # one line per error (InputErrors: all of a policy's)
                click.echo(f"gpu-auditor: error: {mask(line)}", err=True)
            sys.exit(EXIT_INPUT)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # `gpu-auditor ... | head`: the reader left; stop quietly
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stderr at exit
            sys.exit(0)
        except KeyboardInterrupt:
            interrupted()
        except OSError as e:  # a full disk, a name too long, standard output full: one line naming the path
            click.echo(f"gpu-auditor: error: {safe(_where(e))}{e.strerror or e}", err=True)
            sys.exit(EXIT_INPUT)
        except Exception as e:  # noqa: BLE001 - the last line of defence against a traceback
            if "Query interrupted" in str(e):  # Ctrl-C arriving inside a DuckDB query
                interrupted()
            if type(e).__name__ == "OutOfMemoryException":  # DuckDB's, named so that duckdb is not imported here
                click.echo(f"gpu-auditor: error: {out_of_memory()}", err=True)
                sys.exit(EXIT_INPUT)
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"gpu-auditor: internal error: {type(e).__name__}: {safe(e)} (rerun with --debug for the "
                       "traceback, and please report it)", err=True)
            sys.exit(EXIT_INPUT)


def _where(e: OSError) -> str:
    """The path an OSError is about, as `PATH: `; `cannot write to standard output: ` when it came from printing
    (click.echo) to stdout, which then goes to /dev/null so that Python's flush at exit does not fail again."""
    if e.filename is not None:
        return f"{os.fsdecode(e.filename)}: "
    tb = e.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "echo" and frame.f_globals.get("__name__") == "click.utils" \
                and not frame.f_locals.get("err"):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            return "cannot write to standard output: "
        tb = tb.tb_next
    return ""


def standard_streams() -> None:
    """Refuse to run with standard output closed (`>&-`): what a command prints would be lost while it exits 0,
    and the first file it opens would take descriptor 1 and receive it. A closed standard input or error is given
    /dev/null instead, so that no file the run opens takes its descriptor either (a library's message written to
    descriptor 2 would land in a report)."""
    for fd in (0, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stderr is None:  # Python found descriptor 2 closed at start: its messages go to /dev/null
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - the process's own stream
    if sys.stdout is None:
        if sys.stderr is not None:
            sys.stderr.write("gpu-auditor: error: standard output is closed; redirect it (> FILE or > /dev/null)\n")
        sys.exit(EXIT_INPUT)


def interrupted() -> None:
    """Ctrl-C, or SIGTERM (a cancelled CI job, `timeout`): one line, exit 130 or 143; the outputs were rolled
    back and the scratch folder is removed as the process exits (scratch.py)."""
    from auditor import atomic, scratch

    what = "terminated (SIGTERM)" if scratch.received == signal.SIGTERM else "interrupted"
    if atomic.published:  # it came after the outputs were in place, whole: they stay
        done = ", ".join(str(p) for p in atomic.published)
        click.echo(f"gpu-auditor: {what} after the outputs were written in full ({safe(done)})", err=True)
    else:
        click.echo(f"gpu-auditor: {what}; nothing was written", err=True)
    sys.exit(scratch.interrupted_exit_code())


def day(as_of: str | None) -> date:
    """The day waivers are judged on: --as-of, else today."""
    return parse_day(as_of, "--as-of").date() if as_of else date.today()


def threshold(fail_on: str) -> Severity | None:
    """--fail-on as a severity; None for `none`."""
    return None if fail_on == "none" else Severity.parse(fail_on)


def progress(quiet: bool):
    """Progress on stderr: on a terminal one line redrawn in place (terminal.progress_line); elsewhere (CI
    logs, pipes) one plain line per step."""
    if quiet:
        return None
    if not sys.stderr.isatty():
        return lambda msg: click.echo(safe(msg), err=True)
    width = shutil.get_terminal_size((80, 20)).columns - 1

    def show(msg: str) -> None:
        line, ends = progress_line(msg, width)
        click.echo(line, err=True, nl=ends)

    return show

"""What every command shares: the group that turns errors into one line and an exit code, the common options,
the waiver day, and the progress line."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from datetime import date
from pathlib import Path

import click

from auditor.errors import EXIT_INPUT, InputError, out_of_memory
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
    """Turns the errors a user can cause into one line and exit code 2; a traceback only with --debug."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as e:
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


def interrupted() -> None:
    """Ctrl-C, or SIGTERM (a cancelled CI job, `timeout`): one line, exit 130 or 143; the outputs were rolled
    back and the scratch folder is removed as the process exits (scratch.py)."""
    from auditor import scratch

    what = "terminated (SIGTERM)" if scratch.received == signal.SIGTERM else "interrupted"
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

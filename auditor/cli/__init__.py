"""The command line: parses options, calls the library, prints messages and exits with a code. Nothing here
is needed to use the library. One module per command family; `base` holds what they share."""

from __future__ import annotations

import gc

import click

from auditor import __version__
from auditor.cli.base import AuditorGroup

# Each command by its module (auditor/cli/<module>.py) and name there, imported when the command runs or `--help`
# lists it: `gate` in a pre-commit hook starts without the audit's, the pull's and the mail's imports.
COMMANDS = {"inspect": "audit:inspect", "audit": "audit:audit", "pull": "pull:pull_command", "report": "audit:report",
            "email": "mail:email", "rules": "rules:rules", "policy": "policy:policy", "gate": "gate:gate",
            "export": "export:export"}


@click.group(cls=AuditorGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpu-auditor")
@click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Audit ML training spend on GPUs against your team's written GPU policy.

    \b
    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error,
    3 a source could not be read completely (partial audit).
    """
    ctx.obj = {"debug": debug}


def main() -> None:
    from auditor.cli.base import standard_streams
    from auditor.scratch import handle_sigterm

    standard_streams()
    handle_sigterm()
    # A command builds up to millions of small objects that hold no reference cycles (rows, entities, findings and
    # their dicts): the cyclic collector's passes over them were a sixth of a large audit's CPU (5M lines; 740
    # objects in cycles in a whole 1M-line audit). It now runs a hundred times less often, and still runs.
    gc.set_threshold(100_000, 50, 1000)
    cli(prog_name="gpu-auditor")

"""The command line: parses options, calls the library, prints messages and exits with a code. Nothing here
is needed to use the library. One module per command family; `base` holds what they share."""

from __future__ import annotations

import click

from auditor import __version__
from auditor.cli import audit, export, gate, mail, policy, pull, rules
from auditor.cli.base import AuditorGroup


@click.group(cls=AuditorGroup, context_settings={"help_option_names": ["-h", "--help"]})
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


for command in (audit.inspect, audit.audit, pull.pull_command, audit.report, mail.email, rules.rules,
                policy.policy, gate.gate, export.export):
    cli.add_command(command)


def main() -> None:
    from auditor.cli.base import standard_streams
    from auditor.scratch import handle_sigterm

    standard_streams()
    handle_sigterm()
    cli(prog_name="gpu-auditor")

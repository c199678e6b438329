"""`policy validate`, `policy render` and `policy init`."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import click

from auditor.cli.base import DEFAULT_POLICY, FOLLOW_SYMLINKS, PATH, day
from auditor.errors import InputError
from auditor.outputs.terminal import safe


@click.group()
def policy() -> None:
    """Check a GPU policy, render it as Markdown for the runbook, or write a starter one."""


@policy.command("validate")
@click.argument("file", type=PATH)
def policy_validate(file: Path) -> None:
    """Check a policy file: unknown keys, wrong types and bad values are named with their line."""
    from auditor.policy import load_policy

    p = load_policy(file)
    click.echo(safe(f"{file}: ok: '{p.name}' version {p.version}, {len(p.clauses)} clauses, {len(p.teams)} teams, "
                     f"{len(p.waivers)} waivers"))
    today = date.today()
    for w in p.waivers:
        if w.expired(today):
            click.echo(safe(f"warning: {file}:{w.line}: waiver for {w.rule} on {w.resource} expired on "
                             f"{w.expires}"), err=True)


@policy.command("render")
@click.argument("file", type=PATH)
@click.option("--as-of", help="Judge waiver expiry on this date instead of today.")
def policy_render(file: Path, as_of: str | None) -> None:
    """Print the written policy as Markdown for the runbook: owner, version, teams and budgets, each
    clause's text and numbers, and the waivers with their expiry.

    \b
    Example:
      gpu-auditor policy render fixtures/demo/policy.yml > GPU-POLICY.md
    """
    from auditor.policy import load_policy, render_markdown

    today = day(as_of)
    click.echo(render_markdown(load_policy(file), today), nl=False)


@policy.command("init")
@click.argument("file", type=PATH, default=DEFAULT_POLICY)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@FOLLOW_SYMLINKS
def policy_init(file: Path, force: bool, follow_symlinks: bool) -> None:
    """Write a commented starter policy (default: gpu-policy.yml)."""
    from auditor.atomic import target, write_file
    from auditor.starter import starter_policy

    if (file.exists() or file.is_symlink()) and not force:
        raise InputError("already exists; use --force to overwrite", path=str(file))
    try:
        write_file(target(file, follow_symlinks), starter_policy(file.name))
    except OSError as e:
        raise InputError(f"cannot write the policy: {e.strerror}", path=str(file)) from None
    click.echo(f"wrote {file}; edit it, then check it with: gpu-auditor policy validate {file}")

"""`rules list` and `rules explain`: the rule pack and each rule's documentation."""

from __future__ import annotations

import json
import shutil
import textwrap

import click

from auditor.errors import InputError
from auditor.outputs.terminal import rules_lines


@click.group()
def rules() -> None:
    """List the rule pack and explain each rule."""


@rules.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules_list(as_json: bool) -> None:
    """List every rule: ID, name, severity, policy clause and what it checks."""
    from auditor.registry import all_rules, policy_keys

    items = all_rules()
    if as_json:
        click.echo(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity.label, "clause": r.clause,
                                "entity": r.entity.__name__, "summary": r.summary(),
                                "options": {k: f.default for k, f in r.options.items()},
                                "option_docs": {k: f.doc for k, f in r.options.items()},
                                "policy_keys": policy_keys(r)} for r in items], indent=2))
        return
    width = shutil.get_terminal_size().columns
    for line in rules_lines(items, [policy_keys(r) for r in items], width):
        click.echo(line)


@rules.command("explain")
@click.argument("rule_id")
def rules_explain(rule_id: str) -> None:
    """Show a rule's documentation: what it does, why it matters, an example, how to fix."""
    from auditor.registry import all_rules, get_rule, policy_keys
    from auditor.running import DEFINITION

    try:
        r = get_rule(rule_id)
    except KeyError:
        known = ", ".join(x.id for x in all_rules())
        raise InputError(f"no rule {rule_id!r}; known rules: {known}") from None
    doc = r.doc()
    click.echo(f"{r.id} {r.name} ({r.severity.label}; policy clause '{r.clause}'; reads {r.entity.__name__})")
    click.echo(f"\n{doc['summary']}")
    for section in ("What it does", "Why it matters", "Example", "How to fix"):
        click.echo(f"\n{section}\n{'-' * len(section)}\n{doc[section]}")
    click.echo("\nSavings and waste (every rule)\n------------------------------")
    click.echo(textwrap.fill(DEFINITION, 100))
    click.echo("\nOptions (set in the policy clause)\n----------------------------------")
    for k, f in r.options.items():
        click.echo(f"  {k} (default {f.default!r}): {f.doc}")
    if not r.options:
        click.echo("  none: the clause sets only its text, severity and enabled")
    click.echo("\nPolicy keys\n-----------")
    for k in policy_keys(r):
        click.echo(f"  {k}")

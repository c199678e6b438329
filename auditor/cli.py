"""The command line: parses options and calls the library. Nothing here is needed to use the library."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from pathlib import Path

import click

from auditor import __version__
from auditor.errors import InputError
from auditor.model import Severity

EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT, EXIT_PARTIAL = 0, 1, 2, 3
SEVERITY_CHOICES = [s.label for s in reversed(Severity)] + ["none"]


class AuditorGroup(click.Group):
    """Turns the errors a user can cause into one line and exit code 2; a traceback only with --debug."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except InputError as e:
            click.echo(f"gpu-auditor: error: {e}", err=True)
            sys.exit(EXIT_INPUT)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("gpu-auditor: interrupted; nothing was written", err=True)
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the last line of defence against a traceback
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"gpu-auditor: internal error: {type(e).__name__}: {e} (rerun with --debug for the "
                       "traceback, and please report it)", err=True)
            sys.exit(EXIT_INPUT)


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


def _date(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{option} {value!r}: use a date like 2026-07-01") from None


def _progress(quiet: bool):
    if quiet:
        return None
    return lambda msg: click.echo(msg, err=True)


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def inspect(files: tuple[Path, ...], as_json: bool) -> None:
    """Show what was detected in each billing file: format, lines, period and totals.

    \b
    Example:
      gpu-auditor inspect fixtures/demo/billing/
    """
    from auditor.engine import _jsonable
    from auditor.store import Store

    store = Store()
    sources = store.load_billing(list(files))
    if as_json:
        out = {"files": [{"path": s.path, "format": s.format, "sha256": s.sha256, "cost_column": s.cost_column,
                          **_jsonable(s.stats)}
                         for s in sources], "warnings": store.warnings}
        click.echo(json.dumps(out, indent=2))
        return
    from auditor.report import fmt_money, fmt_num

    for s in sources:
        st = s.stats
        click.echo(f"{s.path}")
        click.echo(f"  format      {s.format}")
        click.echo(f"  lines       {s.rows:,}")
        click.echo(f"  period      {st['period_start']:%Y-%m-%d %H:%M} to {st['period_end']:%Y-%m-%d %H:%M} UTC")
        click.echo(f"  billed      {fmt_money(st['billed_cost'])}  (sum of {s.cost_column}, per currency)")
        click.echo(f"  effective   {fmt_money(st['effective_cost'])}")
        click.echo(f"  GPU         {fmt_money(st['gpu_cost'])} ({fmt_num(st['gpu_hours'])} GPU-hours)")
        click.echo(f"  spot        {fmt_money(st['spot_cost'])}")
        for cat, amounts in st["by_category"].items():
            n = st["lines_by_category"].get(cat or "other", 0)
            note = "  (not classified as compute, storage or transfer)" if cat == "other" else ""
            click.echo(f"    {cat or 'other':<14}{fmt_money(amounts):>18}  {n:>9,} lines{note}")
        for kind, gb in st["transfer_gb_out"].items():
            click.echo(f"    transfer out {kind}: {fmt_num(gb, 3)} GB")
    for w in store.warnings:
        click.echo(f"warning: {w}", err=True)


@cli.command()
@click.argument("billing", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--policy", "policy_path", required=True, type=click.Path(path_type=Path),
              help="The team's GPU policy (YAML).")
@click.option("--inventory", type=click.Path(path_type=Path),
              help="Inventory snapshot (JSON): GPU assets, utilisation and jobs.")
@click.option("--quarter", help="Audit window as a calendar quarter, e.g. 2026-Q3.")
@click.option("--since", help="Window start (UTC date, inclusive).")
@click.option("--until", help="Window end (UTC date, exclusive).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("audit-report"),
              show_default=True, help="Folder for audit.json, report.html, report.md, findings.csv.")
@click.option("--fail-on", type=click.Choice(SEVERITY_CHOICES), default="none", show_default=True,
              help="Exit 1 when an open finding is at or above this severity.")
@click.option("--rule", "select", multiple=True, help="Run only this rule (ID or name); repeatable.")
@click.option("--as-of", help="Judge waiver expiry on this date instead of today.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
def audit(billing, policy_path, inventory, quarter, since, until, out_dir, fail_on, select, as_of, quiet):
    """Run the quarterly audit over billing exports (files or folders) and write the report.

    \b
    Example:
      gpu-auditor audit --policy fixtures/demo/policy.yml \\
        --inventory fixtures/demo/inventory.json --quarter 2026-Q3 \\
        --out demo-report fixtures/demo/billing
    """
    from auditor.engine import parse_quarter, run_audit
    from auditor.policy import load_policy
    from auditor.report import write_outputs
    from auditor.store import Window

    if quarter and (since or until):
        raise click.UsageError("use either --quarter or --since/--until, not both")
    window = parse_quarter(quarter) if quarter else None
    if since or until:
        if not (since and until):
            raise click.UsageError("--since and --until go together")
        start, end = _date(since, "--since"), _date(until, "--until")
        if end <= start:
            raise InputError("--until must be after --since")
        window = Window(start, end, f"{since} to {until}")
    today = _date(as_of, "--as-of").date() if as_of else date.today()
    policy = load_policy(policy_path)
    result = run_audit(policy, list(billing), inventory, window, today, select or None, _progress(quiet))
    written = write_outputs(result, out_dir)
    _print_summary(result)
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"\nwrote {', '.join(str(p) for p in written)}")
    if result.partial:
        sys.exit(EXIT_PARTIAL)
    worst = result.worst()
    if fail_on != "none" and worst is not None and worst >= Severity.parse(fail_on):
        sys.exit(EXIT_FINDINGS)


def _print_summary(result) -> None:
    from auditor.report import fmt_money

    s = result.summary
    click.echo(f"GPU spend audit {result.window.label} · {result.policy.name}")
    click.echo(f"  total spend       {fmt_money(s['billed_cost'])}")
    click.echo(f"  GPU compute       {fmt_money(s['gpu_cost'])}")
    click.echo(f"  savings / month   {fmt_money(s['monthly_savings'])}")
    click.echo(f"  open findings     {s['findings']['total']} ({s['findings']['waived']} waived)")
    if not result.findings:
        return
    click.echo("")
    rows = {}
    for f in result.active():
        r = rows.setdefault(f.rule, {"name": f.name, "n": 0, "sev": f.severity, "save": {}})
        r["n"] += 1
        if f.monthly_savings is not None:
            r["save"][f.currency] = r["save"].get(f.currency, 0) + f.monthly_savings
    click.echo(f"  {'rule':<8}{'name':<26}{'severity':<10}{'findings':>9}  {'saving / month':>16}")
    for rid, r in sorted(rows.items()):
        click.echo(f"  {rid:<8}{r['name']:<26}{r['sev'].label:<10}{r['n']:>9}  {fmt_money(r['save']):>16}")


@cli.group()
def rules() -> None:
    """List the rule pack and explain each rule."""


@rules.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules_list(as_json: bool) -> None:
    """List every rule: ID, name, severity, policy clause and what it checks."""
    from auditor.rule import all_rules

    items = all_rules()
    if as_json:
        click.echo(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity.label, "clause": r.clause,
                                "entity": r.entity.__name__, "summary": r.summary(),
                                "options": {k: f.default for k, f in r.options.items()}} for r in items],
                              indent=2))
        return
    for r in items:
        click.echo(f"{r.id:<8}{r.name:<28}{r.severity.label:<9}{r.clause:<16}{r.summary()}")


@rules.command("explain")
@click.argument("rule_id")
def rules_explain(rule_id: str) -> None:
    """Show a rule's documentation: what it does, why it matters, an example, how to fix."""
    from auditor.rule import all_rules, get_rule

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
    if r.options:
        click.echo("\nOptions (set in the policy clause)\n----------------------------------")
        for k, f in r.options.items():
            click.echo(f"  {k} (default {f.default!r}): {f.doc}")


@cli.group()
def policy() -> None:
    """Check a GPU policy, or write a starter one."""


@policy.command("validate")
@click.argument("file", type=click.Path(path_type=Path))
def policy_validate(file: Path) -> None:
    """Check a policy file: unknown keys, wrong types and bad values are named with their line."""
    from auditor.policy import load_policy

    p = load_policy(file)
    click.echo(f"{file}: ok: '{p.name}' version {p.version}, {len(p.clauses)} clauses, {len(p.teams)} teams, "
               f"{len(p.waivers)} waivers")
    today = date.today()
    for w in p.waivers:
        if w.expired(today):
            click.echo(f"warning: {file}:{w.line}: waiver for {w.rule} on {w.resource} expired on {w.expires}",
                       err=True)


@policy.command("init")
@click.argument("file", type=click.Path(path_type=Path), default=Path("gpu-policy.yml"))
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def policy_init(file: Path, force: bool) -> None:
    """Write a commented starter policy (default: gpu-policy.yml)."""
    from auditor.starter import starter_policy

    if file.exists() and not force:
        raise InputError("already exists; use --force to overwrite", path=str(file))
    try:
        file.write_text(starter_policy(file.name), encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write the policy: {e.strerror}", path=str(file)) from None
    click.echo(f"wrote {file}; edit it, then check it with: gpu-auditor policy validate {file}")


def main() -> None:
    cli(prog_name="gpu-auditor")

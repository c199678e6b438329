"""`inspect` (what each billing file holds), `audit` (the quarterly audit) and `report` (a saved audit
re-rendered)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from auditor.cli.base import FOLLOW_SYMLINKS, PATH, SEVERITY_CHOICES, SectionedCommand, day, progress, threshold
from auditor.cli.mail import mail_progress, mail_report
from auditor.cli.pull import live_snapshots, pull_options
from auditor.errors import EXIT_FINDINGS, EXIT_PARTIAL, InputError
from auditor.outputs.terminal import safe
from auditor.window import from_options, stamp_of


@click.command()
@click.argument("files", nargs=-1, required=True, type=PATH)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def inspect(files: tuple[Path, ...], as_json: bool) -> None:
    """Show what was detected in each billing file: format, lines, period and totals.

    \b
    Example:
      gpu-auditor inspect fixtures/demo/billing/
    """
    from auditor.outputs.terminal import inspect_json, inspect_lines
    from auditor.tables.store import Store

    store = Store()
    sources = store.load_billing(list(files))
    if as_json:
        click.echo(json.dumps(inspect_json(sources, store.warnings, store.parts), indent=2))
        return
    for line in inspect_lines(sources, store.parts):
        click.echo(line)
    for w in store.warnings:
        click.echo(f"warning: {safe(w)}", err=True)


class BillingPath(click.Path):
    """A billing file or folder, or a URI (s3a://bucket/prefix, for --engine spark) kept as text: as a Path its
    `//` would fold to `/`."""

    def convert(self, value, param, ctx):
        from auditor.providers.billing.detect import is_uri

        return value if is_uri(value) else super().convert(value, param, ctx)


@click.command(cls=SectionedCommand)
@click.argument("billing", nargs=-1, required=False, type=BillingPath(path_type=Path, readable=False))
@click.option("--live", is_flag=True, help="Pull from --provider into a temporary snapshot first, and audit it "
              "(with any BILLING given).")
@pull_options(several=True)
@click.option("--policy", "policy_path", required=True, type=PATH,
              help="The team's GPU policy (YAML).")
@click.option("--inventory", type=PATH,
              help="Inventory snapshot (JSON): GPU assets, utilisation and jobs.")
@click.option("--quarter", help="Audit window as a calendar quarter, e.g. 2026-Q3.")
@click.option("--since", help="Window start (UTC date, inclusive).")
@click.option("--until", help="Window end (UTC date, exclusive).")
@click.option("--out", "out_dir", type=PATH, default=Path("audit-report"),
              show_default=True, help="Folder for audit.json, report.html, report.md, findings.csv.")
@click.option("--fail-on", type=click.Choice(SEVERITY_CHOICES), default="none", show_default=True,
              help="Exit 1 when an open finding is at or above this severity.")
@click.option("--rule", "select", multiple=True, help="Run only this rule (ID or name); repeatable.")
@click.option("--as-of", help="Judge waiver expiry on this date instead of today.")
@click.option("--previous", type=PATH,
              help="Last quarter's audit.json: the report shows the spend change and which findings were "
                   "resolved, are new and are still open.")
@click.option("--generated-at", help="The report's generated_at (UTC); default $SOURCE_DATE_EPOCH, else the as-of "
              "date: never the clock, so the same inputs give the same bytes.")
@click.option("--baseline", type=PATH,
              help="A previous audit.json: report and fail only on findings not in it (matched by fingerprint); "
                   "the known ones are listed under `baseline` in audit.json.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="Where billing files are read, normalized and reduced: in-process DuckDB, or Spark (extra "
                   "`spark`) for exports too large for one machine; Spark also reads BILLING given as a URI "
                   "(s3a://, gs://, abfss://, hdfs://).")
@click.option("--spark-master", help="Spark master URL for --engine spark (default: the active session, else "
              "local[2]).")
@click.option("--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting for --engine spark, e.g. spark.driver.memory=8g (repeatable); local mode "
                   "defaults to spark.driver.memory=4g and spark.sql.shuffle.partitions=4.")
@click.option("--email", "email_it", is_flag=True,
              help="Then email the audit to the team leads and the policy owner (SMTP settings from the "
                   "GPU_AUDITOR_SMTP_* environment; see `gpu-auditor email --help`); exit 3 if a message is "
                   "left in OUT/outbox.")
@FOLLOW_SYMLINKS
def audit(billing, policy_path, inventory, quarter, since, until, out_dir, fail_on, select, as_of, quiet,
          email_it, live, previous, generated_at, baseline, engine, spark_master, spark_conf, follow_symlinks,
          **pull_args):
    """Run the quarterly audit over billing exports (files or folders) and write the report.

    \b
    Example:
      gpu-auditor audit --policy fixtures/demo/policy.yml \\
        --inventory fixtures/demo/inventory.json --quarter 2026-Q3 \\
        --out demo-report fixtures/demo/billing

    A snapshot folder written by `gpu-auditor pull` is accepted wherever billing is: its billing files,
    inventory.json and window are used, and a source its manifest lists as failed makes the audit partial
    (exit 3). `--live --provider aws` pulls into a temporary snapshot first.
    """
    from auditor.atomic import target
    from auditor.core import run_audit
    from auditor.outputs.report import write_outputs
    from auditor.outputs.terminal import summary_lines
    from auditor.policy import load_policy
    from auditor.readable import outside_inputs
    from auditor.trend import load_previous

    window = from_options(quarter, since, until)
    today = day(as_of)
    policy = load_policy(policy_path)
    target(out_dir, follow_symlinks, folder=True)  # an --out refused (a symbolic link) fails before the audit runs
    if email_it:  # a missing SMTP setting fails before the audit runs, not after
        from auditor.outputs.mail import smtp_settings

        smtp = smtp_settings()
    outside_inputs(out_dir, list(billing), "report", "--out")
    billing = live_snapshots(live, pull_args, window, quiet, policy) + list(billing)
    stamp = stamp_of(generated_at)
    last_quarter = load_previous(previous) if previous is not None else None
    reader = None
    if (spark_master or spark_conf) and engine != "spark":
        raise InputError("--spark-master and --spark-conf are for --engine spark")
    if engine == "spark":
        from auditor.tables.spark import billing_engine, parse_conf

        reader = billing_engine(spark_master, debug=click.get_current_context().obj["debug"],
                                conf=parse_conf(spark_conf))
    result = run_audit(policy, billing, inventory, window, today, select or None, progress(quiet),
                       baseline=baseline, engine=reader, previous=last_quarter, generated_at=stamp)
    written = write_outputs(result, out_dir, follow_symlinks=follow_symlinks)
    for line in summary_lines(result):
        click.echo(line)
    for w in result.warnings:
        click.echo(f"warning: {safe(w, policy.mask_secrets)}", err=True)
    click.echo(f"\nwrote {', '.join(safe(p) for p in written)}")
    mail_left = False
    if email_it:
        from auditor.outputs.mail import send_audit

        click.echo("")
        mail_left = mail_report(send_audit(out_dir, policy, out_dir / "outbox", smtp, progress=mail_progress,
                                            follow_symlinks=follow_symlinks), dry_run=False)
    worst = threshold(fail_on)
    code = EXIT_PARTIAL if mail_left else result.exit_code(worst)
    if result.partial:  # every non-zero exit says why in its last line (a message left says so itself)
        click.echo("partial audit: a source could not be read completely (see the warnings above and the "
                   "report's inputs)", err=True)
    elif code == EXIT_FINDINGS and worst is not None:  # a threshold is what found findings at or above it
        over = sum(1 for f in result.active() if f.severity >= worst)
        click.echo(f"fail on {fail_on}: {over} finding(s) at or above {fail_on}", err=True)
    sys.exit(code)


@click.command()
@click.argument("audit_json", type=PATH)
@click.option("--format", "formats", multiple=True, type=click.Choice(["html", "md", "csv", "json"]),
              help="The view to render; repeatable. Default: html, md and csv with --out; md printed without.")
@click.option("--out", "out_dir", type=PATH,
              help="Write report.html, report.md, findings.csv (audit.json) into this folder, atomically; "
                   "without it, print the one format asked for (Markdown if none).")
@click.option("--team", help="Only this team's findings, spend and machines (as the team lead's e-mail has it).")
@FOLLOW_SYMLINKS
def report(audit_json: Path, formats: tuple[str, ...], out_dir: Path | None, team: str | None,
           follow_symlinks: bool) -> None:
    """Re-render a saved audit.json as HTML, Markdown or CSV, without the inputs.

    \b
    Example:
      gpu-auditor report demo-report/audit.json --format md
      gpu-auditor report demo-report/audit.json --team nlp --out nlp-report
    """
    from auditor.outputs import report as views

    doc = views.load_audit(audit_json)
    if team is not None and team not in views.teams_of(doc):
        raise InputError(f"no team {team!r} in the audit; its teams: {', '.join(views.teams_of(doc)) or 'none'}",
                         path=str(audit_json))
    formats = tuple(dict.fromkeys(formats)) or (("html", "md", "csv") if out_dir else ("md",))
    if out_dir is None:
        if len(formats) != 1:
            raise click.UsageError("without --out, give exactly one --format to print")
        click.echo(views.render(doc, formats[0], team), nl=False)
        return
    written = views.write_outputs(doc, out_dir, formats, team, follow_symlinks=follow_symlinks)
    click.echo(f"wrote {', '.join(safe(p) for p in written)}")

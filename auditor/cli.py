"""The command line: parses options and calls the library. Nothing here is needed to use the library."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from datetime import date, datetime
from pathlib import Path

import click

from auditor import __version__
from auditor.errors import EXIT_CLEAN, EXIT_FINDINGS, EXIT_INPUT, EXIT_PARTIAL, InputError
from auditor.model import Severity
from auditor.secret_patterns import mask
from auditor.text import one_line
from auditor.window import from_options, parse_day, quarter_to_date

SEVERITY_CHOICES = [s.label for s in reversed(Severity)] + ["none"]
# Paths are checked by the commands (auditor/readable.py), not by Click, whose `readable` check trusts os.access
# (true for root), prints four lines and names no folder on the way.
PATH = click.Path(path_type=Path, readable=False)
FOLLOW_SYMLINKS = click.option("--follow-symlinks", is_flag=True,
                               help="Write through a symbolic link in the output path (refused by default).")


def _safe(text: object, masking: bool = True) -> str:
    """Text for the terminal: on one line, control characters escaped, secrets masked (text.py,
    secret_patterns.py)."""
    return one_line(mask(str(text)) if masking else text)


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
            _interrupted()
        except Exception as e:  # noqa: BLE001 - the last line of defence against a traceback
            if "Query interrupted" in str(e):  # Ctrl-C arriving inside a DuckDB query
                _interrupted()
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"gpu-auditor: internal error: {type(e).__name__}: {_safe(e)} (rerun with --debug for the "
                       "traceback, and please report it)", err=True)
            sys.exit(EXIT_INPUT)


def _interrupted() -> None:
    """Ctrl-C, or SIGTERM (a cancelled CI job, `timeout`): one line, exit 130 or 143; the outputs were rolled
    back and the scratch folder is removed as the process exits (scratch.py)."""
    from auditor import scratch

    what = "terminated (SIGTERM)" if scratch.received == signal.SIGTERM else "interrupted"
    click.echo(f"gpu-auditor: {what}; nothing was written", err=True)
    sys.exit(scratch.interrupted_exit_code())


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


def _day(as_of: str | None) -> date:
    """The day waivers are judged on: --as-of, else today."""
    return parse_day(as_of, "--as-of").date() if as_of else date.today()


def _progress(quiet: bool):
    """Progress on stderr: on a terminal one line redrawn in place, with a bar over the billing files read
    so far; elsewhere (CI logs, pipes) one plain line per step."""
    if quiet:
        return None
    if not sys.stderr.isatty():
        return lambda msg: click.echo(_safe(msg), err=True)
    width = shutil.get_terminal_size((80, 20)).columns - 1

    def show(msg: str) -> None:
        msg = _safe(msg)
        m = re.match(r"\[(\d+)/(\d+)\] (.*)$", msg)
        if m:
            done, total = int(m.group(1)) - 1, int(m.group(2))
            bar = "#" * (20 * done // total) + "-" * (20 - 20 * done // total)
            msg = f"[{bar}] {done}/{total} files · {m.group(3)}"
        click.echo("\r\033[K" + msg[:width], err=True, nl=msg.startswith("running the rules"))

    return show


@cli.command()
@click.argument("files", nargs=-1, required=True, type=PATH)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def inspect(files: tuple[Path, ...], as_json: bool) -> None:
    """Show what was detected in each billing file: format, lines, period and totals.

    \b
    Example:
      gpu-auditor inspect fixtures/demo/billing/
    """
    from auditor.audit import _jsonable
    from auditor.tables.store import Store

    store = Store()
    sources = store.load_billing(list(files))
    if as_json:
        out = {"files": [{"path": s.path, "format": s.format, "sha256": s.sha256, "cost_column": s.cost_column,
                          **_jsonable(s.stats)}
                         for s in sources], "warnings": store.warnings}
        click.echo(json.dumps(out, indent=2))
        return
    from auditor.outputs.report import fmt_money, fmt_num

    for s in sources:
        st = s.stats
        click.echo(_safe(s.path))
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
        click.echo(f"warning: {_safe(w)}", err=True)


def _pull_options(several: bool):
    """The options that say what to pull, shared by `pull` and `audit --live`."""
    def decorate(f):
        options = [
            click.option("--provider", "providers", multiple=several, required=False,
                         type=click.Choice(["aws", "gcp", "azure", "k8s"]),
                         help="Where to pull from" + ("; repeatable (with --live)." if several else ".  [required]")),
            click.option("--region", "regions", multiple=True,
                         help="Region to read (AWS regions; GCP and Azure locations to keep); repeatable."),
            click.option("--profile", help="AWS named profile (default: the standard credential chain)."),
            click.option("--assume-role", help="AWS: role name to assume in each account of the organisation."),
            click.option("--account", "accounts", multiple=True,
                         help="AWS account (with --assume-role), GCP project or Azure subscription; repeatable."),
            click.option("--billing-uri", help="Where the billing export is: s3://bucket/prefix (AWS CUR or "
                         "Data Exports) or project.dataset.table (GCP BigQuery billing export)."),
            click.option("--kubeconfig", type=PATH, help="Kubernetes: kubeconfig file "
                         "(default: $KUBECONFIG, ~/.kube/config, or in-cluster)."),
            click.option("--context", help="Kubernetes: kubeconfig context."),
            click.option("--prometheus", help="Kubernetes: base URL of the Prometheus API with DCGM exporter metrics."),
            click.option("--prices", is_flag=True, help="Also read on-demand prices of the GPU types seen from the "
                         "provider's price API (AWS Pricing, Cloud Billing Catalog, Azure Retail Prices) into the "
                         "inventory."),
        ]
        for option in reversed(options):
            f = option(f)
        return f
    return decorate


class BillingPath(click.Path):
    """A billing file or folder, or a URI (s3a://bucket/prefix, for --engine spark) kept as text: as a Path its
    `//` would fold to `/`."""

    def convert(self, value, param, ctx):
        from auditor.providers.billing.detect import is_uri

        return value if is_uri(value) else super().convert(value, param, ctx)


@cli.command()
@click.argument("billing", nargs=-1, required=False, type=BillingPath(path_type=Path, readable=False))
@click.option("--live", is_flag=True, help="Pull from --provider into a temporary snapshot first, and audit it "
              "(with any BILLING given).")
@_pull_options(several=True)
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
@click.option("--email", "email_it", is_flag=True,
              help="Then email the audit to the team leads and the policy owner (SMTP settings from the "
                   "GPU_AUDITOR_SMTP_* environment; see `gpu-auditor email --help`); exit 3 if a message is "
                   "left in OUT/outbox.")
@FOLLOW_SYMLINKS
def audit(billing, policy_path, inventory, quarter, since, until, out_dir, fail_on, select, as_of, quiet,
          email_it, live, previous, generated_at, baseline, engine, spark_master, follow_symlinks, **pull_args):
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
    from auditor.core import run_audit
    from auditor.outputs.report import write_outputs
    from auditor.policy import load_policy

    window = from_options(quarter, since, until)
    today = _day(as_of)
    policy = load_policy(policy_path)
    if email_it:  # a missing SMTP setting fails before the audit runs, not after
        from auditor.outputs.mail import smtp_settings

        smtp = smtp_settings()
    billing = _live_snapshots(live, pull_args, window, quiet) + list(billing)
    stamp = _generated_at(generated_at)
    last_quarter = _load_previous(previous)
    reader = None
    if engine == "spark":
        from auditor.tables.spark import billing_engine

        reader = billing_engine(spark_master, debug=click.get_current_context().obj["debug"])
    result = run_audit(policy, billing, inventory, window, today, select or None, _progress(quiet),
                       baseline=baseline, engine=reader, previous=last_quarter, generated_at=stamp)
    written = write_outputs(result, out_dir, follow_symlinks=follow_symlinks)
    _print_summary(result)
    for w in result.warnings:
        click.echo(f"warning: {_safe(w, policy.mask_secrets)}", err=True)
    click.echo(f"\nwrote {', '.join(_safe(p) for p in written)}")
    mail_left = False
    if email_it:
        from auditor.outputs.mail import send_audit

        click.echo("")
        mail_left = _mail_report(send_audit(out_dir, policy, out_dir / "outbox", smtp, progress=_mail_progress,
                                            follow_symlinks=follow_symlinks), dry_run=False)
    threshold = None if fail_on == "none" else Severity.parse(fail_on)
    code = EXIT_PARTIAL if mail_left else result.exit_code(threshold)
    if result.partial:  # every non-zero exit says why in its last line (a message left says so itself)
        click.echo("partial audit: a source could not be read completely (see the warnings above and the "
                   "report's inputs)", err=True)
    elif code == EXIT_FINDINGS:
        over = sum(1 for f in result.active() if f.severity >= threshold)
        click.echo(f"fail on {fail_on}: {over} finding(s) at or above {fail_on}", err=True)
    sys.exit(code)


def _live_snapshots(live: bool, pull_args: dict, window, quiet: bool) -> list[Path]:
    """For `audit --live`: pull each --provider into a snapshot in a temporary folder (removed when the command
    ends) and return the snapshot folders; without --live, check that there is something to audit."""
    import tempfile

    from auditor.providers.live.pull import pull_snapshot

    providers = pull_args.pop("providers")
    if not live:
        if providers:
            raise click.UsageError("--provider goes with --live (or use `gpu-auditor pull`)")
        if not click.get_current_context().params.get("billing"):
            raise click.UsageError("give billing files, folders or snapshots to audit, or --live --provider P")
        return []
    if not providers:
        raise click.UsageError("--live needs --provider (aws, gcp, azure or k8s)")
    tmp = click.get_current_context().with_resource(tempfile.TemporaryDirectory(prefix="gpu-auditor-live-"))
    out = []
    for provider in dict.fromkeys(providers):
        options = _pull_request(provider, window or quarter_to_date(), pull_args)
        pull_snapshot(options, Path(tmp) / provider, progress=_progress(quiet))
        out.append(Path(tmp) / provider)
    return out


def _pull_request(provider: str, window, args: dict):
    from auditor.providers.live.pull import PullOptions

    return PullOptions(provider, window, regions=list(args["regions"]), profile=args["profile"],
                       assume_role=args["assume_role"], accounts=list(args["accounts"]), billing=args["billing_uri"],
                       kubeconfig=str(args["kubeconfig"]) if args["kubeconfig"] else None, context=args["context"],
                       prometheus=args["prometheus"], prices=args["prices"])


@cli.command("pull")
@_pull_options(several=False)
@click.option("--quarter", help="Window as a calendar quarter, e.g. 2026-Q3 (default: the quarter to date).")
@click.option("--since", help="Window start (UTC date, inclusive).")
@click.option("--until", help="Window end (UTC date, exclusive).")
@click.option("--out", "out_dir", required=True, type=PATH, help="The snapshot folder to write.")
@click.option("--force", is_flag=True, help="Replace an existing snapshot folder.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@FOLLOW_SYMLINKS
def pull_command(providers, quarter, since, until, out_dir, force, quiet, follow_symlinks, **pull_args):
    """Pull billing and live GPU inventory from one provider into a snapshot folder.

    \b
    The snapshot holds billing/ (the provider's billing files), inventory.json (GPU machines, their
    utilisation, training jobs) and manifest.json (the window, the sources asked, what each returned,
    the SHA-256 of every file, and every source that failed). Audit it later, reproducibly:
      gpu-auditor audit --policy P --out REPORT/ SNAPSHOT/

    \b
    Example:
      gpu-auditor pull --provider aws --region us-east-1 --region us-west-2 --out snapshot/

    Exit 3 when a source failed (it is named in the manifest; the others are in the snapshot).
    """
    from auditor.providers.live.pull import pull_snapshot, source_line

    if not providers:  # checked here, not by click, whose message runs over several lines
        raise click.UsageError("--provider is required (aws, gcp, azure or k8s)")
    window = from_options(quarter, since, until) or quarter_to_date()
    manifest = pull_snapshot(_pull_request(providers, window, pull_args), out_dir, force=force,
                             progress=_progress(quiet), follow_symlinks=follow_symlinks)
    c = manifest["counts"]
    click.echo(f"wrote snapshot {_safe(out_dir)} ({window.label}): {c['assets']} GPU assets, "
               f"{c['gpu_usage']} utilisation series, {c['jobs']} jobs, {c['billing_files']} billing files")
    for s in manifest["sources"]:
        click.echo(_safe(f"  {s['status']:<7}{s['name']}: {source_line(s)}"))
    if manifest["failed"]:
        click.echo(f"warning: {len(manifest['failed'])} source(s) failed; an audit of this snapshot is partial",
                   err=True)
        sys.exit(EXIT_PARTIAL)


def _generated_at(value: str | None) -> datetime | None:
    """--generated-at, else $SOURCE_DATE_EPOCH (the reproducible-builds convention), else None: the audit then
    stamps itself with its as-of date (Audit.stamp), never with the clock."""
    import os
    from datetime import UTC

    if value:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise InputError(f"--generated-at {value!r}: use a time like 2026-10-20T14:30:00+02:00") from None
        return stamp.astimezone(UTC).replace(tzinfo=None) if stamp.tzinfo else stamp
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        return None
    try:
        return datetime.fromtimestamp(int(epoch), UTC).replace(tzinfo=None)
    except (ValueError, OverflowError, OSError):
        raise InputError(f"SOURCE_DATE_EPOCH {epoch!r}: use whole seconds since 1970-01-01 UTC") from None


def _load_previous(path: Path | None):
    if path is None:
        return None
    from auditor.trend import load_previous

    return load_previous(path)


@cli.command()
@click.argument("audit_json", type=PATH)
@click.option("--format", "formats", multiple=True, type=click.Choice(["html", "md", "csv", "json"]),
              help="The view to render; repeatable. Default: html, md and csv.")
@click.option("--out", "out_dir", type=PATH,
              help="Write report.html, report.md, findings.csv (audit.json) into this folder, atomically; "
                   "without it, print the one format asked for.")
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
    formats = tuple(dict.fromkeys(formats)) or (("html", "md", "csv") if out_dir else ())
    if out_dir is None:
        if len(formats) != 1:
            raise click.UsageError("without --out, give exactly one --format to print")
        click.echo(views.render(doc, formats[0], team), nl=False)
        return
    written = views.write_outputs(doc, out_dir, formats, team, follow_symlinks=follow_symlinks)
    click.echo(f"wrote {', '.join(_safe(p) for p in written)}")


def _print_summary(result) -> None:
    from auditor.outputs.report import fmt_money

    s = result.summary
    masking = getattr(result.policy, "mask_secrets", True)
    click.echo(_safe(f"GPU spend audit {result.window.label} · {result.policy.name}", masking))
    click.echo(f"  total spend       {fmt_money(s['billed_cost'])}")
    click.echo(f"  GPU compute       {fmt_money(s['gpu_cost'])}")
    click.echo(f"  savings / month   {fmt_money(s['monthly_savings'])}")
    click.echo(f"  open findings     {s['findings']['total']} ({s['findings']['waived']} waived)")
    policy = result.policy
    if policy.rates:
        click.echo(f"  rates             {policy.rates.describe(policy.currency)}")
    for src in result.sources:  # thresholds and budgets are in the policy's currency
        other = {c: v for c, v in (src.stats.get("billed_cost") or {}).items() if policy.convert(v, c) is None}
        if other:
            click.echo(f"  left out          {src.path}: {fmt_money(other)} left out of the thresholds and budgets "
                       f"(in {policy.currency}; the policy gives no rate)")
    if result.baseline is not None:
        click.echo(_safe(f"  baseline          {len(result.known)} known finding(s) in {result.baseline['path']}, "
                         "not reported"))
    if not result.findings:
        return
    click.echo("")
    rows = {}
    for f in result.active():
        r = rows.setdefault(f.rule, {"name": f.name, "n": 0, "sev": f.severity, "save": {}, "elsewhere": {}})
        r["n"] += 1
        if f.monthly_savings is not None:  # a saving another rule counts on the same resource is shown apart
            into = r["elsewhere"] if f.counted_under else r["save"]
            into[f.currency] = into.get(f.currency, 0) + f.monthly_savings
    click.echo(f"  {'rule':<8}{'name':<26}{'severity':<10}{'findings':>9}  {'saving / month':>16}")
    for rid, r in sorted(rows.items()):
        save = fmt_money(r["save"]) if r["save"] or not r["elsewhere"] else ""
        if r["elsewhere"]:
            save = (save + " (+" if save else "") + fmt_money(r["elsewhere"]) + ("*)" if save else "*")
        click.echo(f"  {rid:<8}{r['name']:<26}{r['sev'].label:<10}{r['n']:>9}  {save:>16}")
    if any(r["elsewhere"] for r in rows.values()):
        click.echo("  * already counted under another rule's finding on the same resource; the total counts it once")


@cli.command()
@click.argument("audit_path", metavar="[AUDIT]", required=False, type=PATH)
@click.option("--policy", "policy_path", type=PATH,
              help="The GPU policy: its teams, their leads, and the owner who gets the summary.")
@click.option("--smtp-host", help="SMTP server. [env GPU_AUDITOR_SMTP_HOST]")
@click.option("--smtp-port", type=click.IntRange(1, 65535),
              help="SMTP port; default 25, or 587 with --starttls, 465 with --ssl. [env GPU_AUDITOR_SMTP_PORT]")
@click.option("--smtp-user", help="Log in as this user; the password comes from the environment "
                                  "(GPU_AUDITOR_SMTP_PASSWORD) or --smtp-password-file. [env GPU_AUDITOR_SMTP_USER]")
@click.option("--smtp-password-file", type=PATH,
              help="Read the SMTP password from this file. [env GPU_AUDITOR_SMTP_PASSWORD_FILE]")
@click.option("--starttls", "security", flag_value="starttls",
              help="Upgrade the connection with STARTTLS. [env GPU_AUDITOR_SMTP_SECURITY=starttls]")
@click.option("--ssl", "security", flag_value="ssl", help="Implicit TLS. [env GPU_AUDITOR_SMTP_SECURITY=ssl]")
@click.option("--smtp-cafile", help="Trust the CA certificates in this PEM file for the server's certificate. "
                                    "[env GPU_AUDITOR_SMTP_CAFILE]")
@click.option("--from", "sender", help="Sender address; default the policy owner. [env GPU_AUDITOR_SMTP_FROM]")
@click.option("--dry-run", is_flag=True, help="Write each message as an .eml file into the outbox; send nothing.")
@click.option("--outbox", type=PATH,
              help="Folder for the messages and their delivery state; default: outbox/ beside audit.json.")
@click.option("--resend", "resend_dir", metavar="OUTBOX", type=PATH,
              help="Send what is left in this outbox (failed, not attempted, or written by --dry-run).")
@click.option("--attempts", type=click.IntRange(1, 10), default=4, show_default=True,
              help="Tries per message when the server fails for now (4xx, a dropped connection).")
@click.option("--retry-delay", type=click.FloatRange(0, 300), default=2.0, show_default=True,
              help="Seconds before the first retry; doubled before each next one.")
@FOLLOW_SYMLINKS
def email(audit_path, policy_path, smtp_host, smtp_port, smtp_user, smtp_password_file, security, smtp_cafile,
          sender, dry_run, outbox, resend_dir, attempts, retry_delay, follow_symlinks):
    """Email the audit: each team lead one message about their team, the policy owner a summary of all
    teams and everything no team owns. AUDIT is an audit folder or its audit.json.

    Messages go through the outbox folder: each is kept there as an .eml file with a .json state, a message
    is never sent twice for one audit, and what could not be delivered stays for --resend.

    \b
    Exit codes: 0 every message delivered (or written, with --dry-run),
    2 usage or input error, 3 a message is left in the outbox.

    \b
    Example:
      GPU_AUDITOR_SMTP_PASSWORD=... gpu-auditor email --policy fixtures/demo/policy.yml \\
        --smtp-host smtp.example.com --starttls --smtp-user auditor demo-report
    """
    from auditor.outputs.mail import Retry, resend, send_audit, smtp_settings

    retry = Retry(attempts=attempts, delay=retry_delay)
    if resend_dir is not None:
        if audit_path or policy_path or dry_run or outbox:
            raise click.UsageError("--resend OUTBOX takes no AUDIT, --policy, --outbox or --dry-run")
        settings = smtp_settings(smtp_host, smtp_port, smtp_user, security, smtp_password_file, smtp_cafile)
        run = resend(resend_dir, settings, retry, _mail_progress, follow_symlinks=follow_symlinks)
        if not run.entries:
            click.echo(f"nothing left to send in {resend_dir}")
            sys.exit(EXIT_CLEAN)
        sys.exit(EXIT_PARTIAL if _mail_report(run, dry_run=False) else EXIT_CLEAN)
    if audit_path is None or policy_path is None:
        raise click.UsageError("give an AUDIT folder and --policy (or --resend OUTBOX)")
    from auditor.policy import load_policy

    policy = load_policy(policy_path)
    settings = None if dry_run else smtp_settings(smtp_host, smtp_port, smtp_user, security, smtp_password_file,
                                                  smtp_cafile)
    folder = audit_path if os.path.isdir(audit_path) else audit_path.parent
    run = send_audit(audit_path, policy, outbox or folder / "outbox", settings, sender, retry, _mail_progress,
                     follow_symlinks=follow_symlinks)
    sys.exit(EXIT_PARTIAL if _mail_report(run, dry_run) else EXIT_CLEAN)


def _mail_progress(outcome) -> None:
    st = outcome.entry.state
    if outcome.status == "sent":
        click.echo(_safe(f"sent          {st['recipient']}  {st['subject']}"))
    else:
        tries = st.get("attempts", 0)
        click.echo(_safe(f"not sent      {st['recipient']}  {outcome.reason} ({tries} attempt{'s' * (tries != 1)})"),
                   err=True)


def _mail_report(run, dry_run: bool) -> bool:
    """Print what an email run did; True when a message is left in the outbox."""
    sent_now = {o.entry.stem for o in run.outcomes if o.status == "sent"}
    for e in run.entries:
        if e.sent and e.stem not in sent_now:
            click.echo(f"already sent  {e.state['recipient']}  on {e.state.get('sent_at')}; not sent again")
        elif dry_run and not e.sent:
            click.echo(f"written       {e.state['recipient']}  {e.eml}")
    for w in run.warnings:
        click.echo(f"warning: {_safe(w)}", err=True)
    left = run.left
    if dry_run:
        click.echo(f"dry run: {len(left)} message(s) in {run.outbox}; send them with: "
                   f"gpu-auditor email --resend {run.outbox}")
        return False
    delivered = len(run.entries) - len(left)
    click.echo(f"{delivered} of {len(run.entries)} message(s) delivered")
    if left:
        click.echo(f"{len(left)} left in {run.outbox}; send them with: gpu-auditor email --resend {run.outbox}",
                   err=True)
    return bool(left)


@cli.group()
def rules() -> None:
    """List the rule pack and explain each rule."""


@rules.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules_list(as_json: bool) -> None:
    """List every rule: ID, name, severity, policy clause and what it checks."""
    from auditor.registry import all_rules

    items = all_rules()
    if as_json:
        click.echo(json.dumps([{"id": r.id, "name": r.name, "severity": r.severity.label, "clause": r.clause,
                                "entity": r.entity.__name__, "summary": r.summary(),
                                "options": {k: f.default for k, f in r.options.items()},
                                "option_docs": {k: f.doc for k, f in r.options.items()},
                                "policy_keys": policy_keys(r)} for r in items], indent=2))
        return
    for r in items:
        opts = ", ".join(f"{k}={_show(f.default)}" for k, f in r.options.items()) or "no options"
        extra = [k for k in policy_keys(r) if not k.startswith("clauses.")]
        also = f"; also {', '.join(extra)}" if extra else ""
        click.echo(f"{r.id:<8}{r.name:<28}{r.severity.label:<9}{r.clause:<20}{r.summary()} "
                   f"[clauses.{r.clause}: {opts}{also}]")


def policy_keys(r) -> list[str]:
    """The policy keys that tune a rule: its clause's options, severity and switch, and what else it reads."""
    clause = f"clauses.{r.clause}"
    return ([f"{clause}.{k}" for k in r.options] + [f"{clause}.severity", f"{clause}.enabled", f"{clause}.text"]
            + list(getattr(r, "policy_keys", ())))


def _show(value) -> str:
    return json.dumps(value) if isinstance(value, list | bool) or value is None else str(value)


@rules.command("explain")
@click.argument("rule_id")
def rules_explain(rule_id: str) -> None:
    """Show a rule's documentation: what it does, why it matters, an example, how to fix."""
    from auditor.registry import all_rules, get_rule

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
    click.echo("\nOptions (set in the policy clause)\n----------------------------------")
    for k, f in r.options.items():
        click.echo(f"  {k} (default {f.default!r}): {f.doc}")
    if not r.options:
        click.echo("  none: the clause sets only its text, severity and enabled")
    click.echo("\nPolicy keys\n-----------")
    for k in policy_keys(r):
        click.echo(f"  {k}")


@cli.group()
def policy() -> None:
    """Check a GPU policy, render it as Markdown for the runbook, or write a starter one."""


@policy.command("validate")
@click.argument("file", type=PATH)
def policy_validate(file: Path) -> None:
    """Check a policy file: unknown keys, wrong types and bad values are named with their line."""
    from auditor.policy import load_policy

    p = load_policy(file)
    click.echo(_safe(f"{file}: ok: '{p.name}' version {p.version}, {len(p.clauses)} clauses, {len(p.teams)} teams, "
                     f"{len(p.waivers)} waivers"))
    today = date.today()
    for w in p.waivers:
        if w.expired(today):
            click.echo(_safe(f"warning: {file}:{w.line}: waiver for {w.rule} on {w.resource} expired on "
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

    today = _day(as_of)
    click.echo(render_markdown(load_policy(file), today), nl=False)


@policy.command("init")
@click.argument("file", type=PATH, default=Path("gpu-policy.yml"))
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


@cli.command()
@click.argument("manifests", nargs=-1, required=True, type=PATH)
@click.option("--policy", "policy_path", required=True, type=PATH,
              help="The team's GPU policy (YAML).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit", "github"]), default="text",
              show_default=True, help="Output format.")
@click.option("--output", type=PATH, help="Write the output to this file (atomically).")
@click.option("--fail-on", type=click.Choice(SEVERITY_CHOICES), default="high", show_default=True,
              help="Exit 1 when an open finding is at or above this severity.")
@click.option("--warn-only", is_flag=True, help="Report findings but exit 0 (a team's first weeks).")
@click.option("--skip-unknown", is_flag=True,
              help="Warn about, rather than stop at, YAML or JSON that is no manifest (for pre-commit hooks).")
@click.option("--as-of", help="Judge waiver expiry on this date instead of today.")
@FOLLOW_SYMLINKS
def gate(manifests, policy_path, fmt, output, fail_on, warn_only, skip_unknown, as_of, follow_symlinks):
    """Check training-job manifests against the policy before they run.

    \b
    MANIFEST files or folders (*.yaml, *.yml, *.json): Kubernetes workloads,
    Kubeflow (training jobs, Trainer, Katib), KubeRay, JobSet, LeaderWorkerSet,
    Argo, Tekton, SageMaker training and tuning requests, Vertex AI custom and
    tuning jobs, Azure ML command and sweep jobs, SkyPilot tasks and pipelines.
    Every file is read; each one that cannot be read is named in the output.
    Exit codes: 0 pass, 1 a finding at or above --fail-on, 2 usage or input
    error (any file that could not be read).

    \b
    Example:
      gpu-auditor gate --policy gpu-policy.yml --format sarif --output gate.sarif k8s/
    """
    from auditor.gate import run_gate
    from auditor.outputs.ci_formats import render, summary_line, write_output
    from auditor.policy import load_policy

    today = _day(as_of)
    threshold = None if fail_on == "none" else Severity.parse(fail_on)
    result = run_gate(load_policy(policy_path), list(manifests), fail_on=threshold, warn_only=warn_only, today=today,
                      skip_unknown=skip_unknown)
    content = render(result, fmt)
    if output:
        write_output(output, content, follow_symlinks)
        for e in result.failures:  # the file holds them too; the log should not need it opened
            click.echo(f"gpu-auditor: error: {mask(str(e))}", err=True)
        click.echo(summary_line(result), err=True)
    else:
        click.echo(content, nl=False)
    sys.exit(result.exit_code)


def main() -> None:
    from auditor.scratch import handle_sigterm

    handle_sigterm()
    cli(prog_name="gpu-auditor")

"""`email`: the audit to the team leads and the policy owner, through the outbox."""

from __future__ import annotations

import os
import sys

import click

from auditor.cli.base import FOLLOW_SYMLINKS, PATH
from auditor.errors import EXIT_CLEAN, EXIT_PARTIAL
from auditor.outputs.terminal import safe


@click.command()
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

    retry = Retry.exponential(attempts=attempts, delay=retry_delay)
    if resend_dir is not None:
        if audit_path or policy_path or dry_run or outbox:
            raise click.UsageError("--resend OUTBOX takes no AUDIT, --policy, --outbox or --dry-run")
        smtp = smtp_settings(smtp_host, smtp_port, smtp_user, security, smtp_password_file, smtp_cafile)
        run = resend(resend_dir, smtp, retry, mail_progress, follow_symlinks=follow_symlinks)
        if not run.entries:
            click.echo(f"nothing left to send in {resend_dir}")
            sys.exit(EXIT_CLEAN)
        sys.exit(EXIT_PARTIAL if mail_report(run, dry_run=False) else EXIT_CLEAN)
    if audit_path is None or policy_path is None:
        raise click.UsageError("give an AUDIT folder and --policy (or --resend OUTBOX)")
    from auditor.policy import load_policy

    policy = load_policy(policy_path)
    settings = None if dry_run else smtp_settings(smtp_host, smtp_port, smtp_user, security, smtp_password_file,
                                                  smtp_cafile)
    folder = audit_path if os.path.isdir(audit_path) else audit_path.parent
    run = send_audit(audit_path, policy, outbox or folder / "outbox", settings, sender, retry, mail_progress,
                     follow_symlinks=follow_symlinks)
    sys.exit(EXIT_PARTIAL if mail_report(run, dry_run) else EXIT_CLEAN)


def mail_progress(outcome) -> None:
    st = outcome.entry.state
    if outcome.status == "sent":
        click.echo(safe(f"sent          {st['recipient']}  {st['subject']}"))
    else:
        tries = st.get("attempts", 0)
        click.echo(safe(f"not sent      {st['recipient']}  {outcome.reason} ({tries} attempt{'s' * (tries != 1)})"),
                   err=True)


def mail_report(run, dry_run: bool) -> bool:
    """Print what an email run did; True when a message is left in the outbox."""
    sent_now = {o.entry.stem for o in run.outcomes if o.status == "sent"}
    for e in run.entries:
        if e.sent and e.stem not in sent_now:
            click.echo(f"already sent  {e.state['recipient']}  on {e.state.get('sent_at')}; not sent again")
        elif dry_run and not e.sent:
            click.echo(f"written       {e.state['recipient']}  {e.eml}")
    for w in run.warnings:
        click.echo(f"warning: {safe(w)}", err=True)
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

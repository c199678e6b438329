"""`export`: the audit's attributed costs as a dataset another FinOps tool loads (`--focus`: FOCUS)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from auditor.cli.base import FOLLOW_SYMLINKS, PATH
from auditor.outputs.terminal import safe
from auditor.window import from_options


@click.command()
@click.argument("billing", nargs=-1, required=True, type=PATH)
@click.option("--focus", "focus_dir", type=PATH, required=True,
              help="Folder for focus.csv, focus.parquet and focus-metadata.json: one row per charge, FOCUS 1.3 "
                   "columns (the audit's allocation in Allocated*), then the same in x_Team, x_Project, "
                   "x_Namespace, x_Job.")
@click.option("--policy", "policy_path", required=True, type=PATH, help="The GPU policy: its team attribution.")
@click.option("--inventory", type=PATH, help="Inventory snapshot (JSON): its jobs name the charges that are jobs.")
@click.option("--quarter", help="Window as a calendar quarter, e.g. 2026-Q3.")
@click.option("--since", help="Window start (UTC date, inclusive).")
@click.option("--until", help="Window end (UTC date, exclusive).")
@FOLLOW_SYMLINKS
def export(billing: tuple[Path, ...], focus_dir: Path, policy_path: Path, inventory: Path | None,
           quarter: str | None, since: str | None, until: str | None, follow_symlinks: bool) -> None:
    """Write the billing in the window, each charge allocated to its team, project, namespace and job, as a
    FOCUS 1.3 dataset (CSV and Parquet, and its metadata) that adds up to the bill exactly.

    \b
    Example:
      gpu-auditor export --focus chargeback --policy fixtures/demo/policy.yml \\
        --inventory fixtures/demo/inventory.json --quarter 2026-Q3 fixtures/demo/billing
    """
    from auditor.atomic import target, write_files
    from auditor.model import fmt_money
    from auditor.policy import load_policy
    from auditor.providers.live.inputs import audit_inputs
    from auditor.readable import outside_inputs
    from auditor.tables import focus_export
    from auditor.tables.store import Store

    window = from_options(quarter, since, until)
    policy = load_policy(policy_path)
    folder = target(focus_dir, follow_symlinks, folder=True)
    outside_inputs(folder, list(billing), "FOCUS export", "--focus")
    store = Store()
    inputs = audit_inputs(list(billing), inventory)
    store.load_billing(inputs.billing)
    if inputs.inventory is not None:
        store.load_snapshot(inputs.inventory)
    window = store.audit_window(window or inputs.window, "export")
    files = focus_export.export(store, window, policy, datetime.now(UTC))
    totals = focus_export.totals(store, window)
    written = write_files(folder, files, what="FOCUS export")
    [(rows,)] = store.con.execute(f"SELECT count(*) FROM costs WHERE {window.where()}").fetchall()
    click.echo(f"FOCUS {focus_export.FOCUS_VERSION} dataset, {window.label}: {rows:,} charges, BilledCost "
               f"{fmt_money(totals)}")
    empty = [] if rows else [f"no billing lines fall in the export window {window.label}: the dataset is empty"]
    for w in store.warnings + inputs.warnings + empty:
        click.echo(f"warning: {safe(w, policy.mask_secrets)}", err=True)
    click.echo(f"wrote {', '.join(safe(p) for p in written)}")

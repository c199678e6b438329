"""`pull`: billing and live inventory from one provider into a snapshot folder; and the same options for
`audit --live`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from auditor.cli.base import FOLLOW_SYMLINKS, PATH, progress
from auditor.errors import EXIT_PARTIAL
from auditor.outputs.terminal import safe
from auditor.providers.live.pull import ADAPTERS
from auditor.window import from_options, quarter_to_date


def pull_options(several: bool):
    """The options that say what to pull, shared by `pull` and `audit --live`."""
    def decorate(f):
        options = [
            click.option("--provider", "providers", multiple=several, required=False,
                         type=click.Choice(list(ADAPTERS)),
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


def live_snapshots(live: bool, pull_args: dict, window, quiet: bool, policy=None) -> list[Path]:
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
        options = pull_request(provider, window or quarter_to_date(), pull_args, policy)
        pull_snapshot(options, Path(tmp) / provider, progress=progress(quiet))
        out.append(Path(tmp) / provider)
    return out


def pull_request(provider: str, window, args: dict, policy=None):
    """The pull's options; a policy's counters of tokens and samples (attribution.token_series, sample_series)
    are read from Prometheus with the DCGM series."""
    from auditor.providers.live.pull import PullOptions

    series = {"tokens": policy.token_series, "samples": policy.sample_series} if policy else {}
    return PullOptions(provider, window, regions=list(args["regions"]), profile=args["profile"],
                       assume_role=args["assume_role"], accounts=list(args["accounts"]), billing=args["billing_uri"],
                       kubeconfig=str(args["kubeconfig"]) if args["kubeconfig"] else None, context=args["context"],
                       prometheus=args["prometheus"], prices=args["prices"],
                       unit_series={unit: names for unit, names in series.items() if names},
                       series_job_labels=policy.series_job_labels if policy else [])


@click.command("pull")
@pull_options(several=False)
@click.option("--quarter", help="Window as a calendar quarter, e.g. 2026-Q3 (default: the quarter to date).")
@click.option("--since", help="Window start (UTC date, inclusive).")
@click.option("--until", help="Window end (UTC date, exclusive).")
@click.option("--out", "out_dir", required=True, type=PATH, help="The snapshot folder to write.")
@click.option("--force", is_flag=True, help="Replace an existing snapshot folder.")
@click.option("--policy", "policy_path", type=PATH, help="Kubernetes with --prometheus: the policy whose "
              "attribution.token_series and sample_series (counters of a job's tokens and samples) to read.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@FOLLOW_SYMLINKS
def pull_command(providers, quarter, since, until, out_dir, force, policy_path, quiet, follow_symlinks,
                 **pull_args):
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
    policy = None
    if policy_path is not None:
        from auditor.policy import load_policy

        policy = load_policy(policy_path)
    manifest = pull_snapshot(pull_request(providers, window, pull_args, policy), out_dir, force=force,
                             progress=progress(quiet), follow_symlinks=follow_symlinks)
    c = manifest["counts"]
    click.echo(f"wrote snapshot {safe(out_dir)} ({window.label}): {c['assets']} GPU assets, "
               f"{c['gpu_usage']} utilisation series, {c['jobs']} jobs, {c['billing_files']} billing files")
    for s in manifest["sources"]:
        click.echo(safe(f"  {s['status']:<7}{s['name']}: {source_line(s)}"))
    if manifest["failed"]:
        click.echo(f"warning: {len(manifest['failed'])} source(s) failed; an audit of this snapshot is partial",
                   err=True)
        sys.exit(EXIT_PARTIAL)

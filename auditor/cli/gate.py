"""`gate`: training-job manifests checked against the policy before they run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from auditor.cli.base import DEFAULT_POLICY, FOLLOW_SYMLINKS, PATH, SEVERITY_CHOICES, day, threshold
from auditor.errors import InputError
from auditor.secret_patterns import mask


@click.command()
@click.argument("manifests", nargs=-1, required=True, type=PATH)
@click.option("--policy", "policy_path", type=PATH,
              help=f"The team's GPU policy (YAML). Default: {DEFAULT_POLICY} in the current folder, where "
                   "`policy init` writes it.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit", "github", "markdown"]),
              default="text", show_default=True, help="Output format.")
@click.option("--output", type=PATH, help="Write the output to this file (atomically); - for standard output.")
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
    Argo (and the objects its resource steps create), Tekton, KServe, Kueue
    placement, SageMaker training and tuning requests, Vertex AI custom and
    tuning jobs, Azure ML command, sweep, automl, finetuning and pipeline jobs,
    SkyPilot tasks, pipelines and job groups. Every file is read; each one that
    cannot be read is named in the output and on stderr.
    Exit codes: 0 pass, 1 a finding at or above --fail-on, 2 usage or input
    error (any file that could not be read).

    \b
    Example:
      gpu-auditor gate --policy gpu-policy.yml --format sarif --output gate.sarif k8s/
    """
    from auditor.gate import run_gate
    from auditor.outputs.ci_formats import render, summary_line, write_output
    from auditor.policy import load_policy

    today = day(as_of)
    if policy_path is None:
        if not DEFAULT_POLICY.is_file():
            raise InputError(f"no --policy given and no {DEFAULT_POLICY} in {Path.cwd()}: name the policy with "
                             f"--policy, or write one here with `gpu-auditor policy init`")
        policy_path = DEFAULT_POLICY
    result = run_gate(load_policy(policy_path), list(manifests), fail_on=threshold(fail_on),
                      warn_only=warn_only, today=today, skip_unknown=skip_unknown)
    content = render(result, fmt)
    if output and str(output) != "-":
        write_output(output, content, follow_symlinks)
    else:
        click.echo(content, nl=False)
    if output or fmt != "text":  # the report holds them too; a CI log should not need it opened or parsed
        for e in result.failures:
            click.echo(f"gpu-auditor: error: {mask(str(e))}", err=True)
    if output:
        click.echo(summary_line(result), err=True)
    sys.exit(result.exit_code)

"""Tokens from a metrics series (auditor/providers/live/job_units.py): the policy names a Prometheus counter of the
tokens a job trained on; `pull --provider k8s --prometheus --policy` reads it from a real Prometheus on loopback
(backfilled with promtool) beside the recorded Kubernetes API of tests/test_pull_k8s_shared.py, and the audit's
unit costs divide the job's cost by it.

The series, written below every 30 minutes from 00:15 over 72 hours (144 samples), and the right answers from
job_units.py's docs (a counter counted from 0, a fall a restart, a job's series added):
- pod ft-llm-0 of job train/ft-llm counts 1,000,000 tokens a sample and restarts after its 20th sample (09:45):
  20,000,000 before the restart and 124,000,000 after it, 144,000,000 in all;
- pod ft-llm-1 of the same job counts 500,000 a sample, never restarting: 72,000,000;
- a series of a job the cluster does not have (`job="gone"`) names no job: unread.
So job train/ft-llm trained on 216,000,000 tokens; billed $4,320.00 (one charge of its own, written below), it cost
$20.00 per million tokens."""

from __future__ import annotations

import json
from datetime import UTC, timedelta
from decimal import Decimal

import billing_csv
import pytest
from click.testing import CliRunner
from servers.prometheus import serve
from test_pull_k8s_shared import FIRST, POLICY, SINCE, UNTIL, pull_k8s

from auditor.cli import cli
from auditor.providers.live.job_units import counter_total
from auditor.providers.live.snapshot import load_snapshot

STEP = timedelta(minutes=30)
SERIES_POLICY = POLICY + "attribution:\n  token_series: [training_tokens_total]\n"
TOKENS = 216_000_000


def counters() -> str:
    pods = {'job="ft-llm",namespace="train",pod="ft-llm-0"': lambda k: (k + 1 if k < 20 else k - 19) * 1_000_000,
            'job="ft-llm",namespace="train",pod="ft-llm-1"': lambda k: (k + 1) * 500_000,
            'job="gone",namespace="train",pod="gone-0"': lambda k: (k + 1) * 7}
    lines = ["# HELP training_tokens tokens trained on", "# TYPE training_tokens counter"]
    for labels, value in pods.items():
        t, k = FIRST, 0
        while t < UNTIL:
            lines.append(f"training_tokens_total{{{labels}}} {value(k)} {t.replace(tzinfo=UTC).timestamp():.0f}")
            t, k = t + STEP, k + 1
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory, prometheus_bin):
    with serve(*prometheus_bin, tmp_path_factory.mktemp("prometheus"), counters()) as url:
        yield url


@pytest.fixture(scope="module")
def pulled(prometheus, tmp_path_factory):
    root = tmp_path_factory.mktemp("units")
    (root / "policy.yml").write_text(SERIES_POLICY)
    pull_k8s(root, prometheus, "--policy", str(root / "policy.yml"))
    return root


@pytest.mark.heavy
def test_the_job_counts_the_tokens_of_its_series(pulled):
    jobs = {j["id"]: j for j in load_snapshot(pulled / "snap" / "inventory.json")["jobs"]}
    assert jobs["train/ft-llm"]["tags"]["training_tokens_total"] == str(TOKENS)
    assert [j for j in jobs.values() if "training_tokens_total" in j["tags"]] == [jobs["train/ft-llm"]]
    [source] = [s for s in json.loads((pulled / "snap" / "manifest.json").read_text())["sources"]
                if s["name"] == "k8s:job-units"]
    assert source["status"] == "ok" and source["counts"] == {"series": 3, "jobs": 1}
    assert source["unread"] == {"training_tokens_total series naming no job of the pull, or several": 1}


@pytest.mark.heavy
def test_unit_costs_divide_the_jobs_cost_by_its_tokens(pulled):
    billing_csv.write(pulled / "billing.csv", [billing_csv.charge("train/ft-llm", SINCE, {"team": "research"}, "4320")])
    result = CliRunner().invoke(cli, ["audit", "--policy", str(pulled / "policy.yml"), "--out", str(pulled / "r"),
                                      str(pulled / "snap"), str(pulled / "billing.csv")], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    doc = json.loads((pulled / "r" / "audit.json").read_text())
    [row] = [r for r in doc["summary"]["unit_costs"]["jobs"] if r["id"] == "train/ft-llm"]
    assert (row["cost"], row["tokens"], row["cost_per_million_tokens"]) == ("4320.00", str(TOKENS), "20.00")
    assert doc["summary"]["unit_costs"]["teams"]["research"]["USD"]["cost_per_million_tokens"] == "20.00"


def test_without_the_policy_no_series_is_read(prometheus, tmp_path):
    snap = pull_k8s(tmp_path, prometheus)
    names = [s["name"] for s in json.loads((snap / "manifest.json").read_text())["sources"]]
    assert "k8s:job-units" not in names and "k8s:dcgm" in names


def test_a_counter_counts_from_zero_and_restarts_on_a_fall():
    assert counter_total([Decimal(v) for v in (5, 10, 3, 7, 7)]) == Decimal(5 + 5 + 3 + 4 + 0)
    assert counter_total([]) == 0


def test_the_policy_refuses_a_series_that_is_no_metric_name(tmp_path):
    (tmp_path / "p.yml").write_text(POLICY + "attribution:\n  token_series: [training-tokens]\n")
    result = CliRunner().invoke(cli, ["policy", "validate", str(tmp_path / "p.yml")])
    assert result.exit_code == 2
    assert "p.yml:" in result.output and "attribution.token_series" in result.output
    assert "is not a Prometheus metric name" in result.output and "Traceback" not in result.output

"""SageMaker hyperparameter tuning jobs in `gpu-auditor pull --provider aws`: the tuning job is created in and read
from a real moto server (ListHyperParameterTuningJobs, DescribeHyperParameterTuningJob), its trials are training jobs
there too. moto does not implement ListTrainingJobsForHyperParameterTuningJob: that one answer is given in the SDK's
own before-call hook (as botocore's Stubber gives its answers), in the API's shape. Then an audit of the snapshot
with a CUR that bills the trials by ARN prices the sweep from its trials."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from click.testing import CliRunner
from test_pull_aws import SINCE, UNTIL, cur_line, put_cur

from auditor.cli import cli
from auditor.providers.live import aws as aws_live
from auditor.providers.live.pull import PullOptions, pull_snapshot
from auditor.providers.live.snapshot import load_snapshot
from auditor.window import Window

WINDOW = Window(SINCE, UNTIL, "test")
ROLE = "arn:aws:iam::123456789012:role/sm"
TRIALS = {"hpo-lr-001": "Completed", "hpo-lr-002": "Stopped", "hpo-lr-003": "Completed"}


def create_sweep(sm) -> tuple[str, dict[str, str]]:
    definition = {
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"}, "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://out/"}, "EnableManagedSpotTraining": True,
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 14400},
        "CheckpointConfig": {"S3Uri": "s3://ckpt/hpo-lr/"}}
    arn = sm.create_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="hpo-lr", TrainingJobDefinition=definition,
        HyperParameterTuningJobConfig={
            "Strategy": "Bayesian", "TrainingJobEarlyStoppingType": "Auto",
            "HyperParameterTuningJobObjective": {"Type": "Minimize", "MetricName": "validation:loss"},
            "ResourceLimits": {"MaxNumberOfTrainingJobs": 12, "MaxParallelTrainingJobs": 3,
                               "MaxRuntimeInSeconds": 86400}},
        Tags=[{"Key": "team", "Value": "nlp"}])["HyperParameterTuningJobArn"]
    trials = {}
    for name in TRIALS:  # the training jobs the tuning job launched
        trials[name] = sm.create_training_job(
            TrainingJobName=name, RoleArn=ROLE, AlgorithmSpecification=definition["AlgorithmSpecification"],
            OutputDataConfig=definition["OutputDataConfig"], ResourceConfig=definition["ResourceConfig"],
            StoppingCondition=definition["StoppingCondition"], EnableManagedSpotTraining=True)["TrainingJobArn"]
    return arn, trials


class TrialsAnswered(boto3.Session):
    """A real session whose SageMaker clients answer ListTrainingJobsForHyperParameterTuningJob (which moto lacks)
    from `answers`, through botocore's before-call event; every other call goes to the moto server."""

    answers: list[dict] = []
    asked: list[dict] = []

    def client(self, service, *args, **kwargs):
        client = super().client(service, *args, **kwargs)
        if service == "sagemaker":
            def answer(params, **_):  # params: the serialised request; its body the API parameters as JSON
                self.asked.append(json.loads(params["body"]))
                return AWSResponse(None, 200, {}, None), self.answers.pop(0)

            client.meta.events.register(
                "before-call.sagemaker.ListTrainingJobsForHyperParameterTuningJob", answer)
        return client


def summaries(trials: dict[str, str]) -> list[dict]:
    return [{"TrainingJobName": name, "TrainingJobArn": arn, "CreationTime": SINCE,
             "TrainingJobStatus": TRIALS[name], "TunedHyperParameters": {"lr": "0.01"}}
            for name, arn in trials.items()]


@pytest.mark.heavy
def test_tuning_jobs_are_sweeps_and_their_trials_link_to_them(aws, tmp_path, monkeypatch):
    sweep_arn, trials = create_sweep(boto3.client("sagemaker", region_name="us-east-1"))
    pages = summaries(trials)
    monkeypatch.setattr(TrialsAnswered, "answers", [{"TrainingJobSummaries": pages[:2], "NextToken": "p2"},
                                                    {"TrainingJobSummaries": pages[2:]}])
    monkeypatch.setattr(TrialsAnswered, "asked", [])
    manifest = pull_snapshot(PullOptions("aws", WINDOW, regions=["us-east-1"], billing="s3://nothing-here/"),
                             tmp_path / "snap", adapter=lambda p: aws_live.pull(p, session_factory=TrialsAnswered))
    source = next(s for s in manifest["sources"] if s["name"] == "aws:123456789012:sagemaker:us-east-1")
    assert source["counts"] == {"training_jobs": 3, "tuning_jobs": 1}
    assert [a.get("NextToken") for a in TrialsAnswered.asked] == [None, "p2"]  # both pages read
    assert TrialsAnswered.asked[0]["HyperParameterTuningJobName"] == "hpo-lr"

    jobs = {j["id"]: j for j in load_snapshot(tmp_path / "snap" / "inventory.json")["jobs"]}
    sweep = jobs[sweep_arn]
    assert {k: sweep[k] for k in ("kind", "name", "instance_type", "instance_count", "spot", "max_runtime_s",
                                  "sweep_max_trials", "sweep_parallel_trials", "sweep_trial_timeout_s",
                                  "sweep_algorithm", "sweep_early_stopping", "sweep_objective", "tags")} == {
        "kind": "sweep", "name": "hpo-lr", "instance_type": "ml.g5.12xlarge", "instance_count": 1, "spot": True,
        "max_runtime_s": 86400, "sweep_max_trials": 12, "sweep_parallel_trials": 3, "sweep_trial_timeout_s": 7200,
        "sweep_algorithm": "bayesian", "sweep_early_stopping": "auto", "sweep_objective": "minimize validation:loss",
        "tags": {"team": "nlp"}}
    for arn in trials.values():
        assert jobs[arn]["sweep_id"] == sweep_arn and jobs[arn]["kind"] == "job"
        assert jobs[arn]["tags"] == {"team": "nlp"}  # a trial carries its sweep's tags
    assert [jobs[trials[n]]["state"] for n in TRIALS] == ["completed", "stopped", "completed"]


@pytest.mark.heavy
def test_the_audit_prices_the_sweep_from_its_trials(aws, tmp_path, monkeypatch):
    sm = boto3.client("sagemaker", region_name="us-east-1")
    sweep_arn, trials = create_sweep(sm)
    monkeypatch.setattr(TrialsAnswered, "answers", [{"TrainingJobSummaries": summaries(trials)}])
    lines = []
    for i, (name, cost) in enumerate((("hpo-lr-001", 40.11), ("hpo-lr-002", 9.07), ("hpo-lr-003", 38.50))):
        line = cur_line(i, SINCE + timedelta(days=i % 2), {"InstanceId": trials[name],
                                                           "InstanceType": "ml.g5.12xlarge"}, "BoxUsage", cost)
        lines.append({**line, "lineItem/ProductCode": "AmazonSageMaker",
                      "lineItem/UsageType": "USE1-ml.g5.12xlarge-Training"})
    put_cur(boto3.client("s3", region_name="us-east-1"), lines)
    pull_snapshot(PullOptions("aws", WINDOW, regions=["us-east-1"], billing="s3://cur-bucket/cur/"),
                  tmp_path / "snap", adapter=lambda p: aws_live.pull(p, session_factory=TrialsAnswered))
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: t\nowner: o@example.com\nteams:\n  nlp: {lead: l@example.com}\n", encoding="utf-8")
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(out), str(tmp_path / "snap")])
    assert result.exit_code in (0, 1), result.output
    with open(out / "jobs.csv", encoding="utf-8", newline="") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    sweep = rows[sweep_arn]
    assert (sweep["kind"], sweep["cost"], sweep["trials"], sweep["trials_completed"], sweep["trials_stopped_early"],
            sweep["cost_per_completed_trial"], sweep["team"]) == ("sweep", "87.68", "3", "2", "1", "43.84", "nlp")
    assert rows[trials["hpo-lr-002"]]["cost"] == "9.07" and rows[trials["hpo-lr-002"]]["sweep_id"] == sweep_arn
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["summary"]["jobs"]["cost"] == {"USD": "87.68"}  # trials counted once, in their sweep
    assert "| hpo-lr | nlp | 3 | 1 | $87.68 | $43.84 |" in Path(out / "report.md").read_text(encoding="utf-8")
    assert Decimal(sweep["cost"]) == sum(Decimal(rows[a]["cost"]) for a in trials.values())


def test_a_multi_definition_tuning_job_keeps_its_objective():
    """The multi-definition shape of DescribeHyperParameterTuningJob (botocore's model: `TrainingJobDefinitions`,
    each with its own `TuningObjective`, and no `HyperParameterTuningJobObjective` in the config): the sweep keeps
    its objective, from the definition its trials' instance type is read from."""
    from auditor.providers.live.aws_sagemaker import tuning_job

    d = {"HyperParameterTuningJobArn": "arn:aws:sagemaker:us-east-1:123456789012:hyper-parameter-tuning-job/multi",
         "HyperParameterTuningJobName": "multi", "HyperParameterTuningJobStatus": "Completed",
         "HyperParameterTuningJobConfig": {"Strategy": "Bayesian", "ResourceLimits": {
             "MaxNumberOfTrainingJobs": 20, "MaxParallelTrainingJobs": 4}},
         "TrainingJobDefinitions": [
             {"DefinitionName": "xgb", "TuningObjective": {"Type": "Minimize", "MetricName": "validation:rmse"},
              "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
              "StoppingCondition": {"MaxRuntimeInSeconds": 3600}},
             {"DefinitionName": "mlp", "TuningObjective": {"Type": "Minimize", "MetricName": "validation:loss"},
              "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1}}]}
    sweep = tuning_job(d, {}, "123456789012", "us-east-1")
    assert (sweep["sweep_objective"], sweep["instance_type"], sweep["sweep_trial_timeout_s"]) == (
        "minimize validation:rmse", "ml.g5.xlarge", 3600)

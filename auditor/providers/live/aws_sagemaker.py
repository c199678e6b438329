"""The `aws:<account>:sagemaker:<region>` source: SageMaker training jobs of the window (managed spot, checkpoint
config, stopping condition, training and billable seconds, interruptions, tags); and hyperparameter tuning jobs
(`ListHyperParameterTuningJobs`, `DescribeHyperParameterTuningJob`) as sweeps: resource limits, strategy, early
stopping, objective, with each trial (`ListTrainingJobsForHyperParameterTuningJob`) a training job whose `sweep_id`
is the tuning job's ARN."""

from __future__ import annotations

from typing import Any

from auditor.providers.live.aws_account import PAGE, Account, throttled
from auditor.providers.live.pull import Pull, iso, pages, utc


def training_jobs(p: Pull, account: Account, region: str) -> dict[str, int]:
    sm = account.client("sagemaker", region)
    w = p.options.window
    summaries = [s for page in pages(sm.list_training_jobs, p.retry, throttled, MaxResults=PAGE,
                                     CreationTimeBefore=w.end, LastModifiedTimeAfter=w.start)
                 for s in page["TrainingJobSummaries"]]
    read = 0
    for s in summaries:
        d = p.retry.call(sm.describe_training_job, throttled=throttled, TrainingJobName=s["TrainingJobName"])
        if not d.get("TrainingJobArn"):
            p.unread("training jobs described without a TrainingJobArn")
            continue
        if not (d.get("ResourceConfig") or {}).get("InstanceType") and not (d.get("ResourceConfig") or {}).get(
                "InstanceGroups"):
            p.unread("training jobs without an instance type (read without one)")
        read += 1
        tags = {t["Key"]: t["Value"] for page in pages(sm.list_tags, p.retry, throttled,
                                                       ResourceArn=d["TrainingJobArn"]) for t in page["Tags"]}
        p.jobs.append(training_job(d, tags, account.id, region))
    tuning = _tuning_jobs(p, sm, account, region)
    return {"training_jobs": read, "tuning_jobs": tuning}


def _tuning_jobs(p: Pull, sm, account: Account, region: str) -> int:
    """Tuning jobs in the window as sweeps, and their trials linked to them: a trial read already as a training
    job gets the sweep's id; one that was not (it began before the window) is described and added."""
    w = p.options.window
    summaries = [s for page in pages(sm.list_hyper_parameter_tuning_jobs, p.retry, throttled, MaxResults=PAGE,
                                     CreationTimeBefore=w.end, LastModifiedTimeAfter=w.start)
                 for s in page["HyperParameterTuningJobSummaries"]]
    by_arn = {j["id"]: j for j in p.jobs if j["platform"] == "sagemaker"}
    read = 0
    for s in summaries:
        d = p.retry.call(sm.describe_hyper_parameter_tuning_job, throttled=throttled,
                         HyperParameterTuningJobName=s["HyperParameterTuningJobName"])
        if not d.get("HyperParameterTuningJobArn"):
            p.unread("tuning jobs described without a HyperParameterTuningJobArn")
            continue
        read += 1
        tags = {t["Key"]: t["Value"] for page in pages(sm.list_tags, p.retry, throttled,
                                                       ResourceArn=d["HyperParameterTuningJobArn"])
                for t in page["Tags"]}
        sweep = tuning_job(d, tags, account.id, region)
        p.jobs.append(sweep)
        for page in pages(sm.list_training_jobs_for_hyper_parameter_tuning_job, p.retry, throttled,
                          HyperParameterTuningJobName=d["HyperParameterTuningJobName"], MaxResults=PAGE):
            for t in page["TrainingJobSummaries"]:
                trial = by_arn.get(t.get("TrainingJobArn"))
                if trial is None and t.get("TrainingJobName"):
                    td = p.retry.call(sm.describe_training_job, throttled=throttled,
                                      TrainingJobName=t["TrainingJobName"])
                    trial = by_arn[td["TrainingJobArn"]] = training_job(td, tags, account.id, region)
                    p.jobs.append(trial)
                if trial is None:
                    p.unread("tuning job trials without a TrainingJobName")
                    continue
                trial["sweep_id"] = sweep["id"]
                if t.get("TrainingJobStatus"):  # as the tuning job reports it: Stopped when early stopping ended it
                    trial["state"] = t["TrainingJobStatus"].lower()
                trial["tags"] = {**tags, **trial["tags"]}  # a trial carries its sweep's tags
    return read


STRATEGIES = {"bayesian": "bayesian", "random": "random", "hyperband": "hyperband", "grid": "grid"}


def tuning_job(d: dict[str, Any], tags: dict[str, str], account: str, region: str) -> dict[str, Any]:
    """A `describe_hyper_parameter_tuning_job` answer as a snapshot sweep: `instance_type` and `instance_count`
    are one trial's, `max_runtime_s` the whole search's, `sweep_trial_timeout_s` each trial's. Hyperband stops
    trials early by itself; otherwise early stopping is `TrainingJobEarlyStoppingType: Auto`."""
    config = d.get("HyperParameterTuningJobConfig") or {}
    definition: dict[str, Any] = d.get("TrainingJobDefinition") or next(iter(d.get("TrainingJobDefinitions") or []), {})
    rc = definition.get("ResourceConfig") or {}
    limits = config.get("ResourceLimits") or {}
    strategy = str(config.get("Strategy") or "").lower()
    early = "hyperband" if strategy == "hyperband" else \
        ("auto" if str(config.get("TrainingJobEarlyStoppingType") or "Off").lower() == "auto" else None)
    # the multi-definition shape puts the objective in each definition (TrainingJobDefinitions[].TuningObjective)
    objective = config.get("HyperParameterTuningJobObjective") or definition.get("TuningObjective") or {}
    return {
        "id": d["HyperParameterTuningJobArn"], "platform": "sagemaker", "provider": "aws", "account": account,
        "region": region, "name": d.get("HyperParameterTuningJobName"), "kind": "sweep",
        "state": (d.get("HyperParameterTuningJobStatus") or "").lower() or None,
        "instance_type": rc.get("InstanceType"), "instance_count": rc.get("InstanceCount") or 1,
        "spot": bool(definition.get("EnableManagedSpotTraining")),
        "checkpoint_uri": (definition.get("CheckpointConfig") or {}).get("S3Uri"),
        "max_runtime_s": limits.get("MaxRuntimeInSeconds"),
        "sweep_max_trials": limits.get("MaxNumberOfTrainingJobs"),
        "sweep_parallel_trials": limits.get("MaxParallelTrainingJobs"),
        "sweep_trial_timeout_s": (definition.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds"),
        "sweep_algorithm": STRATEGIES.get(strategy, strategy or None), "sweep_early_stopping": early,
        "sweep_objective": (f"{str(objective['Type']).lower()} {objective['MetricName']}"
                            if objective.get("Type") and objective.get("MetricName") else None),
        "start_time": iso(utc(d.get("CreationTime"))), "end_time": iso(utc(d.get("HyperParameterTuningEndTime"))),
        "tags": tags,
    }


def training_job(d: dict[str, Any], tags: dict[str, str], account: str, region: str) -> dict[str, Any]:
    """A `describe_training_job` answer as a snapshot job."""
    rc = d.get("ResourceConfig", {})
    groups = rc.get("InstanceGroups") or []
    itype = rc.get("InstanceType") or (groups[0]["InstanceType"] if groups else None)
    count = rc.get("InstanceCount") or sum(g.get("InstanceCount", 0) for g in groups) or 1
    stop = d.get("StoppingCondition", {})
    transitions = d.get("SecondaryStatusTransitions", [])
    return {
        "id": d["TrainingJobArn"], "platform": "sagemaker", "provider": "aws", "account": account, "region": region,
        "name": d["TrainingJobName"], "state": (d.get("TrainingJobStatus") or "").lower() or None,
        "instance_type": itype, "instance_count": count, "spot": bool(d.get("EnableManagedSpotTraining")),
        "checkpoint_uri": (d.get("CheckpointConfig") or {}).get("S3Uri"),
        "max_runtime_s": stop.get("MaxRuntimeInSeconds"), "max_wait_s": stop.get("MaxWaitTimeInSeconds"),
        "training_s": d.get("TrainingTimeInSeconds"), "billable_s": d.get("BillableTimeInSeconds"),
        "interruptions": sum(1 for t in transitions if t.get("Status") == "Interrupted"),
        "start_time": iso(utc(d.get("TrainingStartTime") or d.get("CreationTime"))),
        "end_time": iso(utc(d.get("TrainingEndTime"))), "tags": tags,
        "sweep_id": d.get("TuningJobArn"),  # a trial of a tuning job
    }

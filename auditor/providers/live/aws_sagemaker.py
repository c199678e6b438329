"""The `aws:<account>:sagemaker:<region>` source: SageMaker training jobs of the window (managed spot, checkpoint
config, stopping condition, training and billable seconds, interruptions, tags)."""

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
    return {"training_jobs": read}


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
    }

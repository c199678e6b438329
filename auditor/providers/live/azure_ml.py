"""The `azure:<sub>:ml` source: Azure ML command and sweep jobs of every workspace, from the ARM REST API
(`Microsoft.MachineLearningServices/workspaces/{ws}/jobs`, api-version 2024-04-01, every `nextLink` followed; other
job types, such as pipelines, are counted in the source's line).

A command job is spot when `queueSettings.jobTier` is Spot or the compute cluster's `vmPriority` is LowPriority;
its instance type is `resources.instanceType` (serverless) or the cluster's `vmSize`; its checkpoint location is
read as the gate reads it from a manifest (an output, environment variable or `--checkpoint-dir` argument that
names one). A sweep job is a job of kind `sweep`: its trial read as a command job on the sweep's compute, with
`limits` (maxTotalTrials, maxConcurrentTrials, trialTimeout, timeout), the sampling algorithm, the early
termination policy and the objective. ARM gives a job no start or end time, so `start_time` is its creation time,
and a finished job created before the window is left out. A `computeId` that is not a resource id is counted, and
the job read without its cluster.

Not done yet: job end times, training seconds and interruptions (ARM does not give them; the run history API
would); a sweep's trials as they ran (child jobs); pipeline jobs.
"""

from __future__ import annotations

import re
from typing import Any

from azure.core.exceptions import HttpResponseError

from auditor.providers.live.azure_rest import Rest
from auditor.providers.live.pull import Pull, iso, utc
from auditor.providers.manifests import INTERVAL_KEY, checkpoint_of  # the gate's reading: a job and its manifest agree

ML_API = "2024-04-01"
FINISHED = {"completed", "failed", "canceled"}
ARM_ID = re.compile(r"(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/")
JOB_TYPES = {"Command": "command_jobs", "Sweep": "sweep_jobs"}


def jobs(p: Pull, arm: Rest, sub: str) -> dict[str, int]:
    w = p.options.window
    workspaces = [ws for page in arm.pages(f"/subscriptions/{sub}/providers/Microsoft.MachineLearningServices/"
                                           "workspaces", **{"api-version": ML_API})
                  for ws in page.get("value") or []]
    computes: dict[str, dict | None] = {}
    counts = {"workspaces": len(workspaces), **dict.fromkeys(JOB_TYPES.values(), 0)}
    seen: set[str] = set()
    for ws in workspaces:
        if not ARM_ID.match(str(ws.get("id") or "")):
            p.unread("workspaces without a resource id")
            continue
        # every job type in one list: command and sweep jobs are read, the others counted by type
        for page in arm.pages(f"{ws['id']}/jobs", **{"api-version": ML_API}):
            for job in page.get("value") or []:
                props = job.get("properties") or {}
                job_type = props.get("jobType")
                created = utc((job.get("systemData") or {}).get("createdAt"))
                if job_type not in JOB_TYPES:
                    p.unread(f"{job_type or 'untyped'} jobs (only Command and Sweep jobs are read)")
                    continue
                if created and created >= w.end:
                    continue
                if created and created < w.start and (props.get("status") or "").lower() in FINISHED:
                    continue  # finished, and begun before the window: most likely outside it
                jid = job_id(job, ws)
                if jid is None or jid.lower() in seen:
                    p.unread("jobs without an id or name" if jid is None else "jobs listed twice")
                    continue
                seen.add(jid.lower())
                compute_id = str(props.get("computeId") or "")
                if compute_id and not ARM_ID.match(compute_id):
                    p.unread(f"computeId values that are not resource ids ({compute_id[:60]!r}; the job is read "
                             "without its cluster)")
                    compute_id = ""
                if compute_id and compute_id.lower() not in computes:
                    computes[compute_id.lower()] = _aml_compute(arm, compute_id)
                compute = computes.get(compute_id.lower())
                make = azureml_sweep if job_type == "Sweep" else azureml_job
                p.jobs.append({**make(job, ws, compute, sub), "id": jid})
                counts[JOB_TYPES[job_type]] += 1
    return counts


def job_id(job: dict[str, Any], workspace: dict[str, Any]) -> str | None:
    """A job's ARM id; where the answer's `id` is not one, the workspace's id and the job's name make it."""
    if ARM_ID.match(str(job.get("id") or "")):
        return job["id"]
    return f"{workspace['id']}/jobs/{job['name']}" if job.get("name") else None


def _aml_compute(arm: Rest, compute_id: str) -> dict | None:
    try:
        return arm.get(compute_id, **{"api-version": ML_API})
    except HttpResponseError as e:
        if e.status_code == 404:  # the cluster was deleted since: the job says what it can alone
            return None
        raise


def azureml_job(job: dict[str, Any], workspace: dict[str, Any], compute: dict | None, sub: str) -> dict[str, Any]:
    """An ARM Azure ML command job (with its compute, when it ran on a cluster) as a snapshot job."""
    props = job.get("properties") or {}
    resources = props.get("resources") or {}
    cluster = ((compute or {}).get("properties") or {}).get("properties") or {}
    tier = str((props.get("queueSettings") or {}).get("jobTier") or "")
    # `default` is the run's own artifact folder that Azure ML adds to every job, named after the job: it says
    # nothing about checkpoints (and a job called llm-nockpt would read as one)
    outputs = {k: v for k, v in (props.get("outputs") or {}).items() if isinstance(v, dict) and k != "default"}
    # an output without a uri goes to the workspace's default datastore under the job's name: durable too
    mounts = {f"/outputs/{k}": v.get("uri") or f"azureml://datastores/workspaceblobstore/paths/azureml/"
              f"{job.get('name')}/{k}/" for k, v in outputs.items()}
    command = re.sub(r"\$\{\{\s*outputs\.([\w-]+)\s*\}\}", r"/outputs/\1", str(props.get("command") or ""))
    tags = {str(k): str(v) for k, v in (props.get("tags") or {}).items()}
    try:
        interval = float(tags[INTERVAL_KEY]) if INTERVAL_KEY in tags else None
    except ValueError:
        interval = None
    count = resources.get("instanceCount")
    return {
        "id": job.get("id"), "platform": "azureml", "provider": "azure", "account": sub,
        "region": workspace.get("location"), "name": props.get("displayName") or job.get("name"),
        "state": (props.get("status") or "").lower() or None,
        "instance_type": resources.get("instanceType") or cluster.get("vmSize"),
        "instance_count": count if isinstance(count, int) and count >= 1 else 1,
        "spot": tier.lower() == "spot" or str(cluster.get("vmPriority") or "").lower() == "lowpriority",
        "checkpoint_uri": checkpoint_of({str(k): str(v) for k, v in (props.get("environmentVariables") or {}).items()},
                                        command, mounts),
        "checkpoint_interval_min": interval if interval is not None and interval >= 0 else None,
        "max_runtime_s": duration_s((props.get("limits") or {}).get("timeout")),
        "start_time": iso(utc((job.get("systemData") or {}).get("createdAt"))), "tags": tags,
    }


def azureml_sweep(job: dict[str, Any], workspace: dict[str, Any], compute: dict | None, sub: str) -> dict[str, Any]:
    """An ARM Azure ML sweep job as a snapshot job of kind `sweep`: its trial (command, resources, environment)
    read as a command job on the sweep's compute, with the sweep's limits, sampling and early termination.
    `max_runtime_s` is the whole sweep's timeout; each trial's is `sweep_trial_timeout_s`."""
    props = job.get("properties") or {}
    trial = props.get("trial") or {}
    limits = props.get("limits") or {}
    as_command = {**props, "limits": {"timeout": limits.get("timeout")},
                  **{k: trial.get(k) for k in ("resources", "command", "environmentVariables")}}
    objective = props.get("objective") or {}
    goal, metric = objective.get("goal"), objective.get("primaryMetric")

    def positive(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None

    return {
        **azureml_job({**job, "properties": as_command}, workspace, compute, sub), "kind": "sweep",
        "sweep_max_trials": positive(limits.get("maxTotalTrials")),
        "sweep_parallel_trials": positive(limits.get("maxConcurrentTrials")),
        "sweep_trial_timeout_s": duration_s(limits.get("trialTimeout")),
        "sweep_algorithm": str((props.get("samplingAlgorithm") or {}).get("samplingAlgorithmType") or "").lower()
        or None,
        "sweep_early_stopping": str((props.get("earlyTermination") or {}).get("policyType") or "").lower() or None,
        "sweep_objective": f"{str(goal).lower()} {metric}" if goal and metric else None,
    }


def duration_s(text: str | None) -> int | None:
    """Seconds of an ISO 8601 duration as ARM writes them (PT5M, PT3600S, P1DT12H); None when absent or odd."""
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text or "")
    if not m or not any(m.groups()):
        return None
    d, h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return int(d * 86400 + h * 3600 + mi * 60 + s)

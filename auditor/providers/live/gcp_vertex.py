"""The `gcp:<project>:vertex:<region>` source: Vertex AI custom jobs of the window (spot scheduling strategy, base
output directory or a checkpoint variable as the checkpoint location, timeouts), read from the Vertex REST API
through the authorised session, so the large aiplatform SDK is not needed."""

from __future__ import annotations

import re
from typing import Any

from google.auth.transport.requests import AuthorizedSession

from auditor.providers.live.gcp_api import throttled
from auditor.providers.live.pull import Pull, gpu_model, iso, pages, utc


def custom_jobs(p: Pull, session: AuthorizedSession, endpoint: str | None, project: str, region: str) -> dict[str, int]:
    base = (endpoint or f"https://{region}-aiplatform.googleapis.com").rstrip("/")
    url = f"{base}/v1/projects/{project}/locations/{region}/customJobs"
    w = p.options.window

    def get(**params: Any) -> dict:
        r = session.get(url, params=params, timeout=60)
        r.raise_for_status()
        answer: dict = r.json()
        return answer

    count = 0
    for page in pages(get, p.retry, throttled, token_in="pageToken", token_out="nextPageToken", pageSize=100,
                      filter=f'create_time<"{iso(w.end)}"'):
        for job in page.get("customJobs", []):
            if not isinstance(job, dict) or not job.get("name"):
                p.unread("custom jobs without a name")
                continue
            end = utc(job.get("endTime"))
            if end and end < w.start:
                continue
            p.jobs.append(vertex_job(job, project, region))
            count += 1
    return {"custom_jobs": count}


def vertex_job(job: dict[str, Any], project: str, region: str) -> dict[str, Any]:
    spec = job.get("jobSpec", {})
    pools = [w for w in spec.get("workerPoolSpecs", []) if w]
    machine = pools[0].get("machineSpec", {}) if pools else {}
    sched = spec.get("scheduling", {})
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    checkpoint = f"{base.rstrip('/')}/checkpoints/" if base else None  # Vertex sets AIP_CHECKPOINT_DIR there
    for pool in pools:
        for env in (pool.get("containerSpec") or {}).get("env", []):
            if re.search(r"(?i)checkpoint|ckpt", env.get("name", "")) and "://" in env.get("value", ""):
                checkpoint = checkpoint or env["value"]
    timeout = sched.get("timeout")
    return {
        "id": job["name"], "platform": "vertex-ai", "provider": "gcp", "account": project, "region": region,
        "name": job.get("displayName"), "state": job.get("state", "").removeprefix("JOB_STATE_").lower() or None,
        "instance_type": machine.get("machineType"),
        "instance_count": sum(int(w.get("replicaCount", 1)) for w in pools) or 1,
        "gpu_model": gpu_model(machine.get("acceleratorType")), "gpu_count": machine.get("acceleratorCount"),
        "spot": sched.get("strategy") == "SPOT", "checkpoint_uri": checkpoint,
        "max_runtime_s": int(float(timeout.rstrip("s"))) if timeout else None,
        "max_wait_s": int(float(sched["maxWaitDuration"].rstrip("s"))) if sched.get("maxWaitDuration") else None,
        "start_time": iso(utc(job.get("startTime") or job.get("createTime"))), "end_time": iso(utc(job.get("endTime"))),
        "tags": job.get("labels", {}),
    }

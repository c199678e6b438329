from __future__ import annotations

from auditor.model import Job, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class SpotWithoutCheckpoint(Rule):
    """Spot or preemptible training job with no checkpoint, or checkpoints too far apart.

    ## What it does
    Flags a training job or sweep that runs on spot (preemptible) capacity and either has no
    checkpoint location, or saves checkpoints less often than every `max_interval_min` minutes.
    Servers (Deployments, StatefulSets, LeaderWorkerSets, RayServices, SkyServe services) keep no
    training state and are judged by SPOT004 instead.

    ## Why it matters
    Spot capacity costs 60-90% less, but it is taken back at two minutes' notice. A job without
    checkpoints starts over after each interruption and pays again for the work it lost.

    ## Example
    ```yaml
    - {id: arn:aws:sagemaker:us-east-1:111122223333:training-job/llm-ft, platform: sagemaker,
       spot: true, checkpoint_uri: null}
    ```

    ## How to fix
    Write checkpoints to durable storage at least every `max_interval_min` minutes, and resume from
    the latest one on start.
    - SageMaker: set `CheckpointConfig.S3Uri`; SageMaker copies /opt/ml/checkpoints there and back.
    - Kubernetes: write them to a bucket or a PersistentVolumeClaim mounted in the job, and say how
      often with the `gpu-auditor.dev/checkpoint-interval-min` annotation.
    - Vertex AI: write them under the job's `baseOutputDirectory` in Cloud Storage.
    - Azure ML: write them to the job's outputs or a datastore mounted in the job.
    - SkyPilot: write them to a bucket mounted with `file_mounts` (mode MOUNT).
    """

    id = "SPOT001"
    name = "spot-without-checkpoint"
    severity = Severity.HIGH
    entity = Job
    clause = "spot_checkpoint"
    options = {
        "max_interval_min": Field("number", default=60, minimum=1,
                                  doc="longest allowed time between checkpoints, minutes"),
    }

    def check(self, job: Job, ctx):
        if not job.spot or job.kind == "server":
            return
        limit = self.opt("max_interval_min")
        if not job.checkpoint_uri:
            problem = "has no checkpoint location"
        elif job.checkpoint_interval_min is not None and job.checkpoint_interval_min > limit:
            problem = f"checkpoints every {job.checkpoint_interval_min:g} min (policy: at most {limit:g})"
        else:
            return
        billed = primary(job.cost)
        currency, cost = billed if billed else ("USD", None)
        lost = ""
        if job.interruptions:
            lost = f"; interrupted {job.interruptions} times"
        spent = f"; {fmt_money(cost, currency)} billed" if cost is not None else ""
        yield self.finding(
            job, ctx, f"spot {job.platform} job {job.name or job.id} {problem}{lost}{spent}",
            evidence={"platform": job.platform, "instance_type": job.instance_type,
                      "instance_count": job.instance_count, "checkpoint_uri": job.checkpoint_uri,
                      "checkpoint_interval_min": job.checkpoint_interval_min, "interruptions": job.interruptions,
                      "training_s": job.training_s, "billable_s": job.billable_s,
                      "max_interval_min": limit},
            cost=cost, currency=currency)

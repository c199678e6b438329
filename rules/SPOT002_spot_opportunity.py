from __future__ import annotations

from decimal import Decimal

from auditor.model import Job, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class SpotOpportunity(Rule):
    """On-demand training job that checkpoints, and so could run on spot for 60-90% less.

    ## What it does
    Flags a GPU training job that runs on on-demand capacity although it writes checkpoints (it
    has a checkpoint location; with `require_checkpoint` false, any on-demand GPU job), and
    estimates what spot would save: the job's billed cost (or, for a manifest, the catalog
    on-demand price x instances x its runtime) times the catalog's typical spot discount for the
    provider (`auditor/data/catalog.yaml`: 65% on AWS and Google Cloud, 70% on Azure). Spot prices
    move by the hour and the zone, so the saving is an estimate, and the finding says so. Flags the
    job when the saving reaches `min_monthly_savings` a month (a run's saving, for a manifest).
    Inference endpoints and notebooks are not training and are left alone.

    ## Why it matters
    A job that checkpoints has already paid for what makes spot safe: an interruption costs it
    minutes, not the run. Running it on demand pays two to ten times the price for nothing.

    ## Example
    ```yaml
    - {id: arn:aws:sagemaker:us-east-1:111122223333:training-job/detector-v3, platform: sagemaker,
       provider: aws, instance_type: ml.p4d.24xlarge, spot: false,
       checkpoint_uri: s3://ckpt/detector-v3/, checkpoint_interval_min: 30, cost: {USD: "1317.60"}}
    ```

    ## How to fix
    Run it on spot; keep the checkpoints and resume from the latest.
    - SageMaker: set `EnableManagedSpotTraining: true` with `MaxWaitTimeInSeconds`.
    - Kubernetes: schedule it on a spot node pool (a node selector or `priorityClassName`).
    - Vertex AI: set `scheduling.strategy: SPOT`.
    - Azure ML: run it on a low-priority compute cluster.
    - SkyPilot: set `use_spot: true` in its resources.
    """

    id = "SPOT002"
    name = "spot-opportunity"
    severity = Severity.MEDIUM
    entity = Job
    clause = "spot_opportunity"
    options = {
        "require_checkpoint": Field("bool", default=True,
                                    doc="only jobs that write checkpoints are fault-tolerant enough for spot"),
        "min_monthly_savings": Field("money", default=50, minimum=0,
                                     doc="smallest estimated saving a month (a run, for a manifest) worth a finding"),
    }
    NOT_TRAINING = ("inference", "notebook")

    def check(self, job: Job, ctx):
        if job.spot or (job.workload or "").lower() in self.NOT_TRAINING:
            return
        t = ctx.catalog.instance(job.provider, job.instance_type)
        if not (job.gpu_model or (t and t.gpu_count)):
            return  # not a GPU job
        if self.opt("require_checkpoint") and not job.checkpoint_uri:
            return
        prices = ctx.catalog.prices.get(job.provider or "")
        if prices is None:
            return
        discount = prices.typical_spot_discount
        billed = primary(job.cost)
        if billed:
            currency, cost = billed
            saving, per = ctx.monthly(cost) * discount, "a month"
            basis = (f"billed cost as a monthly run rate x the catalog's typical {job.provider} spot discount "
                     f"({discount:.0%}); an estimate")
        elif t and (seconds := job.training_s or job.max_runtime_s):
            currency, cost = "USD", None
            saving = t.price_per_hour * job.instance_count * Decimal(seconds) / 3600 * discount
            per = "a run"
            basis = (f"catalog on-demand price x {job.instance_count} instance(s) x "
                     f"{'training' if job.training_s else 'maximum'} runtime x the typical spot discount "
                     f"({discount:.0%}); an estimate")
        else:
            return
        if self.short_of(saving, currency, "min_monthly_savings", ctx):
            return
        spent = f"; {fmt_money(cost, currency)} billed in {ctx.window.label}" if cost is not None else ""
        yield self.finding(
            job, ctx,
            f"on-demand {job.platform} job {job.name or job.id} ({job.instance_count}x {job.instance_type}) "
            + (f"checkpoints to {job.checkpoint_uri}" if job.checkpoint_uri else "runs on demand")
            + f": spot would save about {fmt_money(saving, currency)} {per} (an estimate from the typical "
              f"{discount:.0%} spot discount){spent}",
            evidence={"platform": job.platform, "instance_type": job.instance_type,
                      "instance_count": job.instance_count, "checkpoint_uri": job.checkpoint_uri,
                      "checkpoint_interval_min": job.checkpoint_interval_min,
                      "typical_spot_discount": str(discount), "prices": prices.source,
                      "saving_per": per, "savings_basis": basis},
            cost=cost, monthly_savings=saving if per == "a month" else None, currency=currency,
            wasted=cost * discount if per == "a month" else None)

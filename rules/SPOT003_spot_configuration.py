from __future__ import annotations

from decimal import Decimal

from auditor.model import Job, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class SpotConfiguration(Rule):
    """Spot training job set up to lose: a wait limit too short for its runtime, or progress lost to interruptions.

    ## What it does
    For a job on spot capacity, flags
    - a maximum wait (SageMaker `MaxWaitTimeInSeconds`) below its maximum runtime: SageMaker
      refuses it, and elsewhere the job can never use the runtime it asks for;
    - a run that used more than `max_wait_used_pct` of its maximum wait (training plus waiting
      for capacity, start to end): one more interruption and the platform stops it unfinished;
    - lost progress: at least `min_interruptions` interruptions that cost more than
      `max_lost_progress_pct` of its training time. The time lost is the billed time beyond the
      training time where the platform bills more than it trained (50 h billed for 40 h of
      training lose 25% of it), else half a checkpoint interval per interruption (work since the
      last checkpoint is redone).
    The cost is the job's billed cost; the saving, for lost progress, is the share of it lost (the
    time lost over the billed time: 10 of 50 h, 20%), as a monthly run rate. A missing checkpoint,
    or checkpoints further apart than the policy allows, are SPOT001's.

    ## Why it matters
    Spot saves 60-90% only when the job finishes. A wait limit that is too tight throws the run
    away after paying for most of it; a job interrupted every few hours that checkpoints rarely
    pays again for the same steps.

    ## Example
    ```yaml
    - {id: arn:aws:sagemaker:us-east-1:111122223333:training-job/distill, platform: sagemaker,
       spot: true, checkpoint_uri: s3://ckpt/distill/, checkpoint_interval_min: 60,
       max_runtime_s: 86400, max_wait_s: 108000, start_time: 2026-09-03T00:00:00Z,
       end_time: 2026-09-04T05:00:00Z, training_s: 86400, interruptions: 4}
    ```

    ## How to fix
    Set the maximum wait to the runtime plus room for the interruptions the region sees (twice
    the runtime is a common start); checkpoint more often, or move to a zone, instance type or
    capacity type with fewer interruptions (or on demand, where spot keeps failing).
    """

    id = "SPOT003"
    name = "spot-configuration"
    severity = Severity.MEDIUM
    entity = Job
    clause = "spot_configuration"
    options = {
        "max_wait_used_pct": Field("number", default=80, minimum=1, maximum=100,
                                   doc="share of the maximum wait a run may use before the limit is too tight"),
        "min_interruptions": Field("int", default=3, minimum=1,
                                   doc="interruptions before lost progress is judged"),
        "max_lost_progress_pct": Field("number", default=10, minimum=0, maximum=100,
                                       doc="share of the training time that may be lost to interruptions"),
    }

    def check(self, job: Job, ctx):
        if not job.spot:
            return
        problems: list[str] = []
        evidence: dict = {"platform": job.platform, "instance_type": job.instance_type,
                          "max_runtime_s": job.max_runtime_s, "max_wait_s": job.max_wait_s,
                          "training_s": job.training_s, "billable_s": job.billable_s,
                          "interruptions": job.interruptions,
                          "checkpoint_interval_min": job.checkpoint_interval_min}
        if job.max_wait_s is not None and job.max_runtime_s is not None and job.max_wait_s < job.max_runtime_s:
            problems.append(f"waits at most {job.max_wait_s / 3600:.1f} h for a runtime of up to "
                            f"{job.max_runtime_s / 3600:.1f} h")
        wall = (job.end_time - job.start_time).total_seconds() if job.start_time and job.end_time else None
        if job.max_wait_s and wall is not None:
            used = wall / job.max_wait_s * 100
            evidence["wall_s"], evidence["max_wait_used_pct"] = int(wall), round(used, 1)
            if used > self.opt("max_wait_used_pct"):
                problems.append(f"took {wall / 3600:.1f} h of its {job.max_wait_s / 3600:.1f} h maximum wait "
                                f"({used:.0f}%)")
        lost = self._lost(job)
        lost_share = None  # of the billed time: the share of the cost lost
        if lost is not None:
            of_training, of_billed = lost
            evidence["lost_progress_pct"] = round(of_training * 100, 1)
            if (job.interruptions or 0) >= self.opt("min_interruptions") and \
                    of_training * 100 > self.opt("max_lost_progress_pct"):
                problems.append(f"lost about {of_training:.0%} of its training to {job.interruptions} interruptions")
                lost_share = of_billed
        if not problems:
            return
        billed = primary(job.cost)
        currency, cost = billed if billed else ("USD", None)
        wasted = cost * lost_share if cost is not None and lost_share else None
        saving = ctx.monthly(wasted) if wasted is not None else None
        spent = f"; {fmt_money(cost, currency)} billed" if cost is not None else ""
        yield self.finding(job, ctx, f"spot {job.platform} job {job.name or job.id} {'; '.join(problems)}{spent}",
                           evidence=evidence, cost=cost, monthly_savings=saving, currency=currency,
                           wasted=wasted)

    @staticmethod
    def _lost(job: Job) -> tuple[Decimal, Decimal] | None:
        """The time redone after interruptions as a share of the training time (what the threshold judges) and
        of the billed time (the share of the cost lost): the billed time beyond training, else half a
        checkpoint interval per interruption, the billed time then taken as the training time."""
        if not job.training_s or not job.interruptions:
            return None
        if job.billable_s and job.billable_s > job.training_s:
            lost = Decimal(job.billable_s - job.training_s)
            return lost / Decimal(job.training_s), lost / Decimal(job.billable_s)
        if job.checkpoint_interval_min:
            lost = Decimal(str(job.checkpoint_interval_min)) * 30 * job.interruptions
            share = min(lost / Decimal(job.training_s), Decimal(1))
            return share, share
        return None

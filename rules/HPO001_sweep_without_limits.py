from __future__ import annotations

from decimal import Decimal

from auditor.rules.BUD002_job_cost_cap import gpu_hour_price, gpus_held, held_cost

from auditor.model import Job, Severity, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class SweepWithoutLimits(Rule):
    """Hyperparameter sweep without early stopping, without a cap on its trials, or with a worst case over budget.

    ## What it does
    Judges every sweep (SageMaker tuning job, Vertex AI HyperparameterTuningJob, Katib Experiment, Azure
    ML sweep job) before it runs. Flags a sweep with no early-stopping or pruning policy (with
    `require_early_stopping` on; Hyperband counts as one; a sweep of one trial has nothing to stop
    early); with no cap on its total trials or more than `max_trials`; with more than
    `max_parallel_trials` trials at once; a grid search over more than `max_grid_points` points;
    and, with `max_sweep_cost` set, a sweep whose worst case (every GPU it holds at once,
    instances x GPUs, busy for its whole time limit `max_runtime_s`, at the catalog's USD per GPU-hour as
    BUD002 prices it) exceeds it, or whose worst case has no ceiling (no trial cap or no time limit).
    Amounts are in USD; under a policy in another currency the cost is not judged.

    ## Why it matters
    Sweeps are the largest avoidable training bills: most trials are clearly worse than the best by
    half-way, and without early stopping every one of them runs to the last epoch. A sweep with no trial
    cap runs until someone notices; a full grid multiplies every value of every parameter.

    ## Example
    ```yaml
    - {id: "k8s:vision/Experiment/resnet-lr", name: resnet-lr, platform: kubeflow, kind: sweep,
       provider: aws, instance_type: p4d.24xlarge, instance_count: 4, gpu_count: 8, gpu_model: A100,
       sweep_max_trials: 48, sweep_parallel_trials: 4, sweep_algorithm: random, max_runtime_s: 172800}
    ```

    ## How to fix
    Turn on early stopping, cap the total and parallel trials, use random or Bayesian search instead
    of a large grid, and give each trial a maximum runtime.
    - SageMaker: early stopping is `TrainingJobEarlyStoppingType: Auto` (or Hyperband).
    - Kubernetes: early stopping is Katib's `earlyStopping: medianstop`.
    - Vertex AI: early stopping is `decayCurveStoppingSpec` or `medianAutomatedStoppingSpec`.
    - Azure ML: early stopping is `early_termination: bandit`.
    """

    id = "HPO001"
    name = "sweep-without-limits"
    severity = Severity.HIGH
    entity = Job
    clause = "sweeps"
    options = {
        "require_early_stopping": Field("bool", default=True, doc="require an early-stopping or pruning policy"),
        "max_trials": Field("int", default=200, minimum=1, doc="most trials one sweep may run in all"),
        "max_parallel_trials": Field("int", default=16, minimum=1, doc="most trials one sweep may run at once"),
        "max_grid_points": Field("int", default=50, minimum=1, doc="largest grid a grid search may cover"),
        "max_sweep_cost": Field("money", minimum=0, doc="worst-case cost one sweep may reach, USD; unset: no cap"),
    }

    def check(self, job: Job, ctx):
        if job.kind != "sweep":
            return
        name = f"{job.platform} sweep {job.name or job.id}"
        evidence = {"max_trials": job.sweep_max_trials, "parallel_trials": job.sweep_parallel_trials,
                    "early_stopping": job.sweep_early_stopping, "algorithm": job.sweep_algorithm,
                    "grid_size": job.sweep_grid_size, "instance_count": job.instance_count,
                    "max_runtime_s": job.max_runtime_s}
        one_trial = job.sweep_max_trials is not None and job.sweep_max_trials <= 1  # nothing to stop early
        if self.opt("require_early_stopping") and not job.sweep_early_stopping and not one_trial:
            yield self.finding(job, ctx, f"{name} has no early stopping: every trial runs to its end",
                               evidence=evidence, key="early-stopping")
        cap = self.opt("max_trials")
        if job.sweep_max_trials is None:
            yield self.finding(job, ctx, f"{name} sets no cap on its trials", evidence=evidence, key="trials")
        elif job.sweep_max_trials > cap:
            yield self.finding(job, ctx, f"{name} may run {job.sweep_max_trials} trials (policy: at most {cap})",
                               evidence=evidence, key="trials")
        parallel = self.opt("max_parallel_trials")
        if (job.sweep_parallel_trials or 1) > parallel:
            yield self.finding(job, ctx, f"{name} runs {job.sweep_parallel_trials} trials at once (policy: at most "
                               f"{parallel})", evidence=evidence, key="parallel")
        grid = self.opt("max_grid_points")
        if job.sweep_algorithm == "grid" and job.sweep_grid_size and job.sweep_grid_size > grid:
            yield self.finding(job, ctx, f"{name} is a grid search over {job.sweep_grid_size:,} points (policy: at "
                               f"most {grid}); random or Bayesian search finds as good a point in far fewer trials",
                               evidence=evidence, key="grid")
        yield from self._cost(job, ctx, name, evidence)

    def _cost(self, job: Job, ctx, name: str, evidence: dict):
        budget = self.opt("max_sweep_cost")
        if budget is None or ctx.policy.currency != "USD":
            return
        gpus, price = gpus_held(job), gpu_hour_price(ctx.catalog, job)
        if not gpus or price is None:
            return
        per_gpu_hour, basis, model = price
        evidence = {**evidence, "gpus_at_once": str(gpus), "gpu_model": model, "price_basis": basis,
                    "price_per_gpu_hour": str(per_gpu_hour.quantize(Decimal("0.0001"))),
                    "max_sweep_cost": str(budget)}
        if job.sweep_max_trials is None or job.max_runtime_s is None:
            missing = "trial cap" if job.sweep_max_trials is None else "trial runtime limit"
            yield self.finding(job, ctx, f"{name} has no {missing}, so its worst-case cost has no ceiling under "
                               f"the per-sweep cap {fmt_money(budget)}", evidence=evidence, key="cost")
            return
        hours = Decimal(job.max_runtime_s) / 3600
        worst = held_cost(job, per_gpu_hour, job.max_runtime_s)
        evidence |= {"hours": str(hours.quantize(Decimal("0.01"))), "worst_case_cost": str(money(worst))}
        if worst > budget:
            yield self.finding(
                job, ctx, f"{name} may cost {fmt_money(worst)} ({job.sweep_max_trials} trials, "
                f"{job.sweep_parallel_trials or 1} at once on {gpus:g} {model} GPUs, x {fmt_money(per_gpu_hour)}/GPU-h "
                f"x {hours:,.1f} h), over the per-sweep cap {fmt_money(budget)}",
                evidence=evidence, cost=money(worst), key="cost")

from __future__ import annotations

from auditor.model import Job, Severity
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class SpotServerUnprotected(Rule):
    """Server on spot GPUs that an interruption takes down: one replica, no grace period, or no disruption budget.

    ## What it does
    Flags a server (a Deployment, StatefulSet, ReplicaSet, DaemonSet, LeaderWorkerSet, RayService or
    SkyServe service that asks for GPUs) placed on spot or preemptible capacity when it runs fewer than
    `min_replicas` replicas; and, on Kubernetes, when its pods declare no
    `terminationGracePeriodSeconds` of at least `min_grace_period_s`, or, with
    `require_disruption_budget` on, when no PodDisruptionBudget among the manifests checked selects its
    pods. Training jobs on spot are SPOT001's.

    ## Why it matters
    A server keeps no training state to checkpoint, but spot capacity is taken back at 30 seconds' to
    two minutes' notice. One replica means an outage at every interruption; without a grace period the
    requests in flight are cut off; without a disruption budget a node drain or consolidation can take
    every replica at once.

    ## Example
    ```yaml
    - {id: "k8s:nlp/Deployment/tgi", name: tgi, platform: kubernetes, kind: server, workload: inference,
       spot: true, instance_count: 1, gpu_count: 1, gpu_model: L4}
    ```

    ## How to fix
    Run at least `min_replicas` replicas spread over nodes (or keep some on on-demand capacity), set
    `terminationGracePeriodSeconds` with a preStop hook that stops taking requests, and add a
    PodDisruptionBudget (`minAvailable: 1`) that selects the server's pods.
    """

    id = "SPOT004"
    name = "spot-server-unprotected"
    severity = Severity.HIGH
    entity = Job
    clause = "spot_serving"
    options = {
        "min_replicas": Field("int", default=2, minimum=1, doc="fewest replicas a server on spot may run"),
        "min_grace_period_s": Field("int", default=30, minimum=0,
                                    doc="shortest termination grace period its pods must declare, seconds"),
        "require_disruption_budget": Field("bool", default=True,
                                           doc="require a PodDisruptionBudget selecting its pods (Kubernetes)"),
    }

    def check(self, job: Job, ctx):
        if job.kind != "server" or not job.spot:
            return
        problems = []
        if job.instance_count < self.opt("min_replicas"):
            problems.append(f"runs {job.instance_count} replica(s) (policy: at least {self.opt('min_replicas')})")
        if job.id.startswith("k8s:"):
            grace = job.grace_period_s
            if grace is None or grace < self.opt("min_grace_period_s"):
                declared = "declares no termination grace period" if grace is None else \
                    f"has a {grace} s termination grace period"
                problems.append(f"{declared} (policy: at least {self.opt('min_grace_period_s')} s)")
            if self.opt("require_disruption_budget") and not job.disruption_budget:
                problems.append("has no PodDisruptionBudget selecting its pods in the manifests checked")
        if not problems:
            return
        yield self.finding(
            job, ctx, f"{job.platform} server {job.name or job.id} on spot GPUs " + "; ".join(problems),
            evidence={"manifest_kind": job.manifest_kind, "replicas": job.instance_count,
                      "grace_period_s": job.grace_period_s, "disruption_budget": job.disruption_budget,
                      "gpu_model": job.gpu_model, "gpu_count": job.gpu_count,
                      "min_replicas": self.opt("min_replicas"), "min_grace_period_s": self.opt("min_grace_period_s"),
                      "require_disruption_budget": self.opt("require_disruption_budget")})

from __future__ import annotations

import fnmatch

from auditor.model import Job, Severity
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class RegionNotAllowed(Rule):
    """Training job placed in a region the policy does not allow.

    ## What it does
    Flags a job whose region is not in `allowed_regions` (region codes as the cloud writes them,
    `us-east-1`, `us-central1`, `eastus`; a glob such as `eu-*` matches a family). An empty list
    allows every region, and a job whose manifest does not say where it runs (a Kubernetes
    workload without a `topology.kubernetes.io/region` selector, a SageMaker request whose image
    names no region) is not judged: the cluster or the client decides, not the manifest.

    ## Why it matters
    Data residency commitments, negotiated capacity and discounts are per region, and a job away
    from its data pays to copy it (NET001) on every run.

    ## Example
    ```yaml
    - {id: "vertex:llm-pretrain", platform: vertex, provider: gcp, region: asia-east1}
    ```

    ## How to fix
    Run the job in one of the allowed regions, or ask the policy owner to add the region.
    - Kubernetes: through the node selector (`topology.kubernetes.io/region`) or a cluster there.
    - SageMaker: through the SageMaker client's region.
    - Vertex AI: through the job's location.
    - Azure ML: through the workspace's location.
    - SkyPilot: through `region` in its resources.
    """

    id = "REG001"
    name = "region-not-allowed"
    severity = Severity.HIGH
    entity = Job
    clause = "regions"
    options = {
        "allowed_regions": Field("list", item=Field("region"), default=[],
                                 doc="region codes (or globs) jobs may run in; empty allows all"),
    }

    def check(self, job: Job, ctx):
        allowed = self.opt("allowed_regions")
        if not allowed or not job.region:
            return
        region = job.region.strip().lower()
        if any(fnmatch.fnmatchcase(region, pattern.strip().lower()) for pattern in allowed):
            return
        yield self.finding(
            job, ctx, f"{job.platform} job {job.name or job.id} runs in {job.region}, which the policy does not "
            f"allow (allowed: {', '.join(allowed)})",
            evidence={"region": job.region, "allowed_regions": list(allowed), "provider": job.provider})

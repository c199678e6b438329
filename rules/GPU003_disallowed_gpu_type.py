from __future__ import annotations

import fnmatch

from auditor.model import Job, Severity
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class DisallowedGpuType(Rule):
    """Job on a GPU type the policy does not allow for its workload, or needing approval it lacks.

    ## What it does
    Takes the job's workload from its `workload_tags` label (`training`, `fine-tuning`,
    `inference`, `notebook`), else from what the manifest is (a SageMaker training job or a
    Kubernetes `Job` trains, a `Deployment` serves), else `default_workload`; and its GPU model
    from the catalog. Flags the job when `allowed` lists GPU models for that workload (or under
    `"*"`, for workloads without a list of their own) and the job's model is not one of them
    (names are catalog names, case-insensitive; a glob such as `A100*` matches `A100-80GB` too).
    An accelerator that is no NVIDIA GPU is named by its family (`TPU`, `Trainium`, `Inferentia`,
    `Neuron`, `Gaudi`, `AMD-Instinct`, `Intel-GPU`) or, a TPU, by its version (`tpu-v5p-slice`).
    Also flags a job on a model in `approval_required` that carries none of `approval_tags`
    (the label that records the approval, such as a ticket number). A job whose GPU model is not
    known is left to GPU004.

    ## Why it matters
    An H100 costs two to three times an A100 per hour and ten times an L4. Fine-tuning a 7B model
    or serving it on the largest GPU is the most common way a GPU budget runs out in a month.

    ## Example
    ```yaml
    - {id: "k8s:ml/Deployment/chat-api", platform: kubernetes, gpu_model: H100, gpu_count: 1,
       workload: inference}
    ```

    ## How to fix
    Move the job to a GPU type the policy allows for its workload (the instance type, node selector
    or accelerator in the manifest), or get the approval and record it in the approval label.
    """

    id = "GPU003"
    name = "disallowed-gpu-type"
    severity = Severity.HIGH
    entity = Job
    clause = "gpu_types"
    options = {
        "allowed": Field("map", default={}, item=Field("list", item=Field("gpu")),
                         doc="workload -> GPU models allowed for it; '*' for any other workload; empty allows all"),
        "workload_tags": Field("list", item=Field("tag"), default=["workload"],
                               doc="tags or labels that name a job's workload"),
        "default_workload": Field("str", default="training",
                                  doc="workload of a job that neither a label nor its platform names"),
        "approval_required": Field("list", item=Field("gpu"), default=[],
                                   doc="GPU models a job may use only with an approval label"),
        "approval_tags": Field("list", item=Field("tag"), default=["gpu-approval"],
                               doc="tags or labels whose non-empty value records the approval"),
    }

    def check(self, job: Job, ctx):
        model = job.gpu_model
        names = [model]
        if job.accelerator_family:  # a TPU, Trainium, Gaudi...: allowed by its family or its own name
            model, names = job.accelerator or job.accelerator_family, [job.accelerator_family, job.accelerator]
        elif not model or not ctx.catalog.gpu(model):
            return
        workload = (ctx.tag(job.tags, self.opt("workload_tags")) or job.workload
                    or self.opt("default_workload")).strip().lower()
        allowed_by = {k.strip().lower(): v for k, v in self.opt("allowed").items()}
        allowed = allowed_by.get(workload, allowed_by.get("*"))
        evidence = {"gpu_model": model, "gpu_count": job.gpu_count, "instance_type": job.instance_type,
                    "accelerator": job.accelerator, "workload": workload, "allowed": allowed}
        name = f"{job.platform} job {job.name or job.id}"
        if allowed is not None and not any(n and _listed(n, allowed) for n in names):
            yield self.finding(job, ctx, f"{name} ({workload}) uses {model}, which the policy does not allow for "
                               f"{workload} (allowed: {', '.join(allowed) or 'none'})",
                               evidence=evidence, key="workload")
        needs_approval = any(n and _listed(n, self.opt("approval_required")) for n in names)
        if needs_approval and ctx.tag(job.tags, self.opt("approval_tags")) is None:
            tags = " or ".join(self.opt("approval_tags"))
            yield self.finding(job, ctx, f"{name} uses {model}, which needs an approval recorded in the label {tags}",
                               evidence={**evidence, "approval_tags": list(self.opt("approval_tags"))},
                               key="approval")


def _listed(model: str, patterns: list[str]) -> bool:
    m = model.lower()
    return any(fnmatch.fnmatchcase(m, p.strip().lower()) for p in patterns)

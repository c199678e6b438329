from __future__ import annotations

from auditor.model import Job, Severity
from auditor.registry import register
from auditor.rule import Rule


@register
class UnknownGpuType(Rule):
    """Job that asks for a GPU or instance type the bundled catalog does not know.

    ## What it does
    Flags a job whose manifest names an accelerator or instance type (`nvidia-tesla-p100`,
    `A6000:2`, `p6-b300.48xlarge`) that the catalog cannot map to a GPU model. The
    other job rules cannot judge such a job: the GPU type is not on any allowed list (GPU003) and
    its cost cannot be projected (BUD002), so the gate says so rather than let it pass unseen.
    Accelerators that are not NVIDIA GPUs (TPU, Trainium, Inferentia, Gaudi, AMD Instinct, Intel)
    are known by their family, not unknown GPUs: GPU003 judges them against the allowed types.
    It takes its severity and `enabled` from the `gpu_types` clause.

    ## Why it matters
    A gate that silently passes what it does not understand is no gate. A typo in the
    accelerator name also fails at launch, after the queue wait, rather than in review.

    ## Example
    ```yaml
    - {id: "k8s:ml/Job/p100-test", platform: kubernetes, accelerator: nvidia-tesla-p100, gpu_count: 1}
    ```

    ## How to fix
    Fix the spelling of the accelerator or instance type, or use a GPU type from the catalog
    (`gpu-auditor` ships it in `auditor/data/catalog.yaml`); waive the finding for a type the
    catalog lacks, and ask for it to be added.
    """

    id = "GPU004"
    name = "unknown-gpu-type"
    severity = Severity.HIGH
    entity = Job
    clause = "gpu_types"

    def check(self, job: Job, ctx):
        if not job.accelerator or job.accelerator_family or (job.gpu_model and ctx.catalog.gpu(job.gpu_model)):
            return
        yield self.finding(
            job, ctx, f"{job.platform} job {job.name or job.id} asks for {job.accelerator!r}, a GPU type the "
            "catalog does not know: its GPU type and cost cannot be checked",
            evidence={"accelerator": job.accelerator, "instance_type": job.instance_type,
                      "gpu_model": job.gpu_model, "gpu_count": job.gpu_count, "manifest_kind": job.manifest_kind})

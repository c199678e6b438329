from __future__ import annotations

from auditor.model import NodeGpuAllocation, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class UnallocatedGpu(Rule):
    """Kubernetes GPU node paid for GPUs that no pod was allocated: capacity billed, not scheduled.

    ## What it does
    For a GPU node in the Kubernetes pull, compares its GPU-hours in the window (physical GPUs x hours
    it ran) with the GPU-hours its pods held (each pod's units x their share of a GPU: MIG by compute
    slices out of 7, time-slicing and MPS by replicas). Flags the node when the share no pod held is at
    least `min_unallocated_pct` and comes to at least `min_gpu_hours`. A MIG layout that leaves slices
    no profile covers counts as unallocated too. The cost is that share of the node's cost (billed, or
    the catalog price for its hours); the saving is that cost as a monthly run rate.

    ## Why it matters
    A GPU node bills whole, whether the scheduler placed one pod on it or eight. Nodes kept up for
    pods that never come, or MIG layouts that do not match what pods ask for, are paid and unused,
    and no pod-level cost report (request x hours) shows them.

    ## Example
    ```yaml
    - {id: i-0half, name: gpu-node-3, provider: aws, instance_type: p4d.24xlarge, gpu_model: A100,
       gpu_count: 8, node_hours: 720, allocated_gpu_hours: 2880, free_now: {nvidia.com/gpu: 4},
       cost: {USD: "15811.20"}, unallocated_cost: {USD: "7905.60"}}
    ```

    ## How to fix
    Let the cluster autoscaler (or Karpenter) remove nodes that pods do not fill, bin-pack GPU pods
    onto fewer nodes, and match the MIG layout (`nvidia.com/mig.config`) to the profiles pods request.
    """

    id = "KUBE003"
    name = "unallocated-gpu"
    severity = Severity.MEDIUM
    entity = NodeGpuAllocation
    clause = "gpu_allocation"
    options = {
        "min_unallocated_pct": Field("number", default=25, minimum=0, maximum=100,
                                     doc="share of the node's GPU-hours held by no pod that is worth a finding"),
        "min_gpu_hours": Field("number", default=24, minimum=0,
                               doc="unallocated GPU-hours below which a node is not flagged"),
    }

    def check(self, n: NodeGpuAllocation, ctx):
        if not n.gpu_hours:
            return
        free = n.unallocated_gpu_hours
        pct = 100 * free / n.gpu_hours
        if pct < self.opt("min_unallocated_pct") or free < self.opt("min_gpu_hours"):
            return
        billed = primary(n.unallocated_cost)
        currency, cost = billed if billed else ("USD", None)
        monthly = ctx.monthly(cost, n.node_hours) if cost is not None else None
        spent = f"; {fmt_money(cost, currency)} paid for unallocated GPUs in {ctx.window.label}" \
            if cost is not None else ""
        now = ", ".join(f"{units}x {r.removeprefix('nvidia.com/')}" for r, units in sorted(n.free_now.items()))
        yield self.finding(
            n, ctx,
            f"node {n.name or n.id} ({n.gpu_count}x {n.gpu_model or 'GPU'}): {pct:.0f}% of its GPU-hours "
            f"({free:,.0f} of {n.gpu_hours:,.0f}) were allocated to no pod"
            f"{f' (free at the pull: {now})' if now else ''}{spent}",
            evidence={"gpu_count": n.gpu_count, "node_hours": round(n.node_hours, 1),
                      "gpu_hours": round(n.gpu_hours, 1), "allocated_gpu_hours": round(n.allocated_gpu_hours, 1),
                      "unallocated_pct": round(pct, 1), "free_now": n.free_now, "sharing": n.sharing,
                      "pods": n.pods, "node_cost": {c: str(a) for c, a in n.cost.items()},
                      "cost_basis": n.cost_basis,
                      "savings_basis": "the unallocated share of the node's cost as a monthly run rate"},
            cost=cost, monthly_savings=monthly if monthly else None, currency=currency)

from __future__ import annotations

from decimal import Decimal

from auditor.model import RemoteDataFlow, Severity, fmt_money, money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class TrainingFarFromData(Rule):
    """Data copied to another region where the GPUs run: training far from its data.

    ## What it does
    Pairs each inter-region transfer out of a region with the GPU compute billed in the region it
    went to, in the same billing account and window. Flags a flow of at least `min_gb_per_month`
    into a region with at least `min_gpu_cost` of GPU compute: the data lives in one region and
    GPUs that read it run in another (the evidence names them, and the GPU spend at the source). The
    saving is the transfer's cost as a monthly run rate, what stops when training moves to the data
    or the data is kept in the training region. (NET001 flags any large inter-region flow; this
    rule says why the data moves.)

    ## Why it matters
    Reading a dataset from another region pays inter-region transfer ($0.02-$0.12 per GB) on every
    epoch or every refresh, and slows the GPUs that wait for it.

    ## Example
    ```yaml
    - {id: "aws:444455556666:inter_region:us-east-1->us-west-2", provider: aws, source: us-east-1,
       destination: us-west-2, gb: 15000, cost: {USD: "300.00"},
       destination_gpu_cost: {USD: "48000.00"}, destination_gpu_hours: 8800}
    ```

    ## How to fix
    Run the training in the region that holds the data, or keep one replica of the dataset in the
    training region (S3 Replication, a dual-region bucket) and read it there.
    """

    id = "REG002"
    name = "training-far-from-data"
    severity = Severity.MEDIUM
    entity = RemoteDataFlow
    clause = "data_locality"
    options = {
        "min_gb_per_month": Field("number", default=100, minimum=0,
                                  doc="inter-region GB a month below which a flow is not judged"),
        "min_gpu_cost": Field("money", default=100, minimum=0,
                              doc="GPU compute in the destination region, in the window, that makes it a GPU region"),
    }

    def check(self, flow: RemoteDataFlow, ctx):
        if not flow.source or not flow.destination or flow.source == flow.destination:
            return
        monthly_gb = ctx.monthly(flow.gb)
        if monthly_gb < Decimal(str(self.opt("min_gb_per_month"))):
            return
        gpu = primary(flow.destination_gpu_cost)
        if gpu is None or self.short_of(gpu[1], gpu[0], "min_gpu_cost", ctx):
            return
        gpu_currency, gpu_cost = gpu
        billed = primary(flow.cost)
        currency, cost = billed if billed else ("USD", Decimal(0))
        where = ", ".join(flow.destination_gpu_resources[:3])
        yield self.finding(
            flow, ctx,
            f"{flow.gb:,.0f} GB copied from {flow.source} to {flow.destination} in {ctx.window.label} "
            f"({monthly_gb:,.0f} GB a month, {fmt_money(cost, currency)}), where "
            f"{fmt_money(gpu_cost, gpu_currency)} of GPU compute ran"
            + (f" ({where})" if where else "") + f"; the data lives in {flow.source}",
            evidence={"source": flow.source, "destination": flow.destination,
                      "gb": str(flow.gb.quantize(Decimal("0.001"))), "gb_per_month": str(round(monthly_gb, 1)),
                      "destination_gpu_cost": str(money(gpu_cost)),
                      "destination_gpu_hours": str(round(flow.destination_gpu_hours, 1)),
                      "destination_gpu_resources": flow.destination_gpu_resources,
                      "source_gpu_cost": str(money(flow.source_gpu_cost.get(gpu_currency, Decimal(0)))),
                      "top_resources": flow.top_resources},
            cost=cost, monthly_savings=ctx.monthly(cost) if cost else None, currency=currency)

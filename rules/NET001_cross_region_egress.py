from __future__ import annotations

from decimal import Decimal

from auditor.model import Severity, TransferFlow, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class CrossRegionEgress(Rule):
    """Data copied between regions beyond the policy's monthly limit.

    ## What it does
    Sums outbound inter-region transfer in the audit window by provider, account, source and
    destination region, scales it to a 730-hour month, and flags a flow above `max_gb_per_month`.
    The saving is the flow's cost as a monthly run rate: what stops when the data is read where
    it lives, or copied once rather than on every run.

    ## Why it matters
    Data moved between regions costs $0.02 to $0.12 per GB, every time. A training job that
    streams its dataset from another region pays for the dataset again on every epoch.

    ## Example
    ```yaml
    - {id: "aws:111122223333:inter_region:us-east-1->us-west-2", provider: aws, kind: inter_region,
       source: us-east-1, destination: us-west-2, gb: 12000, cost: {USD: "240.00"}}
    ```

    ## How to fix
    Train in the region that holds the data, or replicate the dataset once to the training
    region (S3 Replication, a regional bucket) and read it there.
    """

    id = "NET001"
    name = "cross-region-egress"
    severity = Severity.MEDIUM
    entity = TransferFlow
    clause = "egress"
    options = {
        "max_gb_per_month": Field("number", default=1000, minimum=0,
                                  doc="inter-region GB a month allowed per source and destination"),
    }

    def check(self, flow: TransferFlow, ctx):
        if flow.kind != "inter_region":
            return
        monthly_gb = ctx.monthly(flow.gb)
        limit = Decimal(str(self.opt("max_gb_per_month")))
        if monthly_gb <= limit:
            return
        billed = primary(flow.cost)
        currency, cost = billed if billed else ("USD", Decimal(0))
        dest = flow.destination or "another region"
        yield self.finding(
            flow, ctx,
            f"{flow.gb:,.0f} GB copied from {flow.source or '?'} to {dest} in {ctx.window.label} "
            f"({monthly_gb:,.1f} GB a month, limit {limit:,g}); {fmt_money(cost, currency)} billed",
            evidence={"gb": str(flow.gb.quantize(Decimal('0.001'))), "gb_per_month": str(round(monthly_gb, 1)),
                      "limit_gb_per_month": str(limit), "source": flow.source, "destination": flow.destination,
                      "lines": flow.lines, "top_resources": flow.top_resources},
            cost=cost, monthly_savings=ctx.monthly(cost), currency=currency)

from __future__ import annotations

import fnmatch
from decimal import Decimal

from auditor.model import Severity, StorageGrowth, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field


@register
class CheckpointStorageGrowth(Rule):
    """Checkpoint or artifact storage that grows month over month with no lifecycle rule.

    ## What it does
    Reads the billing's storage lines by resource and month (average GB stored: the GB-months
    billed, over the part of the month they cover). A bucket, volume or storage account is a
    checkpoint store when a job writes its checkpoints there, or when its name matches one of
    `name_patterns`. Flags one billed in at least `min_months` months of the window, each month's
    average GB above the month before's (3 months: July < August < September), growing on average
    `min_growth_pct_per_month` or more a month ((last month's GB / the first's - 1) / (months - 1),
    not compounded: 1,000 to 1,100 GB over three months is 5.0 %), while all of it stayed in its
    first storage class (no infrequent-access, archive or tiering lines: no lifecycle rule moves or
    expires anything), once its last month costs `min_monthly_cost`. The saving estimate is what the
    growth in the window costs each month now: (last month's GB - first month's GB) x the price
    per GB-month billed.

    ## Why it matters
    Every run leaves its checkpoints behind. Kept in the hot tier forever, they grow the bill
    every month for files nobody will load again.

    ## Example
    ```yaml
    - {id: nlp-training-checkpoints, provider: aws, service: Amazon Simple Storage Service,
       months: [[2026-07, 10860, "249.78"], [2026-08, 14580, "335.34"], [2026-09, 18240, "419.52"]],
       storage_classes: [TimedStorage-ByteHrs]}
    ```

    ## How to fix
    Add a lifecycle rule: keep the last few checkpoints of each run, move older ones to an
    infrequent-access or archive class after N days, and expire them after the model ships
    (S3 lifecycle configuration, GCS Object Lifecycle Management, Azure Blob lifecycle management).
    """

    id = "STO001"
    name = "checkpoint-storage-growth"
    severity = Severity.LOW
    entity = StorageGrowth
    clause = "checkpoint_storage"
    options = {
        "name_patterns": Field("list", item=Field("str"), default=["*checkpoint*", "*ckpt*", "*artifact*"],
                               doc="globs (case-insensitive) on the resource id that mark a checkpoint store"),
        "min_months": Field("int", default=3, minimum=2, doc="months of growth needed to judge"),
        "min_growth_pct_per_month": Field("number", default=5, minimum=0,
                                          doc="average growth a month, percent, that counts"),
        "min_monthly_cost": Field("money", default=20, minimum=0,
                                  doc="last month's storage cost below which a store is not flagged"),
    }

    def check(self, s: StorageGrowth, ctx):
        named = any(fnmatch.fnmatchcase(s.id.lower(), p.lower()) for p in self.opt("name_patterns"))
        if not (named or s.checkpoint_jobs) or s.tiered:
            return
        months = sorted(s.months)
        if len(months) < self.opt("min_months"):
            return
        gbs = [gb for _, gb, _ in months]
        if gbs[0] <= 0 or any(b <= a for a, b in zip(gbs, gbs[1:], strict=False)):
            return  # not growing every month
        growth = ((gbs[-1] / gbs[0]) - 1) / (len(gbs) - 1) * 100
        if growth < Decimal(str(self.opt("min_growth_pct_per_month"))):
            return
        last_label, last_gb, last_cost = months[-1]
        if self.short_of(last_cost, s.currency, "min_monthly_cost", ctx):
            return
        per_gb = last_cost / last_gb
        saving = (last_gb - gbs[0]) * per_gb
        why = f"checkpoints of {len(s.checkpoint_jobs)} job(s)" if s.checkpoint_jobs else "a checkpoint store by name"
        yield self.finding(
            s, ctx,
            f"{s.id} ({why}) grew from {gbs[0]:,.0f} GB in {months[0][0]} to {last_gb:,.0f} GB in {last_label} "
            f"({growth:.1f}% a month) with no lifecycle rule in sight; {fmt_money(last_cost, s.currency)} in "
            f"{last_label}, the growth alone {fmt_money(saving, s.currency)} a month",
            evidence={"months": [[m, str(round(gb, 1)), str(money(c))] for m, gb, c in months],
                      "growth_pct_per_month": str(round(growth, 1)), "storage_classes": s.storage_classes,
                      "checkpoint_jobs": s.checkpoint_jobs, "price_per_gb_month": str(round(per_gb, 6)),
                      "savings_basis": "(last month's GB - first month's GB) x the billed price per GB-month"},
            cost=sum((c for _, _, c in months), Decimal(0)), monthly_savings=saving, currency=s.currency,
            wasted=sum(((gb - gbs[0]) * per_gb for _, gb, _ in months), Decimal(0)))

"""What still runs at the end of the audit window: the one definition every saving goes by.

A finding's saving is a monthly run rate going forward, so it exists only for what still bills: a resource is
still running when its billing has a line in the last day of the window (the 24 hours before the end of its
provider's last billing line in the window: a quarter still in progress ends where its billing does), or when
the inventory saw it running. A machine terminated mid-quarter saves nothing more; what it wasted in the window
stays shown as waste (`Finding.wasted`). The same question, asked the same way, for every kind of resource:

- a machine, a node, a bucket or volume, a reservation, a commitment: its own resource id (or an ARN or path
  that ends with it) in the billing (a commitment's lines name it in CommitmentDiscountId), or a running state
  in the inventory (a Kubernetes node `ready`); a parked machine (GPU005) also the disks billed under its name;
- a Kubernetes slice (a pod's GPUs), an interactive pod (OFF001) too: the node it runs on (nodes priced from
  the catalog have no billing: the inventory decides);
- a job: the job's own billing lines (a SageMaker ARN), or a state the inventory calls running;
- a data flow (egress, training far from its data): the data transfer lines of the resources its transfer was
  billed to (a bucket that still stores but no longer sends has stopped sending).

A family's commitment baseline (COM004) needs spend on every day of the window, the last one included, so it
is still running by construction: it is not asked. Rules judge entities; this module judges, once, after the
rules, the findings that carry a saving (core.run_audit), so the gate (no billing) is never asked.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from auditor.model import (
    Finding,
    GpuCapacity,
    GpuSlice,
    InteractiveGpu,
    RemoteDataFlow,
    SteadyGpuSpend,
    TransferFlow,
    fmt_money,
)
from auditor.sql import last_segment
from auditor.window import Window

LAST_DAY = timedelta(days=1)
POD = "kubernetes-pod"  # an interactive GPU that is a pod (tables/interactive.py): its node is asked
TRANSFER = "transfer:"  # a billing id asked of its data transfer lines only (a flow's resources)
# what `rules explain` says of every rule's saving
DEFINITION = ("A saving is a monthly run rate (730 hours) from the end of the window on, and only for what still "
              "runs then: a resource billed in the last day of the window (the 24 hours before its provider's "
              "last billing line in the window), or seen running in the inventory. A machine, reservation, "
              "commitment, slice or job that stopped billing before saves nothing; what it wasted in the window "
              "is shown as wasted. The same definition holds for every rule. One action per resource: where "
              "several findings are on one resource, its largest saving is counted once; only savings of high "
              "confidence count in the headline, the others are shown as \"to check\".")
RUNNING_STATES = {"running", "inprogress", "in_progress", "pending", "starting", "ready", "active", "provisioning",
                  "queued", "training"}


def billing_ids(entity: Any) -> tuple[str, ...]:
    """The resource ids whose billing lines say whether the entity still runs (see the module's list)."""
    if isinstance(entity, SteadyGpuSpend):
        return ()
    if isinstance(entity, GpuSlice) or (isinstance(entity, InteractiveGpu) and entity.platform == POD):
        return (entity.node,) if entity.node else ()
    if isinstance(entity, TransferFlow | RemoteDataFlow):  # their transfer lines, not the bucket's storage
        return tuple(TRANSFER + r for r in entity.top_resources)
    if isinstance(entity, GpuCapacity):  # a parked machine still bills for the disks named after it
        return (entity.id, *entity.storage_resources)
    return (entity.id,) if getattr(entity, "id", None) else ()


def _state(text: str) -> str:
    return text.strip().lower().replace(" ", "_").replace("-", "_")


def seen_running(con: Any, ids: set[str]) -> set[str]:
    """The ids (lower case) the inventory saw running at its end: a machine or node in a running state (a
    Kubernetes node `ready`), a job in a running state that has not ended."""
    if not ids:
        return set()
    states = con.execute("SELECT lower(id), state FROM assets WHERE state IS NOT NULL UNION ALL "
                         "SELECT lower(id), state FROM jobs WHERE state IS NOT NULL AND end_time IS NULL").fetchall()
    return {i for i, state in states if i in ids and _state(state) in RUNNING_STATES}


def billed_last_day(con: Any, window: Window, ids: set[str]) -> set[str]:
    """The ids (lower case) with a billing line in the last day of the window: a line (matched by the billing's
    resource id, or the last segment of an ARN or path) that ends after the 24 hours before the end of the last
    line of its provider in the window. An id written `transfer:<id>` asks of its data transfer lines only."""
    out: set[str] = set()
    if not ids:
        return out
    providers = dict(con.execute(f"SELECT x_Provider, max(ChargePeriodEnd) FROM costs WHERE {window.where()} "
                                 "GROUP BY 1").fetchall())
    transfer = {i[len(TRANSFER):] for i in ids if i.startswith(TRANSFER)}
    for asked, only, prefix in ((ids - {TRANSFER + i for i in transfer}, "", ""),
                                (transfer, " AND x_CostCategory = 'transfer'", TRANSFER)):
        if not asked:
            continue
        # a commitment's lines (a reservation's fee, the usage it covered) name it in CommitmentDiscountId, whatever
        # their ResourceId
        commitments = "" if only else (f" UNION ALL SELECT lower(CommitmentDiscountId), x_Provider, ChargePeriodEnd "
                                       f"FROM costs WHERE {window.where()} AND CommitmentDiscountId IS NOT NULL")
        con.execute("CREATE OR REPLACE TEMP TABLE running_ids AS SELECT unnest(?::VARCHAR[]) AS id", [sorted(asked)])
        rows = con.execute(f"""
            WITH l AS (SELECT lower(ResourceId) AS rid, x_Provider, ChargePeriodEnd FROM costs
                       WHERE {window.where()} AND ResourceId IS NOT NULL{only}{commitments}),
                 b AS (SELECT rid, {last_segment("rid")} AS tail, x_Provider AS provider,
                              max(ChargePeriodEnd) AS last FROM l GROUP BY ALL)
            SELECT id, provider, max(last) FROM (  -- two joins on equality: a join on either is a nested loop
                SELECT k.id, b.provider, b.last FROM running_ids k JOIN b ON b.rid = k.id
                UNION ALL SELECT k.id, b.provider, b.last FROM running_ids k JOIN b ON b.tail = k.id)
            GROUP BY ALL""").fetchall()
        con.execute("DROP TABLE running_ids")
        for rid, provider, last in rows:
            end = min(providers.get(provider) or window.end, window.end)
            if last is not None and last > end - LAST_DAY:
                out.add(prefix + rid)
    return out


def judge(findings: list[Finding], con: Any, window: Window) -> None:
    """Each finding with a saving: still running (its saving stands), or not (no saving going forward; what it
    wasted in the window stays). Sets `still_running` and, where it stopped, says so in the evidence. A finding
    with no resource to ask of (COM004's family baseline) is not judged: `still_running` stays None."""
    asked = [f for f in findings if (f.monthly_savings is not None or f.wasted is not None) and f.billing_ids]
    ids = {i.lower() for f in asked for i in f.billing_ids}
    running = billed_last_day(con, window, ids) | seen_running(con, ids)
    for f in asked:
        f.still_running = any(i.lower() in running for i in f.billing_ids)
        if not f.still_running and f.monthly_savings is not None:
            f.evidence = {**f.evidence, "still_running": False,
                          "saving_if_still_running": str(f.monthly_savings)}
            f.monthly_savings = None
            f.message += ("; it stopped billing before the window's last day: nothing left to save, "
                          f"{fmt_money(f.wasted, f.currency)} wasted" if f.wasted is not None else
                          "; it stopped billing before the window's last day: nothing left to save")


def wasted_of(cost: Decimal | None, monthly: Decimal | None, wasted: Decimal | None) -> Decimal | None:
    """A finding's waste in the window: as the rule states it, else (a rule whose saving is the resource's whole
    run rate: idle, forgotten, unused, egress) its cost in the window."""
    if wasted is not None:
        return wasted
    return cost if monthly is not None else None

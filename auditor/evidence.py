"""Evidence before accusation: who owns a machine and whether anything runs on it, read from every source the
audit has, and how sure a finding that calls it forgotten can be.

A machine is forgotten only when none of the sources shows an owner or a job: an owner, team or project tag (a
project no team lists included) known anywhere is an owner, a job seen anywhere is a job, and measured utilisation
at or above the rule's threshold is use. The sources, in the order a finding lists them:

- `billing`: the tags of every one of its billing lines (not only the latest), its job tags, and the pods or
  tasks the provider split its cost to;
- `inventory`: its tags in the inventory (a Kubernetes node's labels);
- `jobs`: the jobs of the inventory or the manifests on its provider, account, region and instance type;
- `utilisation`: its GPU metrics.

Confidence says how much of that was seen: `high` when its utilisation was measured (and shows it unused) and
its tags were read in the inventory as well as in the billing; `medium` when its activity was not measured but
the rest was read, or the bill alone shows it billed around the clock at a flat rate (left running); `low` from
the bill alone otherwise. Only a `high` finding is a fact about the machine; the others are for someone to check.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from auditor.context import Context

LEVELS = ("low", "medium", "high")
# A machine's inventory state, by the words the clouds use: stopped (stopped, stopping, deallocated, suspended,
# hibernated) is GPU007's to judge, gone (terminated, shutting down: AWS's way to terminated, deleted) nobody's;
# anything else runs. GCP calls a stopped instance TERMINATED: its disks stay and bill (a deleted one is no
# longer listed), so there it is stopped.
STOPPED = ("stop", "dealloc", "suspend", "hibernat")
GONE = ("terminat", "shutting", "delet")


def machine_state(state: str | None, provider: str | None = None) -> str:
    """`stopped`, `gone` or `running`: what a machine's inventory state says (no state: running)."""
    s = (state or "running").lower()
    if provider == "gcp" and s == "terminated":
        return "stopped"
    return "gone" if any(w in s for w in GONE) else "stopped" if any(w in s for w in STOPPED) else "running"

SOURCES = ("billing", "inventory", "jobs", "utilisation")
# How a finding's confidence is judged, as the report says it beside the findings that state one.
HOW_JUDGED = ("A machine is called forgotten only when none of the sources read (its billing lines' tags, its "
              "inventory tags or node labels, jobs, the provider's cost split, its utilisation) shows an owner or a "
              "job. Confidence: high when its utilisation was measured and shows it unused; medium when it is in the "
              "inventory without metrics, or the bill alone shows it billed around the clock at one rate; low from "
              "the bill alone otherwise. Each such finding lists the sources it checked and those it lacked.")


@dataclass
class Stewardship:
    """What the sources say of one machine: its owner and job (and where each was seen), its use, and which
    sources were read or missing."""

    owner: str | None = None  # `owner=ana@example.com`, `team=nlp`
    owner_source: str | None = None
    job: str | None = None  # `3 jobs of the inventory or manifests on its instance type`, `job tag job=bert-ft`
    job_source: str | None = None
    busy: str | None = None  # `55.0% mean GPU utilisation`: at or above the threshold, in use
    checked: list[str] = field(default_factory=list)
    lacked: dict[str, str] = field(default_factory=dict)  # source -> why it was not read
    measured_idle: bool = False  # its utilisation was measured and is under the threshold

    @property
    def forgotten(self) -> bool:
        return self.owner is None and self.job is None and self.busy is None

    def confidence(self, left_running: bool = False) -> str:
        """How sure an accusation drawn from this evidence is (the module's docstring says how it is judged)."""
        if self.measured_idle and "inventory" in self.checked:
            return "high"
        if "inventory" in self.checked or left_running:
            return "medium"
        return "low"

    def as_evidence(self, confidence: str) -> dict[str, Any]:
        """The keys every accusing finding carries in its evidence."""
        return {"confidence": confidence, "sources_checked": list(self.checked),
                "sources_lacked": [f"{s} ({why})" for s, why in self.lacked.items()],
                "bill_alone": self.checked == ["billing"],
                "owner_seen": self.owner, "owner_source": self.owner_source,
                "job_seen": self.job, "job_source": self.job_source}


def stewardship(ctx: Context, *, billing_tags: dict[str, str] | None, inventory_tags: dict[str, str] | None,
                kind: str | None, jobs_seen: int | None, jobs_read: bool, split_resources: list[str],
                mean_util_pct: float | None, busy_pct: float, job_tags: Sequence[str] = ()) -> Stewardship:
    """The evidence of every source for one machine. `billing_tags` None: it has no billing line; `inventory_tags`
    None: it is not in an inventory (or none was read); `mean_util_pct` None: its GPUs report no utilisation."""
    s = Stewardship()
    labels = "node labels" if kind in ("node", "cluster") else "inventory tags"
    for source, tags in (("inventory", inventory_tags), ("billing", billing_tags)):
        if tags is None:
            continue
        team, owner = ctx.attribute(tags)
        project = ctx.tag(tags, ctx.policy.project_tags)  # a project no team lists still names someone's work
        if s.owner is None and (owner or team or project):
            s.owner = f"owner {owner}" if owner else f"team {team}" if team else f"project {project}"
            s.owner_source = labels if source == "inventory" else "billing tags"
    if billing_tags is not None:
        s.checked.append("billing")
        keys = [k.strip().lower() for k in (*ctx.policy.job_tags, *job_tags)]
        tagged = next(((k, v) for k, v in sorted(billing_tags.items()) if k.strip().lower() in keys and v), None)
        if tagged:
            s.job, s.job_source = f"job tag {tagged[0]}={tagged[1]}", "billing tags"
        elif split_resources:
            s.job, s.job_source = (f"{len(split_resources)} pods or tasks its cost was split to "
                                   f"({', '.join(split_resources[:3])})", "billing cost split")
    else:
        s.lacked["billing"] = "no billing line"
    if inventory_tags is not None:
        s.checked.append("inventory")
    else:
        s.lacked["inventory"] = "not in an inventory read"
    if jobs_read:
        s.checked.append("jobs")
        if s.job is None and jobs_seen:
            s.job, s.job_source = f"{jobs_seen} jobs on its instance type, account and region", "jobs"
    else:
        s.lacked["jobs"] = "no inventory or manifests with jobs read"
    if mean_util_pct is not None:
        s.checked.append("utilisation")
        if mean_util_pct >= busy_pct:
            s.busy = f"{mean_util_pct:.1f}% mean GPU utilisation"
        else:
            s.measured_idle = True
    else:
        s.lacked["utilisation"] = "no GPU metrics" if inventory_tags is not None else "not in an inventory read"
    return s


def billing_tags(tags: dict[str, str], seen: dict[str, list[str]]) -> dict[str, str]:
    """Every tag key of a machine's billing lines, with its latest line's value where that line has it (else the
    first value seen): an owner tag on any line is an owner."""
    return {**{k: v[0] for k, v in seen.items() if v}, **{k: v for k, v in tags.items() if v}}

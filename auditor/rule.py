"""The rule interface: what every rule of the pack is (the registry of the pack is registry.py).

A rule is one module in `rules/`, named by its ID. It declares the entity it reads, the policy clause
that sets its options, and a docstring with fixed sections that is its documentation. It yields
findings and does no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from auditor import running
from auditor.model import Finding, Severity, money
from auditor.registry import doc_sections
from auditor.schema import Field

if TYPE_CHECKING:
    from auditor.context import Context


class Untagged(NamedTuple):
    """A rule's candidates among resources (Rule.candidates): those whose lines lacking any of `keys` (a tag set
    without the key, or with an empty value) cost `min_cost` or more in the policy's currency, or anything in
    another (converted, or not, by the rule itself)."""

    keys: tuple[str, ...]
    min_cost: Decimal


class BilledDays(NamedTuple):
    """A rule's candidates among the GPU machines the bill shows (Rule.candidates): those billed on `min_days`
    days or more, and on `min_pct` percent or more of the days their provider billed anything in the window."""

    min_days: Decimal
    min_pct: Decimal


Candidates = Untagged | BilledDays  # what Rule.candidates states, one kind per entity type


class Rule:
    id: ClassVar[str]
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    severity: Severity = Severity.MEDIUM  # a policy clause may set an instance's own
    entity: ClassVar[type]
    clause: ClassVar[str]
    options: ClassVar[dict[str, Field]] = {}
    # its findings say to stop or shrink a machine: the audit leaves those machines out of the baseline that
    # commitments are sized on (SteadyGpuSpend, COM004), so that it never advises committing to them
    frees_capacity: ClassVar[bool] = False

    def __init__(self, options: dict[str, Any] | None = None, severity: Severity | None = None):
        self.opts = {k: f.default for k, f in self.options.items()}
        self.opts.update(options or {})
        if severity is not None:
            self.severity = severity

    def opt(self, key: str) -> Any:
        return self.opts[key]

    def candidates(self) -> Candidates | None:
        """What an entity must hold for this rule to flag it, in terms its builder selects by in SQL
        (tables/entities.py NARROWS), so that the rule runs over those entities only; None: every entity. The
        terms are a necessary condition, never a sufficient one: `check` still decides."""
        return None

    def short_of(self, amount: Decimal, currency: str, option: str, ctx: Context) -> bool:
        """Whether an amount falls short of a money threshold of the policy, which is in the policy's currency.
        An amount in another currency is converted only at a rate the user gave; without one it is never held to
        the threshold as if it were the policy's money (the audit lists such amounts apart)."""
        value = ctx.policy.convert(amount, currency)
        return value is None or value < Decimal(str(self.opt(option)))

    def check(self, entity: Any, ctx: Context) -> Iterable[Finding]:
        raise NotImplementedError(f"{type(self).__name__} must define check()")

    def fold(self, findings: list[Finding], ctx: Context) -> list[Finding]:
        """The rule's findings over all its entities, once every entity is checked: a rule whose entities overlap
        (ANOM001's series of one spend by team, account and family) folds what they saw twice into one."""
        return findings

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def doc(cls) -> dict[str, str]:
        return doc_sections(cls.__doc__ or "")

    @classmethod
    def remediation(cls, platform: str | None = None) -> str:
        """The rule's `## How to fix`; for an entity of one platform (a job's `platform`), only that platform's
        lines (see `_remedy`)."""
        return _remedy(cls.__doc__ or "", PLATFORM_NAMES.get(platform, platform) if platform else None)

    def finding(self, entity: Any, ctx: Context, message: str, *, evidence: dict[str, Any],
                cost: Decimal | None = None, monthly_savings: Decimal | None = None,
                currency: str = "USD", key: str = "", resource: str | None = None,
                wasted: Decimal | None = None) -> Finding:
        """`monthly_savings`: the run rate saved were it acted on (running.judge keeps it only for what still
        runs); `wasted`: what the window spent on the waste, by default the whole `cost` of a finding with a
        saving (its saving is the resource's whole run rate). A finding's confidence is its evidence's, else
        high."""
        tags = getattr(entity, "tags", {}) or {}
        team, owner = ctx.attribute(tags)
        # A finding's money is rounded once, here, to the cent every view shows: totals are sums of what is shown.
        return Finding(
            rule=self.id, name=self.name, severity=self.severity, resource=resource or entity.id,
            message=message, entity_type=type(entity).__name__, provider=getattr(entity, "provider", None),
            account=getattr(entity, "account", None), region=getattr(entity, "region", None),
            owner=owner, team=team, evidence=evidence, cost=money(cost), monthly_savings=money(monthly_savings),
            currency=currency, remediation=self.remediation(getattr(entity, "platform", None)), clause=self.clause,
            file=getattr(entity, "source_file", None), line=getattr(entity, "source_line", None), key=key,
            wasted=money(running.wasted_of(cost, monthly_savings, wasted)),
            confidence=evidence.get("confidence") or "high", billing_ids=running.billing_ids(entity))


# A job's platform as a `## How to fix` line names it: every platform run on Kubernetes is Kubernetes.
PLATFORM_NAMES = {"sagemaker": "SageMaker", "vertex": "Vertex AI", "azureml": "Azure ML", "skypilot": "SkyPilot",
                  **dict.fromkeys(("kubernetes", "kubeflow", "volcano", "kuberay", "argo", "tekton", "kserve"),
                                 "Kubernetes")}


@functools.cache
def _remedy(doc: str, platform: str | None = None) -> str:
    """A rule's `## How to fix`, on one line: parsed once per rule and platform, not once per finding. A line
    `- SageMaker: ...` is that platform's own advice: a finding on a platform's job gets the general text and its
    own platform's line, a finding on anything else (a machine, a bill) every line."""
    general: list[str] = []
    lines: dict[str, list[str]] = {}  # platform: its line, with the lines that continue it
    into = general
    for line in doc_sections(doc).get("How to fix", "").splitlines():
        name, sep, rest = line.strip().removeprefix("- ").partition(": ")
        if line.lstrip().startswith("- ") and sep and name in PLATFORM_NAMES.values():
            into = lines.setdefault(name, [rest])
        elif into is not general and line.startswith(" "):
            into.append(line)
        else:
            into = general
            general.append(line)
    text = " ".join(" ".join(general).split())
    own = {n: " ".join(" ".join(ls).split()) for n, ls in lines.items() if platform is None or n == platform}
    if platform in own:
        text += " " + own[platform][:1].upper() + own[platform][1:]
    elif own and platform is None:
        text += " " + " ".join(f"{n}: {t}" for n, t in own.items())
    return text

"""The rule interface: what every rule of the pack is (the registry of the pack is registry.py).

A rule is one module in `rules/`, named by its ID. It declares the entity it reads, the policy clause
that sets its options, and a docstring with fixed sections that is its documentation. It yields
findings and does no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from auditor.model import Finding, Severity, money
from auditor.registry import doc_sections
from auditor.schema import Field

if TYPE_CHECKING:
    from auditor.context import Context


class Rule:
    id: ClassVar[str]
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    severity: Severity = Severity.MEDIUM  # a policy clause may set an instance's own
    entity: ClassVar[type]
    clause: ClassVar[str]
    options: ClassVar[dict[str, Field]] = {}

    def __init__(self, options: dict[str, Any] | None = None, severity: Severity | None = None):
        self.opts = {k: f.default for k, f in self.options.items()}
        self.opts.update(options or {})
        if severity is not None:
            self.severity = severity

    def opt(self, key: str) -> Any:
        return self.opts[key]

    def short_of(self, amount: Decimal, currency: str, option: str, ctx: Context) -> bool:
        """Whether an amount falls short of a money threshold of the policy, which is in the policy's currency.
        An amount in another currency is converted only at a rate the user gave; without one it is never held to
        the threshold as if it were the policy's money (the audit lists such amounts apart)."""
        value = ctx.policy.convert(amount, currency)
        return value is None or value < Decimal(str(self.opt(option)))

    def check(self, entity: Any, ctx: Context) -> Iterable[Finding]:
        raise NotImplementedError(f"{type(self).__name__} must define check()")

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def doc(cls) -> dict[str, str]:
        return doc_sections(cls.__doc__ or "")

    @classmethod
    def remediation(cls) -> str:
        return _remedy(cls.__doc__ or "")

    def finding(self, entity: Any, ctx: Context, message: str, *, evidence: dict[str, Any],
                cost: Decimal | None = None, monthly_savings: Decimal | None = None,
                currency: str = "USD", key: str = "", resource: str | None = None) -> Finding:
        tags = getattr(entity, "tags", {}) or {}
        team, owner = ctx.attribute(tags)
        # A finding's money is rounded once, here, to the cent every view shows: totals are sums of what is shown.
        return Finding(
            rule=self.id, name=self.name, severity=self.severity, resource=resource or entity.id,
            message=message, entity_type=type(entity).__name__, provider=getattr(entity, "provider", None),
            account=getattr(entity, "account", None), region=getattr(entity, "region", None),
            owner=owner, team=team, evidence=evidence, cost=money(cost), monthly_savings=money(monthly_savings),
            currency=currency, remediation=self.remediation(), clause=self.clause,
            file=getattr(entity, "source_file", None), line=getattr(entity, "source_line", None), key=key)


@functools.cache
def _remedy(doc: str) -> str:
    """A rule's `## How to fix`, on one line: parsed once per rule, not once per finding."""
    return " ".join(doc_sections(doc).get("How to fix", "").split())

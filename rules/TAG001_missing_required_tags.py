from __future__ import annotations

from decimal import Decimal

from auditor.model import ResourceSpend, Severity, fmt_money, money
from auditor.registry import register
from auditor.rule import Rule, Untagged
from auditor.schema import Field


@register
class MissingRequiredTags(Rule):
    """Spend on resources that lack the policy's required cost-allocation tags.

    ## What it does
    Sums, per resource, the usage cost in the audit window of billing lines that lack any of
    `required_tags` (a key that is absent or has an empty value; keys match ignoring case), and
    flags the resource when that untagged cost reaches `min_cost`. Lines without a resource id
    are grouped by account, service and region.

    ## Why it matters
    Untagged spend has no owner: no team sees it in its bill, and nobody is asked to cut it.

    ## Example
    ```yaml
    - {id: i-0untagged, provider: aws, tag_sets: [[{team: vision}, USD, "812.40"]]}
    ```

    ## How to fix
    Add the missing tags to the resource (and to the template or launch configuration that
    creates it), and activate them as cost-allocation tags in the billing console.
    """

    id = "TAG001"
    name = "missing-required-tags"
    severity = Severity.MEDIUM
    entity = ResourceSpend
    clause = "tagging"
    options = {
        "required_tags": Field("list", item=Field("tag"), default=["team", "owner", "project"],
                               doc="tag keys every resource must carry"),
        "min_cost": Field("money", default=1, minimum=0, doc="smallest untagged cost worth a finding"),
    }

    def candidates(self) -> Untagged:
        return Untagged(tuple(self.opt("required_tags")), Decimal(str(self.opt("min_cost"))))

    def check(self, spend: ResourceSpend, ctx):
        required = self.opt("required_tags")
        untagged: dict[str, Decimal] = {}
        missing: dict[str, set[str]] = {}  # per currency: each currency's finding names its own lines' gaps
        for tags, currency, cost in spend.tag_sets:
            absent = [k for k in required if ctx.tag(tags, [k]) is None]
            if absent:
                missing.setdefault(currency, set()).update(absent)
                untagged[currency] = untagged.get(currency, Decimal(0)) + cost
        for currency, cost in sorted(untagged.items()):
            if self.short_of(cost, currency, "min_cost", ctx):
                continue
            what = spend.id if spend.has_resource_id else \
                f"{spend.service or 'spend'} in {spend.account or '?'}/{spend.region or 'global'} (no resource id)"
            keys = [k for k in required if k in missing[currency]]
            yield self.finding(
                spend, ctx, f"{what}: {fmt_money(cost, currency)} of {spend.category or 'usage'} spend lacks tags "
                f"{', '.join(keys)}",
                evidence={"missing_tags": keys, "untagged_cost": str(money(cost)),
                          "total_cost": str(money(spend.cost.get(currency, cost))), "lines": spend.lines,
                          "service": spend.service, "category": spend.category,
                          "instance_type": spend.instance_type},
                cost=cost, currency=currency, key=currency)

"""What a rule may consult besides its entity: the catalog, the policy and the audit window."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from auditor.model import HOURS_PER_MONTH
from auditor.policy import Policy
from auditor.providers.catalog import Catalog
from auditor.window import Window


@dataclass
class Context:
    catalog: Catalog
    policy: Policy
    window: Window
    # A tag set's keys folded (tag), once per tag set, and what was asked of it (lacks, attribute): rules ask of
    # every resource's tag sets, several keys each, and a tag set's dict is made once (Store.tags). Keyed by the
    # dict's id, which the entry keeps alive (so no other dict can take its id).
    _folded: dict[int, tuple[dict[str, str], dict[str, str], dict[Any, Any]]] = field(
        default_factory=dict, init=False, repr=False)  # not carried by dataclasses.replace to another policy

    def _seen(self, tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str], dict[Any, Any]]:
        seen = self._folded.get(id(tags))
        if seen is None or seen[0] is not tags:
            seen = self._folded[id(tags)] = (tags, {k.strip().lower(): v for k, v in tags.items()
                                                    if v is not None and str(v).strip()}, {})
        return seen

    def tag(self, tags: dict[str, str], keys: Iterable[str]) -> str | None:
        """A tag's value by any of the given keys, ignoring case and stray spaces in the key."""
        norm = self._seen(tags)[1]
        for k in keys:
            k = k.strip().lower()
            if k in norm:
                return norm[k]
        return None

    def lacks(self, tags: dict[str, str], keys: tuple[str, ...]) -> list[str]:
        """The keys of `keys` by which `tag` finds no value in `tags`, in their order; asked once per tag set."""
        _, norm, asked = self._seen(tags)
        lacking = asked.get(keys)
        if lacking is None:
            lacking = asked[keys] = [k for k in keys if k.strip().lower() not in norm]
        return lacking

    def attribute(self, tags: dict[str, str]) -> tuple[str | None, str | None]:
        """(team, owner) from cost-allocation tags; a project tag maps to its team through the policy. Once per
        tag set: the policy's keys do not change."""
        asked = self._seen(tags)[2]
        if "attribute" not in asked:
            team = self.tag(tags, self.policy.team_tags)
            if team is None:
                project = self.tag(tags, self.policy.project_tags)
                team = self.policy.team_of_project(project) if project else None
            asked["attribute"] = team, self.tag(tags, self.policy.owner_tags)
        return asked["attribute"]

    def monthly(self, amount: Decimal, hours: Decimal | float | None = None) -> Decimal:
        """An amount seen over `hours` (the whole window by default), scaled to a 730-hour month."""
        span = Decimal(str(hours)) if hours else self.window.hours
        return amount * HOURS_PER_MONTH / span if span else Decimal(0)

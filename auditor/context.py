"""What a rule may consult besides its entity: the catalog, the policy and the audit window."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from auditor.model import HOURS_PER_MONTH
from auditor.policy import Policy
from auditor.providers.catalog import Catalog
from auditor.window import Window


@dataclass
class Context:
    catalog: Catalog
    policy: Policy
    window: Window
    # A tag set's keys folded (tag), once per tag set: rules ask of every resource's tag sets, several keys
    # each. Keyed by the dict's id, which the entry keeps alive (so no other dict can take its id).
    _folded: dict[int, tuple[dict[str, str], dict[str, str]]] = field(default_factory=dict, repr=False)

    def tag(self, tags: dict[str, str], keys: Iterable[str]) -> str | None:
        """A tag's value by any of the given keys, ignoring case and stray spaces in the key."""
        seen = self._folded.get(id(tags))
        if seen is None or seen[0] is not tags:
            seen = self._folded[id(tags)] = (tags, {k.strip().lower(): v for k, v in tags.items()
                                                    if v is not None and str(v).strip()})
        norm = seen[1]
        for k in keys:
            k = k.strip().lower()
            if k in norm:
                return norm[k]
        return None

    def attribute(self, tags: dict[str, str]) -> tuple[str | None, str | None]:
        """(team, owner) from cost-allocation tags; a project tag maps to its team through the policy."""
        team = self.tag(tags, self.policy.team_tags)
        if team is None:
            project = self.tag(tags, self.policy.project_tags)
            team = self.policy.team_of_project(project) if project else None
        return team, self.tag(tags, self.policy.owner_tags)

    def monthly(self, amount: Decimal, hours: Decimal | float | None = None) -> Decimal:
        """An amount seen over `hours` (the whole window by default), scaled to a 730-hour month."""
        span = Decimal(str(hours)) if hours else self.window.hours
        return amount * HOURS_PER_MONTH / span if span else Decimal(0)

"""Each tag set's map (tag_set, Tags): what every query that looks a tag or a team up once per tag set joins,
rather than grouping a MAP per row (tables/sql.py TAG_SET_MAPS, read from the store's `tag_sets` table)."""

from __future__ import annotations

from auditor.tables.sql import TAG_SET_MAPS
from auditor.tables.store import Store


def tag_set_maps(store: Store) -> str:
    """The relation, with the store's tag sets numbered first (new lines read: Store.tag_set_ids)."""
    store.tag_set_ids()
    return TAG_SET_MAPS

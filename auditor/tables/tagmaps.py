"""Each tag set's map (tag_set, Tags) as a table, made once for the store's tag sets: what every query that looks
a tag or a team up once per tag set joins (tables/sql.py TAG_SET_MAPS, made again by each query that names it,
built each set's map each time: 150,000 sets at 1M tag churn lines, half a CPU second a query)."""

from __future__ import annotations

from auditor.tables.sql import TAG_SET_MAPS
from auditor.tables.store import Store

TABLE = "tag_set_maps"
_MADE = ("tag_set_maps",)  # its key in the store's cache: the tag sets it was made from


def tag_set_maps(store: Store) -> str:
    """The table's name; made again when the store's tag sets are (new lines read: Store.tag_set_ids)."""
    sets = store.tag_set_ids()
    made = store.entities.get(_MADE)
    if not made or made[0] is not sets:
        store.con.execute(f"CREATE OR REPLACE TEMP TABLE {TABLE} AS SELECT * FROM {TAG_SET_MAPS}")
        store.entities[_MADE] = [sets]
    return TABLE

"""Tag sets as ids: the load keys each row's tags (costs.x_TagKey, once per distinct tag key), and
Store.tag_set_ids numbers the distinct sets in the sorted order of their entries from those keys. A set is its
entries, in whatever order an export's columns (or another engine) hold them; rows loaded without a key are
keyed from their tags; each set is one row of `tag_sets`. Python holds a set's dict only where asked for it by id
(Store.tags), each made once."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from auditor.policy import parse_policy
from auditor.tables import breakdown
from auditor.tables.sql import TAG_SET_MAPS, spend_team_sql, tag_sql
from auditor.tables.store import Store
from auditor.window import Window

HEAD = ("identity/LineItemId,lineItem/LineItemType,lineItem/UsageStartDate,lineItem/UsageEndDate,"
        "lineItem/ResourceId,lineItem/UsageType,lineItem/UsageAmount,lineItem/CurrencyCode,lineItem/UnblendedCost")


def cur(path: Path, tags: list[str], rows: list[tuple[str, str, list[str]]]) -> Path:
    """A CUR file of one-hour g5 lines on 2026-07-01: (resource, cost, tag values in the order of `tags`)."""
    lines = [HEAD + "".join(f",resourceTags/user:{t}" for t in tags)]
    for i, (rid, cost, values) in enumerate(rows):
        lines.append(f"li-{rid}-{i},Usage,2026-07-01T{i:02}:00:00Z,2026-07-01T{i + 1:02}:00:00Z,{rid},"
                     f"BoxUsage:g5.xlarge,1,USD,{cost}," + ",".join(values))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def loaded(tmp_path: Path) -> Store:
    # The same two sets in two files whose tag columns come in opposite orders, an empty set, and one of one tag.
    a = cur(tmp_path / "a.csv", ["team", "owner"], [("i-1", "1.50", ["ml", "ann"]), ("i-2", "2.25", ["data", ""]),
                                                   ("i-3", "4.00", ["", ""])])
    b = cur(tmp_path / "b.csv", ["owner", "team"], [("i-4", "8.00", ["ann", "ml"]), ("i-5", "16.00", ["", "data"]),
                                                   ("i-6", "32.00", ["bob", ""])])
    store = Store()
    store.load_billing([a, b])
    return store


def test_the_load_keys_every_row_and_a_set_is_its_entries_in_any_order(tmp_path):
    store = loaded(tmp_path)
    try:
        unkeyed = store.value("SELECT count(*) FROM costs WHERE x_TagKey IS NULL")
        keys = dict(store.con.execute("SELECT ResourceId, x_TagKey FROM costs").fetchall())
    finally:
        store.close()
    assert unkeyed == 0
    assert keys["i-1"] == keys["i-4"] and keys["i-2"] == keys["i-5"]
    assert len({keys["i-1"], keys["i-2"], keys["i-3"], keys["i-6"]}) == 4


def test_sets_numbered_in_the_sorted_order_of_their_entries(tmp_path):
    store = loaded(tmp_path)
    try:
        store.tag_set_ids()
        ids = dict(store.con.execute("SELECT ResourceId, x_TagSet FROM costs").fetchall())
        sets = store.tags(ids.values())
        table = store.con.execute("SELECT tag_set, entries FROM tag_sets ORDER BY tag_set").fetchall()
        maps = [list(m.items()) for (m,) in
                store.con.execute(f"SELECT Tags FROM {TAG_SET_MAPS} ORDER BY tag_set").fetchall()]
    finally:
        store.close()
    # Sorted entries: [] < [owner=ann, team=ml] < [owner=bob] < [team=data].
    assert sets == {1: {}, 2: {"owner": "ann", "team": "ml"}, 3: {"owner": "bob"}, 4: {"team": "data"}}
    assert ids == {"i-1": 2, "i-2": 4, "i-3": 1, "i-4": 2, "i-5": 4, "i-6": 3}
    assert [i for i, _ in table] == [1, 2, 3, 4]  # one row a set
    assert table[1][1] == [{"key": "owner", "value": "ann"}, {"key": "team", "value": "ml"}]
    # Each set's map, sorted, whatever the order of the first line's columns (team, owner in a.csv).
    assert maps == [[], [("owner", "ann"), ("team", "ml")], [("owner", "bob")], [("team", "data")]]


def test_rows_loaded_without_a_key_are_keyed_from_their_tags(tmp_path):
    # As Spark's rows or a test's own are: a map of the same entries in another order is the same set.
    store = loaded(tmp_path)
    try:
        store.con.execute("""
            INSERT INTO costs (BilledCost, BillingCurrency, ChargePeriodStart, ResourceId, Tags, x_SourceFile, x_Lines)
            VALUES (64, 'USD', TIMESTAMP '2026-07-02', 'i-7', MAP {'team': 'ml', 'owner': 'ann'}, 'other', 1),
                   (128, 'USD', TIMESTAMP '2026-07-02', 'i-8', MAP {'owner': 'cat'}, 'other', 1),
                   (256, 'USD', TIMESTAMP '2026-07-02', 'i-9', NULL, 'other', 1)""")
        store.tag_set_ids()
        ids = dict(store.con.execute("SELECT ResourceId, x_TagSet FROM costs").fetchall())
        sets = store.tags(ids.values())
    finally:
        store.close()
    assert sets == {1: {}, 2: {"owner": "ann", "team": "ml"}, 3: {"owner": "bob"}, 4: {"owner": "cat"},
                    5: {"team": "data"}}
    assert (ids["i-7"], ids["i-8"], ids["i-9"], ids["i-1"], ids["i-2"]) == (2, 4, 1, 2, 5)


def test_a_set_is_made_only_when_asked_for_and_once(tmp_path):
    store = loaded(tmp_path)
    try:
        store.tag_set_ids()
        made_before = dict(store._tags)
        ml = store.tags([2])
        made = set(store._tags)
        again = store.tags([2, 4, 2])
        made_after = set(store._tags)
    finally:
        store.close()
    assert made_before == {}  # numbering the sets makes no dict
    assert ml == {2: {"owner": "ann", "team": "ml"}} and made == {2}
    assert again == {2: {"owner": "ann", "team": "ml"}, 4: {"team": "data"}} and made_after == {2, 4}
    assert again[2] is ml[2]  # one object per set: a rule folds its keys once (Context.tag)
    # Its entries in their sorted order, whatever the order of the export's columns (team, owner in a.csv).
    assert list(ml[2].items()) == [("owner", "ann"), ("team", "ml")]


def test_an_id_of_no_set_is_refused(tmp_path):
    store = loaded(tmp_path)
    try:
        with pytest.raises(KeyError):
            store.tags([2, 5])
    finally:
        store.close()


def test_new_lines_number_the_sets_again(tmp_path):
    # A set asked for before the second file is read has another id after it: nothing made before is kept.
    a = cur(tmp_path / "a.csv", ["team"], [("i-1", "1.00", ["ml"])])
    b = cur(tmp_path / "b.csv", ["team"], [("i-2", "2.00", ["data"])])
    store = Store()
    try:
        store.load_billing([a])
        first = store.tags([1])
        store.load_billing([b])
        second = store.tags([1, 2])
    finally:
        store.close()
    assert first == {1: {"team": "ml"}}
    assert second == {1: {"team": "data"}, 2: {"team": "ml"}}


def test_spend_by_team_reads_the_tags_by_their_set(tmp_path):
    store = loaded(tmp_path)
    policy = parse_policy(POLICY)
    try:
        window = Window.of(datetime(2026, 7, 1), datetime(2026, 7, 2))
        spend = breakdown.spend_by_team(store, window, spend_team_sql(policy), tag_sql(policy.project_tags))
    finally:
        store.close()
    # ml: 1.50 + 8.00; data: 2.25 + 16.00; no team tag: 4.00 + 32.00.
    assert {k: {c: float(v) for c, v in by.items()} for k, by in spend.items()} == {
        "ml": {"USD": 9.5}, "data": {"USD": 18.25}, "(unattributed)": {"USD": 36.0}}


POLICY = """
policy: tag sets
version: "1"
owner: finops@example.com
currency: USD
attribution:
  team_tags: [team]
teams:
  ml:
    lead: ml@example.com
  data:
    lead: data@example.com
"""

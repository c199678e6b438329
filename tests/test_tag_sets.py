"""Tag sets as ids: the load keys each row's tags (costs.x_TagKey, once per distinct tag key), and
Store.tag_set_ids numbers the distinct sets in the sorted order of their entries from those keys. A set is its
entries, in whatever order an export's columns (or another engine) hold them; rows loaded without a key are
keyed from their tags; each set is one row of `tag_sets`."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

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
        sets = store.tag_set_ids()
        ids = dict(store.con.execute("SELECT ResourceId, x_TagSet FROM costs").fetchall())
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
        sets = store.tag_set_ids()
        ids = dict(store.con.execute("SELECT ResourceId, x_TagSet FROM costs").fetchall())
    finally:
        store.close()
    assert sets == {1: {}, 2: {"owner": "ann", "team": "ml"}, 3: {"owner": "bob"}, 4: {"owner": "cat"},
                    5: {"team": "data"}}
    assert (ids["i-7"], ids["i-8"], ids["i-9"], ids["i-1"], ids["i-2"]) == (2, 4, 1, 2, 5)


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

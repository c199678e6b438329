"""A machine's storage named after it (gpu_machines.named_storage_sql): found by a join on equality of the names a
disk's id can hold, exactly the disks the rule's words name (its last segment is the machine's name, or that name
and '-' or '_' and more), and none of the look-alikes."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.tables.gpu_machines import named_storage_sql

# The words of the rule, compared for every disk and machine (the SQL before the join on equality).
BY_THE_WORDS = """
    SELECT a.id, list({'rid': s.rid, 'cur': s.cur, 'cost': s.cost} ORDER BY s.rid, s.cur) AS d
    FROM assets a JOIN s ON a.name IS NOT NULL AND length(a.name) >= 3
         AND (s.seg = lower(a.name) OR starts_with(s.seg, lower(a.name) || '-')
              OR starts_with(s.seg, lower(a.name) || '_'))
    GROUP BY 1"""


CON = duckdb.connect()


def named(machines: list[tuple[str, str | None]], disks: list[str], sql: str) -> dict[str, list[str]]:
    con = CON
    con.execute("CREATE OR REPLACE TABLE assets (id VARCHAR, name VARCHAR)")
    if machines:
        con.executemany("INSERT INTO assets VALUES (?, ?)", machines)
    con.execute("CREATE OR REPLACE TABLE s AS SELECT rid, 'USD' AS cur, 1.0 AS cost, "
                "regexp_extract(rid, '[^/:]+$') AS seg FROM (SELECT unnest(?::VARCHAR[]) AS rid)", [disks])
    return {i: [x["rid"] for x in d] for i, d in con.execute(sql).fetchall()}


def test_a_machines_disks_and_their_look_alikes():
    machines = [("vm-1", "nlp-a100-train-02"), ("vm-2", "Gpu_Box"), ("vm-3", "ab"), ("vm-4", None),
                ("vm-5", "ümlaut-vm")]
    disks = ["/subscriptions/s/disks/nlp-a100-train-02-data", "/subscriptions/s/disks/nlp-a100-train-02_os",
             "/subscriptions/s/disks/nlp-a100-train-02", "/subscriptions/s/disks/nlp-a100-train-020",
             "/subscriptions/s/disks/nlp-a100-train-0", "projects/p/disks/gpu_box-boot", "projects/p/disks/ab-data",
             "projects/p/disks/xnlp-a100-train-02-data", "projects/p/disks/ümlaut-vm-1", "projects/p/disks/"]
    assert named(machines, disks, named_storage_sql("assets", "s")) == {
        "vm-1": ["/subscriptions/s/disks/nlp-a100-train-02", "/subscriptions/s/disks/nlp-a100-train-02-data",
                 "/subscriptions/s/disks/nlp-a100-train-02_os"],
        "vm-2": ["projects/p/disks/gpu_box-boot"],
        "vm-5": ["projects/p/disks/ümlaut-vm-1"]}


NAME = st.text(alphabet="aA-_/:é", max_size=7)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), NAME), min_size=1, max_size=6), st.lists(NAME, max_size=8))
def test_the_join_on_equality_finds_what_the_words_find(names, disks):
    machines = [(f"vm-{i}", name) for i, name in enumerate(names)]
    assert named(machines, disks, named_storage_sql("assets", "s")) == named(machines, disks, BY_THE_WORDS)

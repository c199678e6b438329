"""The store keeps only the tag keys the audit reads (core.tag_keys_read): a tag no rule reads (a run id that
changes every hour) no longer splits a resource's lines into rows and tag sets, and changes no finding."""

from __future__ import annotations

import csv
import gzip
import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from billing_csv import charge, write
from conftest import REPO

from auditor.core import configured_rules, run_audit, tag_keys_read
from auditor.policy import load_policy, parse_policy
from auditor.tables.store import Store
from auditor.window import parse_quarter

DEMO = REPO / "fixtures" / "demo"


def cur_hour(hour: int, owner: str, run: str, center: str) -> dict[str, str]:
    """An hour of one GPU instance at 1.25 USD: its team tag, the owner tag, and two tags no rule reads."""
    start, end = f"2026-09-01T{hour:02d}:00:00Z", f"2026-09-01T{hour + 1:02d}:00:00Z" if hour < 23 else \
        "2026-09-02T00:00:00Z"
    return {"identity/LineItemId": f"li-{hour}", "lineItem/LineItemType": "Usage", "lineItem/UsageStartDate": start,
            "lineItem/UsageEndDate": end, "lineItem/ProductCode": "AmazonEC2",
            "lineItem/UsageType": "BoxUsage:p4d.24xlarge", "lineItem/ResourceId": "i-node",
            "lineItem/UsageAmount": "1", "lineItem/CurrencyCode": "USD", "lineItem/UnblendedCost": "1.25",
            "lineItem/LineItemDescription": f"hour {hour}", "product/productFamily": "Compute Instance",
            "product/regionCode": "us-east-1", "pricing/term": "OnDemand", "pricing/unit": "Hrs",
            "resourceTags/user:team": "nlp", "resourceTags/user:Owner": owner, "resourceTags/user:run": run,
            "resourceTags/user:cost center": center}


def write_cur(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def sets_of(store: Store) -> tuple[int, list[dict[str, str]]]:
    """The rows of `costs` and each distinct tag map among them."""
    rows = store.con.execute("SELECT count(*) FROM costs").fetchone()[0]
    maps = store.con.execute("SELECT DISTINCT CAST(to_json(Tags) AS VARCHAR) FROM costs ORDER BY 1").fetchall()
    return rows, [json.loads(m) for (m,) in maps]


def test_tags_no_rule_reads_split_no_row_of_a_column_per_tag_export(tmp_path):
    """24 hours of one instance whose run tag changes every hour and whose owner changes at noon: read with every
    key, each hour is a row and a tag set of its own; read with the keys the audit reads (team, owner), the day is
    two rows, one per owner, and their tags name nothing else. The cost (24 x 1.25) and the lines are the same."""
    path = write_cur(tmp_path / "cur.csv", [cur_hour(h, "ana" if h < 12 else "bo", f"run-{h}", "cc-7")
                                            for h in range(24)])
    every, read = Store(), Store(tag_keys=["team", "owner"])
    for store in (every, read):
        store.load_billing([path])
        assert store.con.execute("SELECT sum(BilledCost), sum(x_Lines) FROM costs").fetchone() == (Decimal("30"), 24)
    rows, maps = sets_of(every)
    assert rows == 24 and len(maps) == 24 and {"run", "cost center"} <= set(maps[0])
    rows, maps = sets_of(read)
    assert rows == 2
    assert maps == [{"Owner": "ana", "team": "nlp"}, {"Owner": "bo", "team": "nlp"}]
    read.tag_set_ids()
    assert read.con.execute("SELECT count(DISTINCT x_TagSet) FROM costs").fetchone() == (2,)


def test_a_tag_map_keeps_the_keys_read_however_they_are_spelt(tmp_path):
    """A FOCUS export's Tags (a JSON map): ` Team ` and `OWNER` are the team and owner keys (as Context.tag reads
    them, case and spaces ignored), `run` and `team-lead` are not; a line with only unread keys has no tags."""
    path = write(tmp_path / "focus.csv", [
        charge("vm-1", date(2026, 9, 1), {" Team ": "nlp", "OWNER": "ana", "run": "r-1", "team-lead": "bo"}),
        charge("vm-1", date(2026, 9, 2), {" Team ": "nlp", "OWNER": "ana", "run": "r-2"}),
        charge("vm-2", date(2026, 9, 1), {"run": "r-3"})])
    store = Store(tag_keys=["team", "owner"])
    store.load_billing([path])
    got = dict(store.con.execute("SELECT ResourceId, list(DISTINCT CAST(to_json(Tags) AS VARCHAR)) FROM costs "
                                 "GROUP BY 1").fetchall())
    assert {k: [json.loads(m) for m in v] for k, v in got.items()} == {
        "vm-1": [{" Team ": "nlp", "OWNER": "ana"}], "vm-2": [{}]}


def test_the_keys_read_are_the_policys_and_every_rules_tag_options():
    """The attribution keys, every rule's tag options (their defaults, or the clause's values), a map option's
    keys (TAG002's label_patterns); a disabled clause's rules read none."""
    policy = parse_policy("""
policy: p
version: "1"
owner: finops@example.com
attribution: {team_tags: [squad], owner_tags: [owner], job_tags: [pipeline]}
clauses:
  tagging: {text: t, required_tags: [cost-center], label_patterns: {ticket: "^JIRA-[0-9]+$"}}
""")
    keys = tag_keys_read(policy, configured_rules(policy))
    assert {"squad", "owner", "project", "pipeline", "cost-center", "ticket", "workload",
            "gpu-approval", "training-job", "tokens", "samples"} <= keys
    assert "team" not in keys  # the policy names `squad` and tagging's required tags replace the default's
    off = parse_policy(policy_text := """
policy: p
version: "1"
owner: finops@example.com
clauses:
  tagging: {text: t, enabled: false, required_tags: [cost-center]}
""")
    assert "cost-center" not in tag_keys_read(off, configured_rules(off)), policy_text


# Planted in both copies of the demo's billing: a VM of team nlp without a project tag (TAG001 flags it), owned
# by bo on its first day (50 USD) and by ana on the ten after it (10 USD a day): its tags are those it was
# charged last, ana's.
PLANTED = [charge("vm-owners", date(2026, 8, 1), {"team": "nlp", "owner": "bo"}, "50")] + \
    [charge("vm-owners", date(2026, 8, d), {"team": "nlp", "owner": "ana"}, "10") for d in range(2, 12)]


def _demo_billing(dst: Path, run_tags: bool) -> Path:
    """The demo's billing with PLANTED added to its FOCUS export and, with `run_tags`, every line given a tag no
    rule reads whose value is the line's own: a CUR a column `resourceTags/user:run`, the FOCUS export a `run`
    key in every line's Tags."""
    dst.mkdir()
    for f in sorted((DEMO / "billing").iterdir()):
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt", newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        if "Tags" in rows[0]:
            rows += PLANTED
        for i, row in enumerate(rows if run_tags else []):
            if "Tags" in row:
                row["Tags"] = json.dumps({**json.loads(row["Tags"] or "{}"), "run": f"run-{i}"})
            else:
                row["resourceTags/user:run"] = f"run-{i}"
        with opener(dst / f.name, "wt", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
    return dst


def _judged(audit) -> tuple[list, dict]:
    doc = audit.to_dict()
    findings = [{k: v for k, v in f.items() if k != "fingerprint"} for f in doc["findings"]]
    summary = {k: v for k, v in doc["summary"].items() if k not in ("inputs", "sources", "files")}
    return findings, summary


@pytest.mark.heavy
def test_a_tag_no_rule_reads_changes_no_finding_and_no_figure(tmp_path):
    """The demo quarter (and PLANTED) audited twice: as it is, and with every billing line carrying a `run` tag of
    its own. The policy reads no `run` key, so the findings (every field, evidence included) and the summary's
    figures are the same, and the planted VM's finding names ana, its last owner."""
    policy = load_policy(DEMO / "policy.yml")
    args = (DEMO / "inventory.json", parse_quarter("2026-Q3"), date(2026, 10, 15))
    plain = run_audit(policy, [_demo_billing(tmp_path / "plain", False)], *args)
    run = run_audit(policy, [_demo_billing(tmp_path / "run", True)], *args)
    [planted] = [f for f in plain.findings if f.resource == "vm-owners"]
    assert (planted.rule, planted.team, planted.owner, planted.cost) == ("TAG001", "nlp", "ana", Decimal("150.00"))
    assert _judged(run) == _judged(plain)


def test_a_policy_of_defaults_reads_exactly_these_keys():
    """Stated from the policy's and the rules' documented defaults: the attribution keys (team, owner, project, the
    five job keys, tokens and samples), TAG001's and TAG002's required tags, GPU003's workload and approval tags,
    GPU006's job tags; no other option (a GPU model, a region) is a key, and an interactive machine's labels are
    read from the inventory, not the bill."""
    policy = parse_policy('policy: p\nversion: "1"\nowner: finops@example.com\n')
    assert tag_keys_read(policy, configured_rules(policy)) == {
        "team", "owner", "project", "job", "job-name", "job_name", "job-id", "job_id", "tokens", "train_tokens",
        "training_tokens", "samples", "train_samples", "training_samples", "workload", "gpu-approval",
        "training-job"}


def test_a_machines_evidence_names_only_the_tags_the_audit_reads(tmp_path):
    """GPU006 flags a GPU VM the bill alone shows, billed all day on every day of the bill with no owner or job
    tag. Its evidence lists the tag keys seen on its lines among those the audit reads: a `run` tag that changes
    every day is none of them. The same VM with an `owner` tag is owned, not forgotten."""
    days = [date(2026, 8, d) for d in range(1, 29)]
    bill = write(tmp_path / "bill.csv", [charge("vm-gpu", d, {"run": f"r{d.day}"}) for d in days] +
                 [charge("vm-owned", d, {"run": f"r{d.day}", "owner": "ana"}) for d in days])
    policy = parse_policy('policy: p\nversion: "1"\nowner: finops@example.com\n')
    audit = run_audit(policy, [bill], None, parse_quarter("2026-Q3"), date(2026, 10, 15))
    [forgotten] = [f for f in audit.findings if f.rule == "GPU006"]
    assert forgotten.resource == "vm-gpu"
    assert (forgotten.evidence["tags"], forgotten.evidence["tag_keys_seen"]) == ({}, [])


class _Options:
    """A rule with a tag option of each shape: one key, a list of keys, a map keyed by them, and others."""

    def __init__(self, values: dict):
        from auditor.schema import Field

        self.options = {"one": Field("tag"), "many": Field("list", item=Field("tag")),
                        "by_key": Field("map", keys=Field("tag"), item=Field("regex")),
                        "models": Field("list", item=Field("gpu")), "count": Field("number")}
        self.values = values

    def opt(self, name: str):
        return self.values.get(name)


def test_every_shape_of_a_tag_option_names_keys():
    policy = parse_policy('policy: p\nversion: "1"\nowner: finops@example.com\n')
    base = tag_keys_read(policy, [])
    rule = _Options({"one": "cost-center", "many": ["squad", "tier"], "by_key": {"ticket": "^J-"},
                     "models": ["H100"], "count": 3})
    assert tag_keys_read(policy, [rule]) - base == {"cost-center", "squad", "tier", "ticket"}
    assert tag_keys_read(policy, [_Options({})]) == base  # options left unset name nothing

"""The core shared by the audit and the gate (auditor/core.py), stated directly: the configured rules, the rules run
and their findings ordered, the waivers applied and what each matched, the clauses judged, the machines findings
say to stop (the COM004 baseline is built without them), a split machine's findings under the team bearing the
largest part of its cost, and a previous audit's fingerprints. The right answers come from each function's
docstring and the rules' docs, worked out by hand for the small inputs written here."""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.context import Context
from auditor.core import (
    apply_waivers,
    clause_status,
    configured_rules,
    finding_order,
    follow_split,
    freed,
    load_baseline,
    run_audit,
    run_rules,
    waiver_statuses,
)
from auditor.errors import InputError
from auditor.model import Finding, Severity, WaiverStatus
from auditor.policy import Clause, Waiver, load_policy, parse_policy
from auditor.providers.billing.detect import URI_NEEDS_SPARK
from auditor.providers.catalog import load_catalog
from auditor.providers.live.pull import MANIFEST_SCHEMA
from auditor.registry import all_rules, get_rule
from auditor.tables.jobcost import job_totals
from auditor.window import parse_quarter

D = Decimal
Q3 = parse_quarter("2026-Q3")
TODAY = date(2026, 10, 15)
BASE = "policy: Core test policy\nowner: finops@example.com\n"
# idle (GPU001) set in the policy, its severity raised and one option given; egress (NET001) turned off;
# rightsizing (GPU002) and every other clause left to the rules' defaults
POLICY = BASE + """\
clauses:
  idle:
    text: A GPU machine idle for a day is shut down.
    max_mean_util_pct: 20
    severity: critical
  egress:
    text: No egress rule here.
    enabled: false
"""


def finding(rule: str = "GPU001", resource: str = "i-0abc", *, severity: Severity = Severity.HIGH,
            cost: str | None = "100.00", saving: str | None = None, currency: str = "USD",
            confidence: str = "high", team: str | None = "vision") -> Finding:
    return Finding(rule=rule, name=get_rule(rule).name, severity=severity, resource=resource, message="m",
                   entity_type="GpuAsset", cost=None if cost is None else D(cost),
                   monthly_savings=None if saving is None else D(saving), currency=currency, confidence=confidence,
                   team=team)


def waiver(rule: str = "GPU001", resource: str = "i-0abc*", expires: date = date(2027, 1, 31),
           reason: str = "launch rig", line: int = 9) -> Waiver:
    return Waiver(rule, resource, reason, "lead@example.com", expires, line=line)


def policy_with(*waivers: Waiver, text: str = POLICY):
    p = parse_policy(text)
    p.waivers = list(waivers)
    return p


# ---- configured rules ------------------------------------------------------------------------------------


def test_the_configured_rules_take_their_clauses_options_and_severity():
    rules = {r.id: r for r in configured_rules(policy_with())}
    assert set(rules) == {r.id for r in all_rules()} - {"NET001"}  # egress is off
    idle = rules["GPU001"]
    assert idle.severity is Severity.CRITICAL
    # the option given, and the rule's default for the one not given
    assert idle.opts == {"max_mean_util_pct": 20, "min_hours": get_rule("GPU001").options["min_hours"].default}
    assert rules["GPU002"].severity is Severity.MEDIUM  # no clause: the rule's own
    assert get_rule("GPU001").severity is Severity.HIGH  # the class is untouched


def test_an_option_the_policy_leaves_empty_keeps_the_rules_default():
    p = parse_policy(POLICY)
    p.clause("idle").options["min_hours"] = None
    (idle,) = configured_rules(p, ["GPU001"])
    assert idle.opts["min_hours"] == get_rule("GPU001").options["min_hours"].default
    assert idle.opts["max_mean_util_pct"] == 20


def test_selected_rules_only_and_in_the_packs_order():
    assert [r.id for r in configured_rules(policy_with(), ["TAG001", "idle-gpu", "gpu002"])] == \
        ["GPU001", "GPU002", "TAG001"]
    assert configured_rules(policy_with(), ["NET001"]) == []  # selected, but its clause is off
    assert [r.id for r in configured_rules(policy_with(), [])] == [r.id for r in all_rules()
                                                                   if r.id != "NET001"]  # none named: every rule


def test_an_unknown_rule_is_one_input_error_naming_it():
    with pytest.raises(InputError) as near:
        configured_rules(policy_with(), ["GPU01"])
    assert str(near.value).startswith("--rule 'GPU01': no such rule; did you mean ")
    with pytest.raises(InputError) as far:
        configured_rules(policy_with(), ["zzzzzzzz"])
    ids = ", ".join(r.id for r in all_rules())
    assert str(far.value) == f"--rule 'zzzzzzzz': no such rule; known rules: {ids}"
    assert far.value.__cause__ is None and far.value.__suppress_context__


# ---- the rules run over their entities -----------------------------------------------------------------------


class Probe:
    """A rule that flags every entity it is given, and folds its findings as a rule may (ANOM001)."""

    id, name, entity = "GPU001", "probe", str
    severity = Severity.HIGH

    def __init__(self, entity: type, savings: dict[str, str], dropped: str | None = None):
        self.entity, self.savings, self.dropped, self.folded = entity, savings, dropped, None

    def check(self, entity, ctx):
        yield finding(self.id, entity, saving=self.savings.get(entity))

    def fold(self, found, ctx):
        self.folded = [f.resource for f in found]
        return [f for f in found if f.resource != self.dropped]


def test_each_rule_reads_its_own_entities_and_its_findings_are_folded_then_ordered():
    ctx = Context(load_catalog(), policy_with(), Q3)
    first = Probe(str, {"b": "10", "c": "30"}, dropped="d")
    second = Probe(int, {})
    found = run_rules([first, second], {str: ["b", "c", "a", "d"], bytes: [b"x"]}, ctx)
    assert first.folded == ["b", "c", "a", "d"]  # fold sees every finding the rule made, in order
    assert second.folded == []  # no entity of its type: nothing checked, fold still asked
    # severity first, then the larger saving (none is 0), then rule and resource
    assert [f.resource for f in found] == ["c", "b", "a"]


def test_findings_are_ordered_by_severity_saving_rule_and_resource():
    fs = [finding("GPU002", "b", severity=Severity.MEDIUM, saving="50"),
          finding("GPU001", "z", severity=Severity.MEDIUM, saving="50"),
          finding("GPU001", "y", severity=Severity.MEDIUM, saving="50"),
          finding("TAG001", "a", severity=Severity.MEDIUM),
          finding("COM001", "a", severity=Severity.MEDIUM, saving="0.01"),
          finding("BUD001", "a", severity=Severity.LOW, saving="9999"),
          finding("GPU006", "a", severity=Severity.CRITICAL)]
    assert [(f.rule, f.resource) for f in sorted(fs, key=finding_order)] == [
        ("GPU006", "a"), ("GPU001", "y"), ("GPU001", "z"), ("GPU002", "b"), ("COM001", "a"), ("TAG001", "a"),
        ("BUD001", "a")]


# ---- waivers -----------------------------------------------------------------------------------------------


def test_waivers_applied_in_order_and_each_ones_status():
    on, other, later = finding(resource="i-0abc1"), finding(resource="i-0zzz"), finding(resource="i-0abc2")
    p = policy_with(waiver(), waiver(resource="*", reason="second"), waiver(resource="i-0zzz", line=20,
                                                                             expires=date(2026, 10, 14)),
                    waiver(rule="GPU002", resource="*", line=30))
    status = apply_waivers([on, other, later], p, TODAY)
    # the first active waiver that matches a finding is its waiver; a later one matches it too but changes nothing
    assert on.waiver == later.waiver == {"reason": "launch rig", "owner": "lead@example.com", "expires": "2027-01-31"}
    assert other.waiver == {"reason": "second", "owner": "lead@example.com", "expires": "2027-01-31"}
    assert [(s["status"], s["matched"], s["line"]) for s in status] == [
        ("active", 2, 9), ("active", 3, 9), ("expired", 1, 20), ("unused", 0, 30)]
    assert status[2] == {"rule": "GPU001", "resource": "i-0zzz", "reason": "launch rig", "owner": "lead@example.com",
                         "expires": "2026-10-14", "status": "expired", "matched": 1, "line": 20}


def test_a_waiver_is_active_through_its_expiry_day():
    f = finding()
    assert apply_waivers([f], policy_with(waiver(expires=TODAY)), TODAY)[0]["status"] == "active"
    assert f.waived
    g = finding()
    assert apply_waivers([g], policy_with(waiver(expires=TODAY)), date(2026, 10, 16))[0]["status"] == "expired"
    assert not g.waived


def test_waiver_statuses_carry_the_billed_cost_of_what_each_names():
    p = policy_with(waiver(), waiver(rule="GPU002", resource="*", line=12), waiver(rule="TAG001", resource="x"))
    p.path = "policy.yml"
    fs = [finding(resource="i-0abc1", cost="100.25"), finding(resource="i-0abc2", cost="0.75"),
          finding(resource="i-0abc3", cost="20.00", currency="EUR"), finding(resource="i-0abc4", cost=None),
          finding(resource="i-0zzz", cost="5000"), finding("GPU002", "i-0abc1", cost="7.10")]
    status = apply_waivers(fs, p, TODAY)
    ws = waiver_statuses(p, status, fs, TODAY)
    assert ws[0] == WaiverStatus("waiver:GPU001:i-0abc*", "GPU001", "i-0abc*", "launch rig", "lead@example.com",
                                 date(2027, 1, 31), TODAY, "active", 4, {"USD": D("101.00"), "EUR": D("20.00")},
                                 "policy.yml", 9, {"owner": "lead@example.com"})
    assert (ws[1].id, ws[1].matched, ws[1].matched_cost, ws[1].source_line) == (
        "waiver:GPU002:*", 1, {"USD": D("7.10")}, 12)
    assert (ws[2].status, ws[2].matched, ws[2].matched_cost) == ("unused", 0, {})
    with pytest.raises(ValueError):  # one status per waiver, or none is judged
        waiver_statuses(p, status[:2], fs, TODAY)


def test_a_waivers_owner_is_under_the_policys_first_owner_tag():
    p = policy_with(waiver(), text=POLICY + "attribution:\n  owner_tags: [Owner, owner]\n")
    (ws,) = waiver_statuses(p, apply_waivers([], p, TODAY), [], TODAY)
    assert ws.tags == {"Owner": "lead@example.com"}
    assert (ws.status, ws.matched, ws.matched_cost) == ("unused", 0, {})


# ---- the machines the findings say to stop -------------------------------------------------------------------


def test_freed_are_the_machines_findings_say_to_stop_or_shrink_unless_waived():
    assert {r.id for r in all_rules() if r.frees_capacity} == {"GPU001", "GPU002", "GPU005", "GPU006", "GPU007"}
    fs = [finding("GPU001", "i-0IDLE"), finding("GPU002", "i-0Big"), finding("GPU005", "i-0parked"),
          finding("GPU006", "i-0forgotten"), finding("GPU007", "i-0stopped"),
          finding("GPU001", "i-0kept"), finding("GPU002", "i-0lapsed"),
          finding("TAG001", "i-0untagged"), finding("COM001", "ri-1"), finding("SPOT002", "job-1")]
    p = policy_with(waiver(resource="i-0kept"), waiver(rule="GPU002", resource="i-0lapsed", expires=date(2026, 10, 14)),
                    waiver(rule="GPU002", resource="i-0parked"))  # a waiver of another rule keeps nothing
    assert freed(fs, p, TODAY) == {"i-0idle", "i-0big", "i-0parked", "i-0forgotten", "i-0stopped", "i-0lapsed"}
    # on its expiry day the waiver still holds
    assert "i-0lapsed" not in freed(fs, policy_with(waiver(rule="GPU002", resource="i-0lapsed", expires=TODAY)),
                                    TODAY)


# ---- a split machine's findings follow its spend ---------------------------------------------------------------


def test_a_split_machines_findings_are_the_team_bearing_most_of_its_cost():
    fs = [finding(resource="i-0NODE", team="vision"), finding("GPU002", "i-0node", team=None),
          finding(resource="i-0orphan", team="nlp"), finding(resource="i-0alone", team="vision"),
          finding(resource="", team="vision")]
    follow_split(fs, {"i-0node": "research", "i-0orphan": None})
    # matched by the id in lower case; None where no team bears the largest part; others keep their own
    assert [f.team for f in fs] == ["research", "research", None, "vision", "vision"]
    follow_split(fs, {})  # no split in the export: nothing changes
    assert [f.team for f in fs] == ["research", "research", None, "vision", "vision"]


# ---- the clauses judged ----------------------------------------------------------------------------------------


def test_each_clause_is_disabled_not_checked_met_or_broken():
    p = policy_with(waiver(rule="GPU006", resource="*"))
    rules = configured_rules(p)
    p.clause("idle").options["min_hours"] = None  # left empty: the rule's default is shown
    fs = [finding("GPU001", "i-1", cost="100.10", saving="73.00"),
          finding("GPU001", "i-2", cost="20.05", saving="10.00", confidence="low"),  # to check: not counted
          finding("GPU001", "i-3", cost="30.00", saving="40.00", currency="EUR"),
          finding("GPU001", "i-4", cost=None, saving=None),
          finding("GPU002", "i-1", cost="5.00", saving="3.00"),
          finding("GPU006", "i-9", cost="999.00", saving="999.00")]  # waived
    apply_waivers(fs, p, TODAY)
    checked = {r.id: 0 for r in rules} | {"GPU001": 4, "GPU002": 2, "GPU005": 1, "GPU006": 1}
    by_rule = {c["rule"]: c for c in clause_status(p, rules, fs, checked)}
    assert [c["rule"] for c in clause_status(p, rules, fs, checked)] == [r.id for r in all_rules()]
    idle = by_rule["GPU001"]
    assert idle == {"clause": "idle", "rule": "GPU001", "name": get_rule("GPU001").name,
                    "text": "A GPU machine idle for a day is shut down.",
                    "options": {"max_mean_util_pct": 20,
                                "min_hours": get_rule("GPU001").options["min_hours"].default},
                    "in_policy": True, "status": "broken", "findings": 4,
                    "cost": {"USD": D("120.15"), "EUR": D("30.00")},
                    "monthly_savings": {"USD": D("73.00"), "EUR": D("40.00")}}
    right = by_rule["GPU002"]
    assert (right["status"], right["in_policy"], right["text"], right["findings"]) == (
        "broken (defaults)", False, get_rule("GPU002").summary(), 1)
    assert right["options"] == {k: v.default for k, v in get_rule("GPU002").options.items()}
    assert (right["cost"], right["monthly_savings"]) == ({"USD": D("5.00")}, {"USD": D("3.00")})
    # GPU005 looked at a machine and found nothing; GPU006's one finding is waived
    assert by_rule["GPU005"]["status"] == by_rule["GPU006"]["status"] == "met (defaults)"
    assert (by_rule["GPU006"]["findings"], by_rule["GPU006"]["cost"], by_rule["GPU006"]["monthly_savings"]) == (
        0, {}, {})
    assert by_rule["KUBE001"]["status"] == "not checked"  # nothing to look at
    assert by_rule["NET001"]["status"] == "disabled"
    assert (by_rule["NET001"]["in_policy"], by_rule["NET001"]["text"]) == (True, "No egress rule here.")


def test_a_clause_in_the_policy_with_nothing_found_is_met_and_one_with_nothing_looked_at_not_checked():
    p = policy_with()
    rules = configured_rules(p, ["GPU001", "GPU002"])
    checked = {"GPU001": 3, "GPU002": 0}
    by_rule = {c["rule"]: c for c in clause_status(p, rules, [], checked)}
    assert by_rule["GPU001"]["status"] == "met"
    assert by_rule["GPU002"]["status"] == "not checked"
    assert by_rule["TAG001"]["status"] == "disabled"  # not selected
    # a rule that found something had something to look at, whatever `checked` says
    by_rule = {c["rule"]: c for c in clause_status(p, rules, [finding("GPU002")], {})}
    assert by_rule["GPU002"]["status"] == "broken (defaults)"
    assert by_rule["GPU001"]["status"] == "not checked"


# ---- a previous audit's fingerprints ----------------------------------------------------------------------------


def test_a_baseline_is_every_fingerprint_it_lists_reported_or_known(tmp_path):
    reported, known = finding(resource="i-1"), finding("GPU002", "i-2")
    doc = {"schema": "gpu-auditor/audit@1", "window": {"label": "2026-Q2"}, "summary": {}, "policy": {},
           "findings": [reported.to_dict(), {"rule": "GPU001"}],  # an earlier version's: no fingerprint
           "baseline": {"findings": [known.to_dict()]}}
    base = tmp_path / "audit.json"
    base.write_text(json.dumps(doc), encoding="utf-8")
    prints, info = load_baseline(base)
    assert prints == {reported.fingerprint, known.fingerprint}
    assert info == {"path": str(base), "sha256": hashlib.sha256(base.read_bytes()).hexdigest(),
                    "window": "2026-Q2"}
    # an audit written without a baseline (null) and without a window label
    doc.update(baseline=None, window={})
    base.write_text(json.dumps(doc), encoding="utf-8")
    prints, info = load_baseline(Path(tmp_path))
    assert prints == {reported.fingerprint} and info["window"] is None and info["path"] == str(tmp_path)


# ---- the audit: load -> entities -> rules -> findings -> result -------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
IDLE_H100 = "i-0a1f3c5e7b9d24680"  # GPU001; its waiver (policy.yml line 128) lapsed on 2026-08-31
BENCH = "i-0bench4f1a2b3c4d5"  # GPU002, waived by the benchmark rig's waiver (line 122, to 2027-03-31)
BATCH = "i-0e1d3b5f7a9c0e2d4"  # GPU002: oversized
LLAMA, SAM = (f"arn:aws:sagemaker:us-east-1:444455556666:training-job/{name}"  # SPOT001: spot, no or rare checkpoints
              for name in ("nlp-llama-ft-spot-0814", "vision-sam-ft-spot-0909"))


def test_an_audit_fails_on_a_uri_or_a_bad_baseline_before_reading_anything(tmp_path):
    policy = load_policy(DEMO / "policy.yml")
    with pytest.raises(InputError) as uri:
        run_audit(policy, [DEMO / "billing", "s3a://bucket/cur/"], window=Q3)
    assert (uri.value.message, uri.value.path) == (URI_NEEDS_SPARK, "s3a://bucket/cur/")
    # the baseline is read first: a missing one is the error, not the missing billing
    with pytest.raises(InputError) as base:
        run_audit(policy, [tmp_path / "no-billing.csv"], window=Q3, baseline=tmp_path / "none")
    assert str(base.value).startswith(f"{tmp_path / 'none'}: no audit.json found here")


def test_an_engine_reads_the_billing_files_and_the_uris_and_an_empty_window_is_said(tmp_path):
    """`engine` reads the files into the store (here nothing): the local files first, then the URIs, with the
    progress callback; a window with no billing line is a warning; today is the day the audit runs; last
    quarter's audit is compared with and its unit costs are the ones changes are measured against."""
    calls = []

    def engine(store, paths, progress):
        calls.append((paths, progress))
        return []

    def progress(line):
        said.append(line)

    said: list[str] = []
    previous = {"path": "q2/audit.json", "sha256": "0" * 64,
                "doc": {"schema": "gpu-auditor/audit@1", "window": {"label": "2026-Q2"}, "findings": [],
                        "summary": {"unit_costs": {"window": "2026-Q2"}}, "policy": {}}}
    stamp = datetime(2026, 10, 1, 12)
    audit = run_audit(load_policy(DEMO / "policy.yml"), [DEMO / "billing" / "aws-cur-2026-07.csv",
                                                         "s3a://bucket/cur/"], window=Q3, engine=engine,
                      progress=progress, previous=previous, generated_at=stamp)
    assert calls == [([DEMO / "billing" / "aws-cur-2026-07.csv", "s3a://bucket/cur/"], progress)]
    assert said == ["running the rules over 2026-Q3"]  # no inventory to read
    assert audit.warnings == ["no billing lines fall in the audit window 2026-Q3",
                              f"waiver for GPU001 on {IDLE_H100} expired on 2026-08-31; it no longer waives"]
    assert audit.as_of == date.today() and audit.partial is False and audit.stamp() == stamp
    assert audit.baseline is None and audit.known == [] and audit.previous is previous
    assert audit.trend["previous"]["label"] == "2026-Q2"
    assert audit.summary["unit_costs"]["window"] == "2026-Q3"
    assert audit.summary["unit_costs"]["previous_window"] == "2026-Q2"
    assert audit.summary["jobs"] == job_totals([])
    # nothing billed: every rule with a saving, budget or spend to judge has nothing; the waivers are still judged
    assert [w["status"] for w in audit.waivers] == ["unused", "expired"]
    assert [(f.rule, f.resource) for f in audit.findings] == [("POL001", f"waiver:GPU001:{IDLE_H100}")]
    # without a window, the billing's own: none here
    with pytest.raises(InputError, match="^no billing lines to audit$"):
        run_audit(load_policy(DEMO / "policy.yml"), [DEMO / "billing"], engine=engine)


def test_an_engine_reads_into_the_audits_own_store():
    """What the engine reads is what the audit counts: the demo's July CUR file, read by an engine into the store
    it is given (as Spark's does), is every billing line of the audit."""
    july = DEMO / "billing" / "aws-cur-2026-07.csv"

    def engine(store, paths, progress):
        return store.load_billing(paths, progress)

    audit = run_audit(load_policy(DEMO / "policy.yml"), [july], window=Q3, today=TODAY, engine=engine,
                      select=["POL001"])
    lines = len(july.read_text(encoding="utf-8").splitlines()) - 1  # less the header
    assert audit.summary["rows"] == lines > 0
    assert [Path(src.path).name for src in audit.sources] == [july.name]


@pytest.mark.heavy
def test_the_demo_audit_applies_the_waivers_and_leaves_the_machines_to_stop_out_of_the_baseline(tmp_path):
    """The demo (README), 2026-Q3 as of 2026-10-15, GPU001, GPU002, COM004 and POL001 only, with a baseline
    holding the batch machine's GPU002: it is known, not reported, and still left out of COM004's baseline (the
    machines a finding says to stop or shrink, waived ones kept in); the lapsed waiver is a POL001 finding and a
    warning, the benchmark rig's waives its GPU002."""
    # GPU002's fingerprint holds the type it recommends: four A10Gs, a g5.12xlarge (README)
    known = Finding(rule="GPU002", name="oversized-gpu", severity=Severity.MEDIUM, resource=BATCH, message="m",
                    entity_type="GpuAsset", key="g5.12xlarge")
    said: list[str] = []
    policy = load_policy(DEMO / "policy.yml")
    base = tmp_path / "audit.json"
    # and the SPOT001 finding of the llama job (spot without a checkpoint: README), known too
    spot = Finding(rule="SPOT001", name="spot-without-checkpoint", severity=Severity.HIGH, resource=LLAMA,
                   message="m", entity_type="Job")
    base.write_text(json.dumps({"schema": "gpu-auditor/audit@1", "window": {"label": "2026-Q2"}, "summary": {},
                                "policy": {}, "findings": [known.to_dict(), spot.to_dict()]}), encoding="utf-8")
    audit = run_audit(policy, [DEMO / "billing"], DEMO / "inventory.json", Q3, TODAY,
                      select=["GPU001", "GPU002", "COM004", "POL001", "SPOT001"], progress=said.append,
                      baseline=base)
    # a job's findings, known or not, are listed with it: the llama job's known SPOT001, the SAM job's open one
    on_job = {j["id"]: [f["rule"] for f in j["findings"]] for j in audit.jobs}
    assert on_job[LLAMA] == on_job[SAM] == ["SPOT001"]
    assert [(f.rule, f.resource) for f in audit.findings if f.rule == "SPOT001"] == [("SPOT001", SAM)]
    files = ["aws-cur-2026-07.csv", "aws-cur-2026-08.csv.gz", "aws-cur-2026-09.csv", "focus-azure-2026-q3.csv"]
    assert said == [*(f"[{i}/4] reading {DEMO / 'billing' / name}" for i, name in enumerate(files, 1)),
                    f"reading inventory {DEMO / 'inventory.json'}", "running the rules over 2026-Q3"]
    assert audit.as_of == TODAY and audit.window == Q3 and audit.policy is policy
    assert audit.inventory == str(DEMO / "inventory.json")
    assert sorted(Path(src.path).name for src in audit.sources) == files
    assert audit.jobs and audit.summary["jobs"] == job_totals(audit.jobs)
    assert [(f.rule, f.resource, f.in_baseline) for f in audit.known] == [("SPOT001", LLAMA, True),
                                                                          ("GPU002", BATCH, True)]
    assert audit.baseline == {"path": str(base), "sha256": hashlib.sha256(base.read_bytes()).hexdigest(),
                              "window": "2026-Q2"}
    rules = {(f.rule, f.resource): f for f in audit.findings}
    assert ("GPU002", BATCH) not in rules and not any(f.in_baseline for f in audit.findings)
    assert rules[("GPU002", BENCH)].waived and not rules[("GPU001", IDLE_H100)].waived
    assert ("POL001", f"waiver:GPU001:{IDLE_H100}") in rules
    assert audit.warnings == [f"waiver for GPU001 on {IDLE_H100} expired on 2026-08-31; it no longer waives"]
    assert [(w["rule"], w["status"], w["matched"]) for w in audit.waivers] == [("GPU002", "active", 1),
                                                                              ("GPU001", "expired", 1)]
    assert audit.findings == sorted(audit.findings, key=finding_order)
    # every machine with a saving still ran at the end of the quarter (running.judge): the savings stand, and the
    # actions are the open findings' (not the waived rig's)
    assert all(f.still_running is True for f in audit.findings if f.rule in ("GPU001", "GPU002"))
    assert {a["resource"] for a in audit.summary["actions"] if a["saving"]} == {
        f.resource for f in audit.findings if f.monthly_savings and not f.waived} >= {IDLE_H100}
    # left out of the baseline: every machine GPU001 or GPU002 says to stop or shrink, known or not, not waived
    stop = {f.resource.lower() for f in [*audit.findings, *audit.known]
            if f.rule in ("GPU001", "GPU002") and not f.waived}
    assert BATCH in stop and BENCH not in stop and IDLE_H100 in stop
    assert audit.summary["baseline_left_out"] == sorted(stop)
    # so no commitment is sized on them: the idle H100 is the demo's only p5, the batch machine its only
    # g5.48xlarge (the benchmark rig, waived, is a g6.48xlarge and counts)
    baseline = [f for f in audit.findings if f.rule == "COM004"]
    assert {f.resource for f in baseline} == {"aws:us-east-1:g6:USD", "aws:us-west-2:g5:USD"}
    assert not any("g5.48xlarge" in f.evidence["instance_types"] for f in baseline)
    status = {c["rule"]: c["status"] for c in audit.clauses}
    assert status["TAG001"] == "disabled" and status["GPU001"] == status["GPU002"] == "broken"
    assert status["COM004"] == "broken (defaults)" and status["POL001"] == "broken"


def test_a_finding_on_a_machine_the_provider_split_is_the_team_bearing_most_of_its_cost():
    """cur2-eks-split.csv's node (tagged ml-platform) is split whole: research bears 1,573.2081 of its
    2,359.6272, vision 786.4191 (tests/test_billing_gpu.py). Its TAG001 (no owner, no project) is research's."""
    policy = parse_policy(BASE + "attribution: {team_tags: [team], owner_tags: [owner]}\n"
                                 "teams: {research: {lead: r@example.com}, vision: {lead: v@example.com}}\n")
    audit = run_audit(policy, [REPO / "fixtures" / "billing" / "gpu" / "cur2-eks-split.csv"], window=Q3,
                      select=["TAG001"])
    assert {f.resource: f.team for f in audit.findings}["i-0eksgpu000000001"] == "research"


@pytest.mark.heavy
def test_a_clause_is_judged_on_what_its_rule_looked_at_the_commitment_baseline_and_the_waivers_too(tmp_path):
    """COM004 looks at the demo's steady GPU families (g6 in us-east-1, g5 in us-west-2: README) and, with a floor
    no family reaches, flags none: its clause is met, not "not checked" (its baseline is built after the other
    rules, and was once left out of what the rules looked at). POL001 looks at the policy's waivers: a waiver
    far from expiry is met; no waiver at all, nothing to check."""
    policy = load_policy(DEMO / "policy.yml")
    policy.clauses["commitment_coverage"] = Clause("commitment_coverage", "Commit to the steady floor.",
                                                   {"min_floor_per_hour": D(100000)})
    audit = run_audit(policy, [DEMO / "billing"], DEMO / "inventory.json", Q3, TODAY, select=["COM004"])
    assert [(c["status"], c["findings"]) for c in audit.clauses if c["rule"] == "COM004"] == [("met", 0)]

    def nothing(store, paths, progress):
        return []

    def pol001(text: str) -> str:
        audit = run_audit(parse_policy(BASE + text), [DEMO / "billing"], window=Q3, today=TODAY, engine=nothing,
                          select=["POL001"])
        return next(c["status"] for c in audit.clauses if c["rule"] == "POL001")

    far = "waivers:\n  - {rule: GPU001, resource: i-1, reason: r, owner: o@example.com, expires: 2099-01-01}\n"
    assert pol001(far) == "met (defaults)"
    assert pol001("") == "not checked"


def test_a_snapshot_that_lacks_a_source_is_a_partial_audit_over_its_own_window(tmp_path):
    """A snapshot folder whose manifest lists a failed source: the audit is partial and says what is missing;
    with no window given, the snapshot's is the audit's."""
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "manifest.json").write_text(json.dumps({
        "schema": MANIFEST_SCHEMA, "window": {"start": "2026-07-01T00:00:00Z", "end": "2026-10-01T00:00:00Z"},
        "failed": [{"name": "aws-cur", "reason": "AccessDenied"}], "files": []}), encoding="utf-8")

    def nothing(store, paths, progress):
        return []

    audit = run_audit(parse_policy(BASE), [snap], today=TODAY, engine=nothing, select=["TAG001"])
    assert audit.partial is True
    assert (audit.window.start, audit.window.end) == (Q3.start, Q3.end)
    assert audit.warnings[0] == (f"partial audit: {snap} lacks aws-cur (AccessDenied); what that source holds is "
                                 "missing from this audit")

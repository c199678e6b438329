"""The written GPU policy: loading, validation errors with file, line and key, clauses and waivers."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.core import apply_waivers, configured_rules
from auditor.errors import InputError
from auditor.model import Finding, Severity
from auditor.policy import Policy, Waiver, load_policy, parse_policy, policy_schema
from auditor.registry import all_rules

REPO = Path(__file__).resolve().parents[1]
POLICIES = REPO / "fixtures" / "policies"
BASE = "policy: Inline test policy\nowner: finops@example.com\n"


def error_of(name: str) -> InputError:
    with pytest.raises(InputError) as exc:
        load_policy(POLICIES / name)
    return exc.value


# ---- a valid policy ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def valid() -> Policy:
    return load_policy(POLICIES / "valid.yml")


def test_valid_policy_header(valid):
    assert valid.name == "Test ML GPU policy"
    assert valid.version == "2026.3"
    assert valid.owner == "finops@example.com"
    assert valid.currency == "USD"
    assert valid.path == str(POLICIES / "valid.yml")
    assert valid.team_tags == ["team", "Team"]
    assert valid.owner_tags == ["owner"]
    assert valid.project_tags == ["project"]


def test_valid_policy_teams(valid):
    assert set(valid.teams) == {"vision", "nlp"}
    vision = valid.teams["vision"]
    assert vision.lead == "lead-vision@example.com"
    assert vision.budget_per_quarter == Decimal("120000.50")
    assert isinstance(vision.budget_per_quarter, Decimal)
    assert vision.projects == ["detector", "segmenter"]
    assert valid.teams["nlp"].budget_per_quarter is None
    assert valid.teams["nlp"].projects == []
    assert valid.team_of_project("segmenter") == "vision"
    assert valid.team_of_project("unknown") is None


def test_valid_policy_clauses(valid):
    assert set(valid.clauses) == {"idle", "rightsizing", "tagging", "egress", "spot_checkpoint"}
    idle = valid.clause("idle")
    assert idle.text.startswith("A GPU machine that averages")
    assert idle.options["max_mean_util_pct"] == 15
    assert idle.options["min_hours"] == 12
    assert idle.severity is Severity.CRITICAL
    assert idle.enabled is True
    # options the file leaves out take the rule's defaults; the clause's own keys are not options
    right = valid.clause("rightsizing")
    assert right.options["memory_headroom_pct"] == 25
    assert right.options["min_monthly_savings"] == 100
    assert right.options["max_target_util_pct"] == 80
    assert not {"text", "severity", "enabled"} & set(right.options)
    assert right.severity is None
    assert valid.clause("tagging").options["required_tags"] == ["team", "owner"]
    assert valid.clause("egress").enabled is False
    assert valid.clause("spot_checkpoint").options["max_interval_min"] == 30
    assert valid.clause("nonexistent") is None


def test_valid_policy_waivers(valid):
    assert len(valid.waivers) == 2
    first, second = valid.waivers
    assert (first.rule, first.resource, first.reason, first.owner) == \
        ("GPU002", "i-0abc*", "benchmark rig", "lead-vision@example.com")
    assert first.expires == date(2027, 1, 31)
    assert type(first.expires) is date
    assert first.line == 42
    # a waiver may name the rule by its name; it is stored by ID
    assert second.rule == "GPU001"
    assert second.expires == date(2026, 6, 30)
    assert second.line == 47


def test_minimal_policy_defaults():
    p = parse_policy(BASE)
    assert p.version == "1"
    assert p.currency == "USD"
    assert p.teams == {} and p.clauses == {} and p.waivers == []
    assert p.team_tags == ["team"] and p.owner_tags == ["owner"] and p.project_tags == ["project"]


@pytest.mark.parametrize(("text", "version"), [('"2026.3"', "2026.3"), ("2", "2"), ("'1'", "1")])
def test_version_quoted_or_not(text, version):
    assert parse_policy(BASE + f"version: {text}\n").version == version


def test_version_zero_is_kept():
    assert parse_policy(BASE + "version: 0\n").version == "0"


@pytest.mark.parametrize("text", ["[1]", "{a: 1}"])
def test_version_must_be_a_scalar(text):
    with pytest.raises(InputError, match="version"):
        parse_policy(BASE + f"version: {text}\n", "p.yml")


def test_dates_elsewhere_stay_text():
    p = parse_policy(BASE + "teams:\n  vision: {lead: lead@example.com, projects: [2026-01-01]}\n"
                            "clauses:\n  idle:\n    text: 2026-07-01\n")
    assert p.teams["vision"].projects == ["2026-01-01"]
    assert p.clause("idle").text == "2026-07-01"


def test_starter_policy_is_valid():
    from auditor.starter import starter_policy

    p = parse_policy(starter_policy(), "gpu-policy.yml")
    assert {c.clause for c in all_rules()} <= set(p.clauses)


# ---- errors: file, line, key path, suggestion ------------------------------------------------------

CASES = [
    # file, line, key path, words the message carries
    ("unknown_top_key.yml", 3, "clause", ["unknown key 'clause'", "did you mean 'clauses'"]),
    ("unknown_clause.yml", 6, "clauses.egres", ["unknown key 'egres'", "did you mean 'egress'"]),
    ("unknown_option.yml", 6, "clauses.idle.max_mean_util",
     ["unknown key 'max_mean_util'", "did you mean 'max_mean_util_pct'"]),
    ("wrong_type.yml", 7, "clauses.idle.min_hours", ["expected a number", "'a day'"]),
    ("out_of_range.yml", 5, "clauses.idle.max_mean_util_pct", ["at most 100", "150"]),
    ("missing_owner.yml", 1, "owner", ["required"]),
    ("bad_waiver_date.yml", 8, "waivers[0].expires", ["expected a date", "'someday'"]),
    ("unknown_waiver_rule.yml", 5, "waivers[1].rule", ["no rule 'GPU009'", "did you mean 'GPU00"]),
    ("duplicate_key.yml", 7, None, ["duplicate key 'max_mean_util_pct'"]),
    ("alias.yml", 6, None, ["alias"]),
    ("top_level_list.yml", 1, None, ["mapping"]),
]


@pytest.mark.parametrize(("name", "line", "key", "words"), CASES, ids=[c[0] for c in CASES])
def test_policy_error_names_file_line_and_key(name, line, key, words):
    e = error_of(name)
    path = str(POLICIES / name)
    assert e.path == path
    assert e.line == line
    text = str(e)
    assert text.startswith(f"{path}:{line}: ")
    if key is not None:
        assert text.startswith(f"{path}:{line}: {key}: ")
    for w in words:
        assert w in text
    assert "\n" not in text


@pytest.mark.parametrize(("body", "line", "key", "hint"), [
    pytest.param("clause:\n  idle:\n    min_hours: 1\n", 3, "clause", "did you mean 'clauses'", id="block-top-key"),
    pytest.param("clause: {idle: {min_hours: 1}}\n", 3, "clause", "did you mean 'clauses'", id="flow-top-key"),
    pytest.param("clauses:\n  egres: {max_gb_per_month: 500}\n", 4, "clauses.egres", "did you mean 'egress'",
                 id="flow-clause"),
    pytest.param("clauses:\n  egres:\n    max_gb_per_month: 500\n", 4, "clauses.egres", "did you mean 'egress'",
                 id="block-clause"),
    pytest.param("clauses:\n  - idle\n", 3, "clauses", "expected a mapping", id="block-list-for-mapping"),
    pytest.param("clauses: [idle]\n", 3, "clauses", "expected a mapping", id="flow-list-for-mapping"),
])
def test_unknown_key_line_is_the_keys_own_line(body, line, key, hint):
    with pytest.raises(InputError) as exc:
        parse_policy(BASE + body, "p.yml")
    assert str(exc.value).startswith(f"p.yml:{line}: {key}: ")
    assert hint in str(exc.value)


def test_not_yaml_at_all():
    e = error_of("not_yaml.yml")
    path = str(POLICIES / "not_yaml.yml")
    assert e.path == path
    assert "not valid YAML" in str(e)
    assert str(e).startswith(f"{path}:")
    # the parser notices the stream ended on the line after `{{{`; either line is a fair pointer
    assert e.line in (1, 2)
    with pytest.raises(InputError, match="not valid YAML") as exc:
        parse_policy("{{{", "p.yml")
    assert exc.value.line == 1


def test_empty_policy_file():
    e = error_of("empty.yml")
    assert e.path == str(POLICIES / "empty.yml")
    assert "empty" in str(e)
    assert str(e).startswith(str(POLICIES / "empty.yml") + ": ")


def test_comment_only_policy_is_empty():
    with pytest.raises(InputError, match="empty"):
        parse_policy("# nothing but a comment\n", "p.yml")


def test_missing_policy_file(tmp_path):
    with pytest.raises(InputError, match="not found") as exc:
        load_policy(tmp_path / "nope.yml")
    assert exc.value.path == str(tmp_path / "nope.yml")


def test_policy_not_utf8(tmp_path):
    p = tmp_path / "latin1.yml"
    p.write_bytes(b"policy: caf\xe9\nowner: x\n")
    with pytest.raises(InputError) as exc:
        load_policy(p)
    assert exc.value.path == str(p)


@pytest.mark.parametrize(("body", "line", "words"), [
    ("clauses:\n  idle:\n    severity: hgh\n", 5, ["clauses.idle.severity", "did you mean 'high'"]),
    ("clauses:\n  idle:\n    min_hours: true\n", 5, ["clauses.idle.min_hours", "expected a number"]),
    ("clauses:\n  idle:\n    min_hours: .nan\n", 5, ["finite"]),
    ("clauses:\n  idle:\n    enabled: 'no'\n", 5, ["clauses.idle.enabled", "true or false"]),
    ("clauses:\n  tagging:\n    required_tags: team\n", 5, ["clauses.tagging.required_tags", "expected a list"]),
    ("teams:\n  vision: {budget_per_quarter: 5}\n", 4, ["teams.vision.lead", "required"]),
    ("teams:\n  vision: {lead: a@example.com, budget_per_quarter: -5}\n", 4,
     ["teams.vision.budget_per_quarter", "at least 0"]),
    ("waivers:\n  - {rule: GPU001, resource: x, reason: r, expires: 2027-01-01}\n", 4,
     ["waivers[0].owner", "required"]),
    ("waivers: {rule: GPU001}\n", 3, ["waivers", "expected a list"]),
    ("owner: again@example.com\n", 3, ["duplicate key 'owner'"]),
    ("clauses:\n\tidle: {}\n", 4, ["not valid YAML"]),
    ("x: !!python/object:os.system\n", 3, ["not valid YAML"]),
    ("---\npolicy: second document\n", 3, ["not valid YAML"]),
])
def test_more_policy_errors(body, line, words):
    with pytest.raises(InputError) as exc:
        parse_policy(BASE + body, "p.yml")
    assert exc.value.line == line
    assert str(exc.value).startswith(f"p.yml:{line}: ")
    for w in words:
        assert w in str(exc.value)


def test_impossible_waiver_date_is_an_input_error():
    with pytest.raises(InputError) as exc:
        parse_policy(BASE + "waivers:\n  - {rule: GPU001, resource: x, reason: r, owner: o, expires: 2027-02-30}\n",
                     "p.yml")
    assert exc.value.line == 4


def test_nested_alias_is_rejected():
    text = BASE + "teams:\n  a: &t {lead: x@example.com}\n  b: *t\n"
    with pytest.raises(InputError, match="alias") as exc:
        parse_policy(text, "p.yml")
    assert exc.value.line == 5


def test_billion_laughs_is_rejected_quickly():
    lol = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        lol += f"a{i}: &a{i} [*{'a' if i == 1 else f'a{i - 1}'}" + f", *{'a' if i == 1 else f'a{i - 1}'}" * 8 + "]\n"
    with pytest.raises(InputError, match="alias"):
        parse_policy(lol, "bomb.yml")


# ---- the schema ------------------------------------------------------------------------------------


def test_policy_schema_has_every_rules_clause_and_options():
    schema = policy_schema()
    clauses = schema.fields["clauses"].fields
    rules = all_rules()
    assert {r.id for r in rules} >= {"GPU001", "GPU002", "TAG001", "NET001", "SPOT001"}
    for r in rules:
        assert r.clause in clauses, r.id
        for option in r.options:
            assert option in clauses[r.clause].fields, (r.id, option)
        assert {"text", "severity", "enabled"} <= set(clauses[r.clause].fields)
    assert set(clauses) == {r.clause for r in rules}
    assert schema.fields["policy"].required and schema.fields["owner"].required


# ---- clauses drive the rules ------------------------------------------------------------------------


def test_disabled_clause_removes_its_rules(valid):
    ids = {r.id for r in configured_rules(valid)}
    assert "NET001" not in ids  # egress: enabled: false
    assert {"GPU001", "GPU002", "TAG001", "SPOT001"} <= ids


def test_all_rules_run_without_clauses():
    ids = {r.id for r in configured_rules(parse_policy(BASE))}
    assert ids == {r.id for r in all_rules()}


def test_clause_options_and_severity_override(valid):
    rules = {r.id: r for r in configured_rules(valid)}
    assert rules["GPU001"].severity is Severity.CRITICAL
    assert rules["GPU001"].opt("max_mean_util_pct") == 15
    assert rules["GPU001"].opt("min_hours") == 12
    assert rules["GPU002"].severity is Severity.MEDIUM  # the rule's own severity
    assert rules["TAG001"].opt("required_tags") == ["team", "owner"]
    assert rules["SPOT001"].opt("max_interval_min") == 30
    # the override is per configured rule, not on the class
    from auditor.registry import get_rule

    assert get_rule("GPU001").severity is Severity.HIGH


def test_select_rules_by_id_name_and_case(valid):
    assert [r.id for r in configured_rules(valid, ["TAG001"])] == ["TAG001"]
    assert [r.id for r in configured_rules(valid, ["idle-gpu"])] == ["GPU001"]
    assert [r.id for r in configured_rules(valid, ["spot001"])] == ["SPOT001"]
    # a selected rule whose clause is disabled still does not run
    assert configured_rules(valid, ["NET001"]) == []


# ---- waivers -----------------------------------------------------------------------------------------


def finding(rule: str = "GPU002", resource: str = "i-0abc123") -> Finding:
    return Finding(rule=rule, name="x", severity=Severity.MEDIUM, resource=resource, message="m",
                   entity_type="GpuAsset", cost=Decimal("10"))


def policy_with(*waivers: Waiver) -> Policy:
    p = parse_policy(BASE)
    p.waivers = list(waivers)
    return p


def waiver(rule="GPU002", resource="i-0abc*", expires=date(2027, 1, 31)) -> Waiver:
    return Waiver(rule, resource, "benchmark rig", "lead@example.com", expires, line=7)


def test_active_waiver_waives_a_matching_finding():
    f, other = finding(), finding(resource="i-0zzz")
    status = apply_waivers([f, other], policy_with(waiver()), date(2026, 10, 15))
    assert f.waived and f.waiver == {"reason": "benchmark rig", "owner": "lead@example.com", "expires": "2027-01-31"}
    assert not other.waived
    assert status == [{"rule": "GPU002", "resource": "i-0abc*", "reason": "benchmark rig", "owner": "lead@example.com",
                       "expires": "2027-01-31", "status": "active", "matched": 1, "line": 7}]
    assert f.to_dict()["waived"] is True


def test_waiver_is_active_on_its_expiry_day_and_expired_after():
    f = finding()
    assert apply_waivers([f], policy_with(waiver()), date(2027, 1, 31))[0]["status"] == "active"
    assert f.waived
    g = finding()
    status = apply_waivers([g], policy_with(waiver()), date(2027, 2, 1))
    assert not g.waived
    assert status[0]["status"] == "expired"
    assert status[0]["matched"] == 1


def test_expired_waiver_waives_nothing():
    f = finding()
    status = apply_waivers([f], policy_with(waiver(expires=date(2026, 6, 30))), date(2026, 10, 15))
    assert not f.waived and f.waiver is None
    assert status[0]["status"] == "expired"


def test_waiver_glob_matching():
    w = waiver(resource="arn:aws:sagemaker:*:training-job/bench-?")
    assert w.matches("GPU002", "arn:aws:sagemaker:us-east-1:1111:training-job/bench-1")
    assert not w.matches("GPU002", "arn:aws:sagemaker:us-east-1:1111:training-job/bench-10")
    assert not w.matches("GPU001", "arn:aws:sagemaker:us-east-1:1111:training-job/bench-1")
    exact = waiver(resource="i-0abc")
    assert exact.matches("GPU002", "i-0abc")
    assert not exact.matches("GPU002", "i-0abcd")
    assert not exact.matches("GPU002", "I-0ABC")  # case-sensitive
    fs = [finding(resource=r) for r in ("i-0abc1", "i-0abc2", "i-1abc")]
    status = apply_waivers(fs, policy_with(waiver()), date(2026, 10, 15))
    assert [f.waived for f in fs] == [True, True, False]
    assert status[0]["matched"] == 2


def test_waiver_only_for_its_rule():
    f = finding(rule="GPU001")
    status = apply_waivers([f], policy_with(waiver()), date(2026, 10, 15))
    assert not f.waived
    assert status[0]["status"] == "unused"
    assert status[0]["matched"] == 0


def test_unused_waiver():
    status = apply_waivers([], policy_with(waiver()), date(2026, 10, 15))
    assert status[0]["status"] == "unused"


def test_first_active_waiver_wins():
    f = finding()
    a, b = waiver(resource="i-0abc*"), waiver(resource="*", expires=date(2028, 1, 1))
    b.reason = "second"
    status = apply_waivers([f], policy_with(a, b), date(2026, 10, 15))
    assert f.waiver["reason"] == "benchmark rig"
    assert [s["status"] for s in status] == ["active", "active"]


def test_waivers_from_the_policy_file(valid):
    f1 = finding(resource="i-0abc999")
    f2 = finding(rule="GPU001", resource="i-0old")
    status = apply_waivers([f1, f2], valid, date(2026, 10, 15))
    assert f1.waived and not f2.waived
    assert [(s["rule"], s["status"], s["line"]) for s in status] == [("GPU002", "active", 42),
                                                                    ("GPU001", "expired", 47)]


def test_version_keeps_its_written_text():
    """YAML reads 2026.10 as the float 2026.1; the policy keeps the version as the team wrote it."""
    assert parse_policy(BASE + "version: 2026.10\n").version == "2026.10"


def test_record_of_keeps_keys_named_like_records_own_arguments():
    """A rule option may be named `doc` or `required`: record_of keeps it a key, where record(**options) would
    have taken it as the record's own doc or required flag."""
    from auditor.schema import Field, record_of

    options = {"doc": Field("str"), "required": Field("bool", default=True), "limit": Field("int")}
    made = record_of(options)
    assert (made.kind, made.fields, made.required, made.doc) == ("record", options, False, "")

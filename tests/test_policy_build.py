"""The policy built from its YAML with every field set: teams, clauses, waivers, attribution and outputs, each read
into the value it states; the defaults of what is left out or left empty; and every refusal of loading the file
(not found, not readable, not YAML, empty, not a mapping, a key that is not a name) in whole."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

import auditor.policy as pol
from auditor.errors import InputError
from auditor.model import Severity
from auditor.policy import Clause, Team, Waiver, load_policy, parse_policy

BASE = "policy: P\nowner: finops@example.com\n"

FULL = """\
policy: Full policy
version: 7
owner: finops@example.com
currency: GBP
attribution:
  team_tags: [team, squad]
  owner_tags: [owner, contact]
  project_tags: [project, app]
  job_tags: [run]
  token_tags: [tok]
  sample_tags: [smp]
  token_series: [train_tokens_total]
  sample_series: [train_samples_total]
  series_job_labels: [job, pod]
outputs: {mask_secrets: false}
teams:
  vision: {lead: v@example.com, budget_per_quarter: 1000.25, gpu_hours_per_quarter: 300, projects: [det, seg]}
  nlp: {lead: n@example.com}
clauses:
  idle:
    text: Idle machines stop.
    severity: low
    enabled: false
    max_mean_util_pct: 12
  egress:
waivers:
  - {rule: GPU002, resource: "i-1*", reason: rig, owner: v@example.com, expires: 2027-01-31}
  - {rule: idle-gpu, resource: "i-2", reason: demo, owner: n@example.com, expires: 2026-12-01}
"""


@pytest.fixture
def full():  # built for each test: mutation testing maps a test to the functions it calls, fixture included
    return parse_policy(FULL, "full.yml")


def test_header_and_outputs(full):
    assert (full.name, full.version, full.owner, full.currency, full.path) == \
        ("Full policy", "7", "finops@example.com", "GBP", "full.yml")
    assert full.mask_secrets is False
    assert full.rates is None


def test_attribution_every_list(full):
    assert full.team_tags == ["team", "squad"]
    assert full.owner_tags == ["owner", "contact"]
    assert full.project_tags == ["project", "app"]
    assert full.job_tags == ["run"]
    assert full.token_tags == ["tok"]
    assert full.sample_tags == ["smp"]
    assert full.token_series == ["train_tokens_total"]
    assert full.sample_series == ["train_samples_total"]
    assert full.series_job_labels == ["job", "pod"]


def test_teams_every_field(full):
    assert full.teams == {
        "vision": Team("vision", "v@example.com", Decimal("1000.25"), ["det", "seg"], Decimal("300")),
        "nlp": Team("nlp", "n@example.com", None, [], None),
    }
    assert full.team_of_project("seg") == "vision"
    assert full.team_of_project("nlp") is None


def test_clauses_every_field(full):
    # a clause left empty (`egress:`) is no clause: its rule runs with its defaults
    assert full.clauses == {"idle": Clause("idle", "Idle machines stop.", {"max_mean_util_pct": 12, "min_hours": 24},
                                           Severity.LOW, False)}


def test_a_clause_with_no_text_or_severity():
    clause = parse_policy(BASE + "clauses:\n  egress: {max_gb_per_month: 50}\n").clause("egress")
    assert clause == Clause("egress", "", {"max_gb_per_month": 50}, None, True)


def test_waivers_every_field_with_their_lines(full):
    assert full.waivers == [Waiver("GPU002", "i-1*", "rig", "v@example.com", date(2027, 1, 31), 27),
                            Waiver("GPU001", "i-2", "demo", "n@example.com", date(2026, 12, 1), 28)]


def test_waiver_matches_its_rule_and_glob_case_sensitively():
    w = Waiver("GPU002", "i-1*", "rig", "v@example.com", date(2027, 1, 31))
    assert w.matches("GPU002", "i-1abc") and w.matches("GPU002", "i-1")
    assert not w.matches("GPU001", "i-1abc")
    assert not w.matches("GPU002", "I-1abc")
    assert not w.expired(date(2027, 1, 31)) and w.expired(date(2027, 2, 1))


def test_defaults_of_what_is_left_out():
    p = parse_policy(BASE)
    assert (p.version, p.currency, p.mask_secrets, p.path) == ("1", "USD", True, "<policy>")
    assert (p.team_tags, p.owner_tags, p.project_tags) == (["team"], ["owner"], ["project"])
    assert p.job_tags == list(pol.JOB_TAGS) == ["job", "job-name", "job_name", "job-id", "job_id"]
    assert p.token_tags == list(pol.TOKEN_TAGS) == ["tokens", "train_tokens", "training_tokens"]
    assert p.sample_tags == list(pol.SAMPLE_TAGS) == ["samples", "train_samples", "training_samples"]
    assert p.series_job_labels == list(pol.SERIES_JOB_LABELS) == ["job_name", "exported_job", "job"]
    assert (p.token_series, p.sample_series) == ([], [])


def test_an_empty_currency_is_the_default():
    assert parse_policy(BASE + "currency: ''\n").currency == "USD"


def test_an_empty_list_of_tags_takes_the_default():
    p = parse_policy(BASE + "attribution: {team_tags: [], owner_tags: [], project_tags: [], job_tags: [], "
                            "token_tags: [], sample_tags: [], series_job_labels: []}\noutputs: {}\n")
    assert (p.team_tags, p.owner_tags, p.project_tags) == (["team"], ["owner"], ["project"])
    assert (p.job_tags, p.token_tags, p.sample_tags, p.series_job_labels) == \
        (list(pol.JOB_TAGS), list(pol.TOKEN_TAGS), list(pol.SAMPLE_TAGS), list(pol.SERIES_JOB_LABELS))
    assert p.mask_secrets is True


def test_a_budget_of_zero_is_allowed():
    team = parse_policy(BASE + "teams:\n  a: {lead: a@example.com, budget_per_quarter: 0, gpu_hours_per_quarter: 0}\n"
                        ).teams["a"]
    assert (team.budget_per_quarter, team.gpu_hours_per_quarter) == (Decimal(0), Decimal(0))


def test_every_key_is_a_name_as_written():
    """YAML 1.1 reads a team `no` as False, `on` as True and `007` as 7: no tag value equals them, so their spend
    went unattributed and their budgets unjudged, without a word."""
    p = parse_policy(BASE + "teams:\n" + "".join(f"  {name}: {{lead: a@example.com, budget_per_quarter: 10}}\n"
                                                  for name in ("no", "on", "007", "1.5", "~")))
    assert list(p.teams) == ["no", "on", "007", "1.5", "~"]
    assert p.teams["no"].budget_per_quarter == Decimal(10)


# ---- loading refusals, whole -------------------------------------------------------------------------------------


def refused(text: str) -> str:
    with pytest.raises(InputError) as exc:
        parse_policy(text, "p.yml")
    return str(exc.value)


@pytest.mark.heavy
@pytest.mark.parametrize(("text", "message"), [
    ("", "p.yml: the policy is empty"),
    ("# only a comment\n", "p.yml: the policy is empty"),
    ("- a\n- b\n", "p.yml:1: a policy is a YAML mapping with keys policy, owner, clauses, ..."),
    ("plain text\n", "p.yml:1: a policy is a YAML mapping with keys policy, owner, clauses, ..."),
    (BASE + "[a, b]: 1\n", "p.yml:3: a key is a list; every key of a policy is a name (text)"),
    (BASE + "teams:\n  ? {x: 1}\n  : 2\n", "p.yml:4: a key is a mapping; every key of a policy is a name (text)"),
    (BASE + "a\0b: 1\n", "p.yml:3: not valid YAML: the character U+0000 is not allowed in YAML text"),
    (BASE + "owner: [x\n", "p.yml:4: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    (BASE + "clauses:\n\tidle: {}\n", "p.yml:4: not valid YAML: found character '\\t' that cannot start any token"),
    ("[" * 5000, "p.yml: nested too deeply to be a policy"),
    ("{{{", "p.yml:1: not valid YAML: expected the node content, but found '<stream end>'"),
    (BASE + "---\npolicy: second\n", "p.yml:3: not valid YAML: but found another document"),
    (BASE + "x: !!python/object:os.system\n",
     "p.yml:3: not valid YAML: could not determine a constructor for the tag "
     "'tag:yaml.org,2002:python/object:os.system'"),
    (BASE + "teams:\n  a: &t {lead: x@example.com}\n  b: *t\n",
     "p.yml:5: YAML aliases (*name) are not allowed in a policy"),
])
def test_loading_refused_whole(text, message):
    assert refused(text) == message


def test_two_errors_are_both_named_in_line_order():
    assert refused("owner: x\nversion: [1]\n").split("\n") == [
        "p.yml:1: policy: is required",
        "p.yml:1: owner: 'x' is not an email address like lead@example.com",
        "p.yml:2: version: expected a single value, got a list",
    ]


def test_waiver_of_no_rule_suggests_the_nearest():
    assert refused(BASE + "waivers:\n  - {rule: GPU01, resource: x, reason: r, owner: o, expires: 2027-01-01}\n") \
        == "p.yml:4: waivers[0].rule: no rule 'GPU01'; did you mean 'GPU001'?"


def test_policy_file_not_found(tmp_path):
    with pytest.raises(InputError) as exc:
        load_policy(tmp_path / "nope.yml")
    assert str(exc.value) == f"{tmp_path / 'nope.yml'}: policy file not found"


def test_policy_file_not_utf8(tmp_path):
    path = tmp_path / "latin1.yml"
    path.write_bytes(b"policy: caf\xe9\n")
    with pytest.raises(InputError) as exc:
        load_policy(path)
    assert str(exc.value) == (f"{path}:1: the policy is not UTF-8 text: byte 0xe9, the line's byte 12 (Latin-1 or "
                              "Windows-1252?); save it as UTF-8")


def test_policy_file_a_folder(tmp_path):
    with pytest.raises(InputError) as exc:
        load_policy(tmp_path)
    assert str(exc.value) == f"{tmp_path}: cannot read the policy: Is a directory"


def test_policy_file_loaded_names_its_path(tmp_path):
    path = tmp_path / "gpu-policy.yml"
    path.write_text(BASE)
    assert load_policy(path).path == str(path)


# ---- every field's kind and limits, refused whole ----------------------------------------------------------------

TAG = "is not a tag key: 1 to 128 letters, digits, spaces and _ . : / = + - @, without leading or trailing spaces"
METRIC = "is not a Prometheus metric name: letters, digits, _ and :, not starting with a digit"


@pytest.mark.parametrize(("text", "message"), [
    *[(f"attribution: {{{key}: [' team']}}\n", f"attribution.{key}[0]: ' team' {TAG}")
      for key in ("team_tags", "owner_tags", "project_tags", "job_tags")],
    *[(f"attribution: {{{key}: [ok, 1]}}\n", f"attribution.{key}[1]: expected text, got a number 1")
      for key in ("token_tags", "sample_tags", "series_job_labels")],
    *[(f"attribution: {{{key}: [1st_total]}}\n", f"attribution.{key}[0]: '1st_total' {METRIC}")
      for key in ("token_series", "sample_series")],
    *[(f"attribution: {{{key}: text}}\n", f"attribution.{key}: expected a list, got text")
      for key in ("owner_tags", "project_tags", "job_tags", "token_tags", "sample_tags", "token_series",
                  "sample_series", "series_job_labels")],
    ("attribution: [team]\n", "attribution: expected a mapping, got a list"),
    ("outputs: [x]\n", "outputs: expected a mapping, got a list"),
    ("currency: 1\n", "currency: expected text, got a number 1"),
    ("rates_file: 5\n", "rates_file: expected text, got a number 5"),
    ("teams: [a]\n", "teams: expected a mapping, got a list"),
    ("teams:\n  a: {lead: 5}\n", "teams.a.lead: expected text, got a number 5"),
    ("teams:\n  a: {lead: a@example.com, projects: [1]}\n", "teams.a.projects[0]: expected text, got a number 1"),
    ("teams:\n  a: {lead: a@example.com, gpu_hours_per_quarter: many}\n",
     "teams.a.gpu_hours_per_quarter: expected a number, got text 'many'"),
    ("clauses:\n  idle: {text: 5}\n", "clauses.idle.text: expected text, got a number 5"),
    ("clauses:\n  idle: {severity: 3}\n", "clauses.idle.severity: expected text, got a number 3"),
    ("clauses:\n  idle: {severity: hihg}\n",
     "clauses.idle.severity: 'hihg' is not one of info, low, medium, high, critical; did you mean 'high'?"),
    ("clauses:\n  idle: {max_mean_util_pct: 150}\n", "clauses.idle.max_mean_util_pct: must be at most 100, got 150"),
])
def test_a_field_of_the_wrong_kind_refused_whole(text, message):
    line = 3 + text.count("\n") - 1
    assert refused(BASE + text) == f"p.yml:{line}: {message}"


@pytest.mark.parametrize("key", ["rule", "resource", "reason", "owner", "expires"])
def test_every_field_of_a_waiver_is_required(key):
    fields = {"rule": "GPU001", "resource": "i-1", "reason": "r", "owner": "o@example.com", "expires": "2027-01-01"}
    del fields[key]
    text = "waivers:\n  - {" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}\n"
    assert refused(BASE + text) == f"p.yml:4: waivers[0].{key}: is required"


# A team or a waiver written with nothing in it, or a waiver of an empty rule, was an internal error (TypeError,
# KeyError) where it is a mistake in the file: each is refused at its line.
@pytest.mark.parametrize(("text", "message"), [
    ("teams:\n  vision:\n  nlp: {lead: n@example.com}\n", "p.yml:4: teams.vision.lead: is required"),
    ("waivers:\n  - {rule: GPU001, resource: x, reason: r, owner: o, expires: 2027-01-01}\n  -\n",
     "p.yml:5: waivers[1]: is empty; a waiver has rule, resource, reason, owner and expires"),
    ("waivers:\n  - {rule: '', resource: x, reason: r, owner: o, expires: 2027-01-01}\n",
     "p.yml:4: waivers[0].rule: no rule ''"),
])
def test_an_empty_team_or_waiver_is_refused_at_its_line(text, message):
    assert refused(BASE + text) == message


NOT_ONE = "holds more than one address, or a name; give one address like lead@example.com"
NOT_AN_ADDRESS = "is not an email address like lead@example.com"


@pytest.mark.parametrize(("value", "problem"), [
    ('"o\\tx@example.com"', "'o\\tx@example.com' has a line break or a control character"),
    ('"a@example.com\\nb@example.com"', "'a@example.com\\nb@example.com' has a line break or a control character"),
    ("'a@example.com, b@example.com'", f"'a@example.com, b@example.com' {NOT_ONE}"),
    ("'a@example.com;b@example.com'", f"'a@example.com;b@example.com' {NOT_ONE}"),
    ("Lead <lead@example.com>", f"'Lead <lead@example.com>' {NOT_ONE}"),
    ("a@b@example.com", f"'a@b@example.com' {NOT_ONE}"),
    ("lead", f"'lead' {NOT_AN_ADDRESS}"),
    ("'@example.com'", f"'@example.com' {NOT_AN_ADDRESS}"),
    ("lead@", f"'lead@' {NOT_AN_ADDRESS}"),
    ("lead@localhost", f"'lead@localhost' {NOT_AN_ADDRESS}"),
    ("lead@.com.", f"'lead@.com.' {NOT_AN_ADDRESS}"),
    ("<lead@example.com>", f"'<lead@example.com>' {NOT_AN_ADDRESS}"),
    ("'\"lead\"@example.com'", f"'\"lead\"@example.com' {NOT_AN_ADDRESS}"),  # quoted: not as the mail is sent
])
def test_an_owner_that_is_not_one_address_refused_whole(value, problem):
    assert refused(f"policy: P\nowner: {value}\n") == f"p.yml:2: owner: {problem}"


@pytest.mark.parametrize("address", ["first.last+gpu@mail.example.co.uk", "Xavier@example.com", "ops@X.CO"])
def test_an_address_is_accepted(address):
    assert parse_policy(f"policy: P\nowner: {address}\n").owner == address


def test_every_waiver_is_checked_past_one_without_a_rule():
    text = ("waivers:\n  - {resource: x, reason: r, owner: o, expires: 2027-01-01}\n"
            "  - resource: y\n    reason: r\n    owner: o\n    expires: 2027-01-01\n    rule: GPU999\n")
    assert refused(BASE + text).split("\n") == ["p.yml:4: waivers[0].rule: is required",
                                                "p.yml:9: waivers[1].rule: no rule 'GPU999'"]


@pytest.mark.parametrize("given", ["team_tags: [squad]", "series_job_labels: [pod]"])
def test_attribution_keys_left_out_of_a_written_attribution_take_their_defaults(given):
    p = parse_policy(BASE + f"attribution: {{{given}}}\n")
    assert p.owner_tags == ["owner"] and p.project_tags == ["project"]
    assert p.team_tags == (["squad"] if "squad" in given else ["team"])
    assert p.series_job_labels == (["pod"] if "pod" in given else ["job_name", "exported_job", "job"])
    assert p.job_tags == ["job", "job-name", "job_name", "job-id", "job_id"]
    assert p.token_tags == ["tokens", "train_tokens", "training_tokens"]
    assert p.sample_tags == ["samples", "train_samples", "training_samples"]
    assert (p.token_series, p.sample_series) == ([], [])


def test_amounts_are_read_from_their_digits_as_written():
    # a float holds about 17 significant digits: these 21 would come back rounded
    p = parse_policy(BASE + "teams:\n  a: {lead: a@example.com, budget_per_quarter: 1234567890123.45678912}\n"
                            "rates: {date: 2026-09-30, source: ECB, per_unit: {EUR: 1.0842000000000000001}}\n")
    assert p.teams["a"].budget_per_quarter == Decimal("1234567890123.45678912")
    assert p.rates.per_unit == {"EUR": Decimal("1.0842000000000000001")}

"""The per-rule YAML cases in fixtures/rules: entities in, the exact set of flagged resource ids out."""

from __future__ import annotations

import re
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.model import Finding, Severity, money, primary
from auditor.providers.catalog import load_catalog
from auditor.registry import get_rule
from auditor.rule import PLATFORM_NAMES
from auditor.testing import Case, load_cases, load_options, make_entity, policy_with, run_case

REPO = Path(__file__).resolve().parents[1]
CASES_DIR = REPO / "fixtures" / "rules"
ALL_CASES = load_cases(CASES_DIR)
CASES = [c for c in ALL_CASES if c.refused is None]
REFUSED = [c for c in ALL_CASES if c.refused is not None]
FAILING = [c for c in CASES if c.fail]

# Rules whose findings state a monthly saving wherever a price is known.
SAVINGS_RULES = {"GPU001", "GPU002", "NET001", "GPU006"}

# Exact monthly savings (rounded to the cent) for some cases, worked out by hand from the catalog prices.
EXPECTED_SAVINGS: dict[str, dict[str, str]] = {
    # billed cost x 730 / billed hours
    "GPU001-idle_p5_with_billed_cost_fails": {"i-0idle": "40179.20"},
    "GPU001-billed_cost_scaled_by_billed_hours_fails": {"i-half": "500.00"},
    "GPU001-primary_currency_is_the_larger_amount_fails": {"i-eur": "900.00"},
    "GPU001-run_rate_uses_billed_hours_not_metric_hours_fails": {"i-partial-metrics": "40179.20"},
    # catalog on-demand price x 730 h: p5.48xlarge 55.04/h, Standard_NC24ads_A100_v4 3.673/h
    "GPU001-catalog_price_when_not_billed_fails": {"i-unbilled": "40179.20"},
    "GPU001-catalog_price_azure_fails": {
        "/subscriptions/0000/resourceGroups/ml/providers/Microsoft.Compute/virtualMachines/nc24": "2681.29"},
    # (current - recommended) x 730 h
    "GPU002-p4d_small_model_recommends_g6_48xlarge_fails": {"i-0big": "6285.01"},
    "GPU002-p5_tiny_load_recommends_g4dn_metal_fails": {"i-h5": "34467.68"},
    "GPU002-compute_boundary_picks_next_cheapest_fails": {"i-h9": "30433.41", "i-h10": "24148.40"},
    "GPU002-gcp_single_gpu_recommends_g2_standard_4_fails": {"1234567890123": "2165.40"},
    "GPU002-saving_exactly_min_monthly_savings_fails": {"i-g4dn8": "1204.50"},
    "GPU002-light_load_fits_an_eighth_of_an_l4_fails": {"i-g6-light": "440.04"},
    "GPU002-unpriced_partial_a10_is_never_the_target_fails": {"vm-nv36": "1952.02"},
    "GPU002-small_t4_load_moves_to_an_eighth_of_an_l4_fails": {"i-t4": "236.52"},
    # billed 16,030.80 over 730 h x (1 - 13.3504 / 21.96)
    "GPU002-billed_cost_times_price_ratio_fails": {"i-billed": "6285.01"},
    # billed cost x 730 / window hours (2208 in 2026-Q3)
    "NET001-docstring_example_fails": {"aws:111122223333:inter_region:us-east-1->us-west-2": "79.35"},
    "NET001-just_over_monthly_limit_fails": {"flow-over": "20.00"},
    # billed cost x 730 / billed hours: 12,523.776 x 730 / 2,208
    "GPU006-untagged_around_the_clock_all_quarter_fails": {"i-0forgotten000001": "4140.56"},
}


def by_id(case: Case) -> dict[str, dict]:
    return {str(e["id"]): e for e in case.entities}


def price_known(case: Case, entity: dict) -> bool:
    """Whether a finding on this entity can state a saving: a positive billed cost, or (GPU rules) a catalog price."""
    billed = primary(make_entity(get_rule(case.rule).entity, entity).cost)
    if billed:
        return billed[1] > 0
    if case.rule in ("GPU001", "GPU002"):
        t = load_catalog().instance(entity.get("provider"), entity.get("instance_type"))
        return t is not None and t.price_per_hour is not None  # an unpriced type: no saving, never $0
    return False


def check_findings(case: Case) -> list[Finding]:
    findings = run_case(case)
    flagged = {f.resource for f in findings}
    assert flagged == case.fail, (
        f"{case.path}: case {case.name}: flagged {sorted(flagged)}, expected {sorted(case.fail)}; "
        f"messages: {[f.message for f in findings]}")
    return findings


# --- the cases themselves ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    findings = check_findings(case)
    if case.message_contains:
        messages = [f.message for f in findings]
        assert any(case.message_contains in m for m in messages), \
            f"no message contains {case.message_contains!r}: {messages}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_options_pass_the_policy_check(case: Case) -> None:
    """What a case runs with is what a policy may say: the options load as `policy validate` loads them."""
    load_options(case)


@pytest.mark.parametrize("case", REFUSED, ids=[c.id for c in REFUSED])
def test_refused_option(case: Case) -> None:
    """The option is refused when the policy loads (every command loads it alike), naming the option's line."""
    with pytest.raises(InputError) as e:
        load_options(case)
    assert case.refused in str(e.value), str(e.value)
    text = policy_with(case).splitlines()
    clauses = text.index("clauses:") + 1
    quoted = case.refused.split("'")
    # the refused value as the message quotes it, else the option's own key
    value = quoted[1] if len(quoted) > 2 else case.refused.split(":")[0].split(".")[-1].split("[")[0]
    assert e.value.line is not None and e.value.line > clauses, str(e.value)
    assert value in text[e.value.line - 1], (str(e.value), text[e.value.line - 1])


def test_some_cases_assert_an_option_is_refused() -> None:
    assert {c.rule for c in REFUSED} >= {"TAG002", "GPU003", "REG001", "COM004"}


@pytest.mark.parametrize("case", FAILING, ids=[c.id for c in FAILING])
def test_findings_are_complete(case: Case) -> None:
    cls = get_rule(case.rule)
    findings = check_findings(case)
    for f in findings:
        assert f.rule == cls.id == case.rule
        assert f.name == cls.name
        assert isinstance(f.severity, Severity)
        assert f.resource and f.resource.strip()
        assert f.message and f.message.strip()
        assert f.remediation and f.remediation.strip()
        assert f.remediation in {cls.remediation(p) for p in (None, *PLATFORM_NAMES)}  # the job's platform's
        assert f.clause == cls.clause
        assert f.entity_type == cls.entity.__name__
        assert re.fullmatch(r"[0-9a-f]{16}", f.fingerprint), f.fingerprint
        assert f.currency and re.fullmatch(r"[A-Z]{3}", f.currency), f.currency
        d = f.to_dict()
        assert d["fingerprint"] == f.fingerprint and d["severity"] == cls.severity.label
    fingerprints = [f.fingerprint for f in findings]
    assert len(set(fingerprints)) == len(fingerprints), "two findings of one case share a fingerprint"


STATED_CASES = [c for c in FAILING if c.findings]
AMOUNTS = ("cost", "monthly_savings", "wasted")


@pytest.mark.parametrize("case", STATED_CASES, ids=[c.id for c in STATED_CASES])
def test_findings_state_what_the_case_says(case: Case) -> None:
    """A case's `findings:` (worked out from the rule's docs): each flagged resource's cost, saving, waste and
    currency to the cent, its whole message and its whole evidence."""
    found = {f.resource: f for f in check_findings(case)}
    for resource, stated in case.findings.items():
        f = found[resource]
        got = {k: f.severity.label if k == "severity" else getattr(f, k) for k in stated}
        want = {k: (None if v is None else Decimal(str(v))) if k in AMOUNTS else v for k, v in stated.items()}
        assert got == want, f"{case.id}: {resource}"


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Etc/GMT+12"])
@pytest.mark.parametrize("case", STATED_CASES, ids=[f"{c.id}-far-from-utc" for c in STATED_CASES])
def test_findings_are_the_same_far_from_utc(case: Case, zone: str, monkeypatch) -> None:
    """A rule reads a time as UTC, or in the zone its policy names, never in the machine's own: with the process
    14 hours ahead of UTC, or 12 behind, each case's findings state the same."""
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        test_findings_state_what_the_case_says(case)
    finally:
        monkeypatch.undo()
        time.tzset()


# Options that a rule checks itself when it is configured, where the policy's schema cannot (a time zone, a clock):
# (rule, options, the whole message)
REFUSED_WHEN_CONFIGURED = [
    ("OFF001", {"time_zone": "Mars/Olympus"},
     "clauses.off_hours.time_zone: unknown time zone 'Mars/Olympus' (an IANA name such as Europe/Berlin)"),
    ("OFF001", {"work_start": "8am"}, "clauses.off_hours.work_start: '8am' is not a time of day (HH:MM)"),
    ("OFF001", {"work_end": "24:01"}, "clauses.off_hours.work_end: '24:01' is not a time of day (HH:MM)"),
]


@pytest.mark.parametrize("rule, options, message", REFUSED_WHEN_CONFIGURED,
                         ids=[f"{r}-{'-'.join(o)}" for r, o, _ in REFUSED_WHEN_CONFIGURED])
def test_rule_refuses_options_when_configured(rule: str, options: dict, message: str) -> None:
    with pytest.raises(InputError) as e:
        get_rule(rule)(options)
    assert str(e.value) == message


SAVINGS_CASES = [c for c in FAILING if c.rule in SAVINGS_RULES]


@pytest.mark.parametrize("case", SAVINGS_CASES, ids=[c.id for c in SAVINGS_CASES])
def test_findings_with_a_known_price_carry_a_monthly_saving(case: Case) -> None:
    entities = by_id(case)
    findings = check_findings(case)
    for f in findings:
        if not price_known(case, entities[f.resource]) or f.evidence.get("forgotten") is False:
            continue  # GPU006's gap on an owned or busy machine: no waste, no saving
        assert isinstance(f.monthly_savings, Decimal), f"{f.resource}: monthly_savings {f.monthly_savings!r}"
        # Rounded once to the cent (Rule.finding): a saving under half a cent a month shows, and sums, as 0.00.
        assert f.monthly_savings == money(f.monthly_savings), f"{f.resource}: not rounded to the cent"
        assert f.monthly_savings > 0 or f.resource == "flow-tiny", f"{f.resource}: monthly_savings {f.monthly_savings}"
    expected = EXPECTED_SAVINGS.get(case.id)
    if expected:
        got = {f.resource: str(money(f.monthly_savings)) for f in findings if f.resource in expected}
        assert got == expected


# --- the case files themselves -------------------------------------------------------------------------------


def test_case_files_are_found() -> None:
    assert sorted({Path(c.path).name for c in ALL_CASES}) == sorted(p.name for p in CASES_DIR.glob("*.yml"))
    assert CASES, f"no cases in {CASES_DIR}"


def test_case_ids_are_unique() -> None:
    dupes = [k for k, n in Counter(c.id for c in ALL_CASES).items() if n > 1]
    assert not dupes


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_is_well_formed(case: Case) -> None:
    cls = get_rule(case.rule)
    assert Path(case.path).stem == cls.id == case.rule, f"{case.path} holds cases for {case.rule}"
    assert case.entities, "a case needs at least one entity"
    ids = [str(e["id"]) for e in case.entities]
    assert len(set(ids)) == len(ids), f"entity ids repeat: {ids}"
    assert case.fail <= set(ids), f"fail names ids that are no entity of the case: {sorted(case.fail - set(ids))}"
    unknown = set(case.options) - set(cls.options)
    assert not unknown, f"options {sorted(unknown)} are not options of {cls.id}"
    for data in case.entities:
        assert isinstance(make_entity(cls.entity, data), cls.entity)
    if case.message_contains:
        assert case.fail, "message_contains needs a failing case"
    unflagged = sorted(set(case.findings) - case.fail)
    assert not unflagged, f"findings names resources the case does not flag: {unflagged}"


def test_expected_savings_name_real_cases() -> None:
    known = {c.id: c for c in CASES}
    for case_id, expected in EXPECTED_SAVINGS.items():
        assert case_id in known, case_id
        assert set(expected) <= known[case_id].fail, case_id


@pytest.mark.parametrize("rule", ["GPU001", "GPU002", "TAG001", "NET001", "SPOT001"])
def test_each_rule_has_enough_cases(rule: str) -> None:
    cases = [c for c in CASES if c.rule == rule]
    assert sum(1 for c in cases if c.fail) >= 3, f"{rule}: fewer than 3 failing cases"
    assert sum(1 for c in cases if not c.fail) >= 3, f"{rule}: fewer than 3 passing cases"

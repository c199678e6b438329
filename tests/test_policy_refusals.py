"""Every policy field's refusals: each wrong value is one error naming the file, the line and the key, in the
words a policy author can act on. Written out case by case, so that a check removed from auditor/policy.py (the
currency code, a rate's sign, a lead's address, ...) fails here."""

from __future__ import annotations

import pytest

from auditor.errors import InputError, InputErrors
from auditor.policy import parse_policy

BASE = "policy: P\nowner: finops@example.com\n"
RATES = "rates: {date: 2026-09-30, source: ECB, per_unit: {%s}}\n"
TEAM = "teams:\n  vision: {%s}\n"
WAIVER = "waivers:\n  - {rule: GPU001, resource: i-1, reason: r, owner: o%s}\n"

# (name, policy text, line, the error after "p.yml:<line>: ")
CASES = [
    ("policy missing", "owner: finops@example.com\n", 1, "policy: is required"),
    ("owner missing", "policy: P\n", 1, "owner: is required"),
    ("owner not an address", "policy: P\nowner: finops\n", 2,
     "owner: 'finops' is not an email address like lead@example.com"),
    ("currency lower case", BASE + "currency: usd\n", 3, "currency: 'usd' is not an ISO 4217 code such as USD"),
    ("currency of four letters", BASE + "currency: USDX\n", 3, "currency: 'USDX' is not an ISO 4217 code"),
    ("currency of two letters", BASE + "currency: US\n", 3, "currency: 'US' is not an ISO 4217 code"),
    ("currency as a number", BASE + "currency: 840\n", 3, "currency: expected text, got a number 840"),
    ("rate for the policy's own currency", BASE + RATES % "USD: 1", 3,
     "rates.per_unit: 'USD' is the policy's own currency"),
    ("rate of zero", BASE + RATES % "EUR: 0", 3, "rates.per_unit: 'EUR' has rate 0; a rate is more than 0"),
    ("negative rate", BASE + RATES % "EUR: -1", 3, "rates.per_unit.EUR: must be at least 0, got -1"),
    ("rate code lower case", BASE + RATES % "eur: 1.1", 3, "rates.per_unit: 'eur' is not an ISO 4217 code"),
    ("rates without a date", BASE + "rates: {source: ECB, per_unit: {EUR: 1.1}}\n", 3, "rates.date: is required"),
    ("rates with a date that is not one", BASE + "rates: {date: soon, source: ECB, per_unit: {EUR: 1.1}}\n", 3,
     "rates.date: expected a date like 2027-01-31, got 'soon'"),
    ("rates and rates_file", BASE + RATES % "EUR: 1.1" + "rates_file: r.yml\n", 4,
     "give rates or rates_file, not both"),
    ("team without a lead", BASE + TEAM % "budget_per_quarter: 10", 4, "teams.vision.lead: is required"),
    ("team lead of two addresses", BASE + TEAM % "lead: 'a@b.com, c@d.com'", 4,
     "teams.vision.lead: 'a@b.com, c@d.com' holds more than one address"),
    ("negative budget", BASE + TEAM % "lead: a@example.com, budget_per_quarter: -1", 4,
     "teams.vision.budget_per_quarter: must be at least 0, got -1"),
    ("budget in words", BASE + TEAM % "lead: a@example.com, budget_per_quarter: lots", 4,
     "teams.vision.budget_per_quarter: expected a number, got text 'lots'"),
    ("negative GPU-hours", BASE + TEAM % "lead: a@example.com, gpu_hours_per_quarter: -5", 4,
     "teams.vision.gpu_hours_per_quarter: must be at least 0, got -5"),
    ("projects not a list", BASE + TEAM % "lead: a@example.com, projects: detector", 4,
     "teams.vision.projects: expected a list, got text"),
    ("unknown severity", BASE + "clauses:\n  idle: {severity: urgent}\n", 4,
     "clauses.idle.severity: 'urgent' is not one of info, low, medium, high, critical"),
    ("enabled not a boolean", BASE + "clauses:\n  idle: {enabled: maybe}\n", 4,
     "clauses.idle.enabled: expected true or false, got 'maybe'"),
    ("misspelt clause", BASE + "clauses:\n  idel: {}\n", 4, "clauses.idel: unknown key 'idel'; did you mean 'idle'?"),
    ("misspelt top-level key", BASE + "ownr: x\n", 3, "ownr: unknown key 'ownr'; did you mean 'owner'?"),
    ("mask_secrets not a boolean", BASE + "outputs: {mask_secrets: perhaps}\n", 3,
     "outputs.mask_secrets: expected true or false, got 'perhaps'"),
    ("waiver of no rule", BASE + WAIVER.replace("GPU001", "GPU999") % ", expires: 2026-12-31", 4,
     "waivers[0].rule: no rule 'GPU999'"),
    ("waiver without expiry", BASE + WAIVER % "", 4, "waivers[0].expires: is required"),
    ("waiver expiry not a date", BASE + WAIVER % ", expires: never", 4,
     "waivers[0].expires: expected a date like 2027-01-31, got 'never'"),
    ("team tags not a list", BASE + "attribution: {team_tags: team}\n", 3,
     "attribution.team_tags: expected a list, got text"),
    ("duplicate key", BASE + "currency: USD\ncurrency: EUR\n", 4, "duplicate key 'currency'"),
]


@pytest.mark.parametrize(("text", "line", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_field_is_refused_with_file_line_and_key(text, line, message):
    with pytest.raises((InputError, InputErrors)) as exc:
        parse_policy(text, "p.yml")
    assert str(exc.value).startswith(f"p.yml:{line}: {message}"), str(exc.value)


@pytest.mark.parametrize("currency", ["USD", "EUR", "JPY", "CAD"])
def test_a_valid_currency_is_kept(currency):
    assert parse_policy(BASE + f"currency: {currency}\n", "p.yml").currency == currency

"""The policy's exchange rates: given inline (`rates:`) or in a file (`rates_file:`), how an amount is converted into
the policy's currency with worked figures, how the report names them, and every refusal of a rates file in whole
(the rates file's own path and line)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from auditor.errors import InputError
from auditor.policy import Rates, parse_policy

BASE = "policy: P\nowner: finops@example.com\n"


def policy_in(tmp_path, text: str, rates: str | None = None, name: str = "rates.yml"):
    if rates is not None:
        (tmp_path / name).write_text(rates)
    path = tmp_path / "policy.yml"
    path.write_text(BASE + text)
    return parse_policy(path.read_text(), str(path))


def refusal(tmp_path, text: str, rates: str | bytes | None = None) -> str:
    if isinstance(rates, bytes):
        (tmp_path / "rates.yml").write_bytes(rates)
        rates = None
    with pytest.raises(InputError) as exc:
        policy_in(tmp_path, text, rates)
    return str(exc.value)


# ---- converting -------------------------------------------------------------------------------------------------


def test_inline_rates_convert_into_the_policys_currency():
    p = parse_policy(BASE + "currency: EUR\nrates: {date: 2026-09-30, source: ECB reference, "
                            "per_unit: {USD: 0.9215, GBP: 1.17}}\n", "p.yml")
    assert p.rates == Rates(date(2026, 9, 30), "ECB reference", {"USD": Decimal("0.9215"), "GBP": Decimal("1.17")})
    assert p.rates.path is None
    # 1,234.56 USD at 0.9215 EUR per USD: 1,111.104 + 26.54304 = 1,137.64704 EUR, exact (decimals, not floats)
    assert p.convert(Decimal("1234.56"), "USD") == Decimal("1137.647040")
    assert p.convert(Decimal("100"), "GBP") == Decimal("117.00")
    # the policy's own currency is kept as it is; a currency without a rate has no value in the policy's currency
    assert p.convert(Decimal("12.345"), "EUR") == Decimal("12.345")
    assert p.convert(Decimal("100"), "JPY") is None
    assert p.rates.describe("EUR") == "1 GBP = 1.17 EUR, 1 USD = 0.9215 EUR (ECB reference, 2026-09-30)"


def test_without_rates_only_the_policys_currency_converts():
    p = parse_policy(BASE, "p.yml")
    assert p.rates is None
    assert p.convert(Decimal("7.5"), "USD") == Decimal("7.5")
    assert p.convert(Decimal("7.5"), "EUR") is None


def test_rates_file_is_read_relative_to_the_policy(tmp_path):
    (tmp_path / "fx").mkdir()
    p = policy_in(tmp_path, "currency: USD\nrates_file: fx/rates.yml\n",
                  "date: 2026-10-01\nsource: finance team\nper_unit:\n  CAD: 0.73\n  EUR: 1.08\n", "fx/rates.yml")
    assert p.rates == Rates(date(2026, 10, 1), "finance team", {"CAD": Decimal("0.73"), "EUR": Decimal("1.08")},
                            str(tmp_path / "fx" / "rates.yml"))
    assert p.convert(Decimal("200"), "CAD") == Decimal("146.00")
    assert p.rates.describe("USD") == "1 CAD = 0.73 USD, 1 EUR = 1.08 USD (finance team, 2026-10-01)"


# ---- refusals, whole ---------------------------------------------------------------------------------------------


def test_rates_file_not_found(tmp_path):
    assert refusal(tmp_path, "rates_file: missing.yml\n") == \
        f"{tmp_path / 'missing.yml'}: cannot read the rates file: No such file or directory"


def test_rates_file_not_utf8(tmp_path):
    message = refusal(tmp_path, "rates_file: rates.yml\n", b"date: 2026-10-01\nsource: \xff\n")
    assert message == (f"{tmp_path / 'rates.yml'}:2: the rates file is not UTF-8 text: byte 0xff, the line's byte 9 "
                       "(Latin-1 or Windows-1252?); save it as UTF-8")


def test_rates_file_not_yaml_names_its_line(tmp_path):
    assert refusal(tmp_path, "rates_file: rates.yml\n", "date: 2026-10-01\nsource: [ECB\n") == \
        f"{tmp_path / 'rates.yml'}:3: not valid YAML: expected ',' or ']', but got '<stream end>'"


def test_rates_file_empty(tmp_path):
    assert refusal(tmp_path, "rates_file: rates.yml\n", "# nothing yet\n") == \
        f"{tmp_path / 'rates.yml'}: the rates file is empty"


def test_rates_file_field_checked_with_its_own_line(tmp_path):
    assert refusal(tmp_path, "rates_file: rates.yml\n",
                   "date: 2026-10-01\nsource: ECB\nper_unit:\n  EUR: lots\n") == \
        f"{tmp_path / 'rates.yml'}:4: per_unit.EUR: expected a number, got text 'lots'"


@pytest.mark.parametrize(("per_unit", "problem"), [
    ("  eur: 1.1\n", "'eur' is not an ISO 4217 code such as CAD"),
    ("  USD: 1\n", "'USD' is the policy's own currency"),
    ("  EUR: 0\n", "'EUR' has rate 0; a rate is more than 0"),
])
def test_rates_file_currency_refused_at_its_line(tmp_path, per_unit, problem):
    assert refusal(tmp_path, "rates_file: rates.yml\n",
                   "date: 2026-10-01\nsource: ECB\nper_unit:\n  CAD: 0.7\n" + per_unit) == \
        f"{tmp_path / 'rates.yml'}:5: rates.per_unit: {problem}"


@pytest.mark.parametrize(("rates", "line", "problem"), [
    ("rates:\n  date: 2026-09-30\n  source: ECB\n  per_unit:\n    CAD: 0.7\n    eur: 1.1\n", 8,
     "'eur' is not an ISO 4217 code such as CAD"),
    ("rates:\n  date: 2026-09-30\n  source: ECB\n  per_unit:\n    EUR: 0.0\n", 7,
     "'EUR' has rate 0.0; a rate is more than 0"),
    ("currency: EUR\nrates:\n  date: 2026-09-30\n  source: ECB\n  per_unit:\n    EUR: 1\n", 8,
     "'EUR' is the policy's own currency"),
])
def test_inline_rate_refused_whole_at_its_line(rates, line, problem):
    with pytest.raises(InputError) as exc:
        parse_policy(BASE + rates, "p.yml")
    assert str(exc.value) == f"p.yml:{line}: rates.per_unit: {problem}"


def test_currency_refused_whole():
    with pytest.raises(InputError) as exc:
        parse_policy(BASE + "currency: usd\n", "p.yml")
    assert str(exc.value) == "p.yml:3: currency: 'usd' is not an ISO 4217 code such as USD"


def test_rates_and_rates_file_refused_whole_at_the_files_line():
    with pytest.raises(InputError) as exc:
        parse_policy(BASE + "rates_file: r.yml\nrates: {date: 2026-09-30, source: ECB, per_unit: {EUR: 1.1}}\n",
                     "p.yml")
    assert str(exc.value) == "p.yml:3: give rates or rates_file, not both"


# A control character or an alias in the rates file was said without the file (a YAML alias) or as the YAML library's
# text of several lines: each names the rates file and its line, as the policy's own do.
@pytest.mark.parametrize(("rates", "message"), [
    ("date: 2026-10-01\nsource: a\x01b\n", "2: not valid YAML: the character U+0001 is not allowed in YAML text"),
    ("date: &d 2026-10-01\nsource: *d\nper_unit: {EUR: 1}\n",
     "2: YAML aliases (*name) are not allowed in a rates file"),
    ("date: 2026-10-01\nsource: !!python/name:os.system x\n",
     "2: not valid YAML: could not determine a constructor for the tag 'tag:yaml.org,2002:python/name:os.system'"),
    ("date: 2026-10-01\n---\nsource: x\n", "2: not valid YAML: but found another document"),
])
def test_rates_file_yaml_refused_whole_at_its_line(tmp_path, rates, message):
    assert refusal(tmp_path, "rates_file: rates.yml\n", rates) == f"{tmp_path / 'rates.yml'}:{message}"

"""`gpu-auditor export --focus` (auditor/tables/focus_export.py): the audit's attributed costs as a FOCUS dataset,
CSV and Parquet, one row per charge, that adds up to the bill exactly, passes the FinOps Foundation's
focus-validator, and carries each charge's team, project, namespace and job in `x_` columns."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections import defaultdict
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import REPO, _missing

from auditor.cli import cli
from auditor.core import run_audit
from auditor.policy import load_policy
from auditor.window import parse_quarter

DEMO = REPO / "fixtures" / "demo"
OVERRIDES = REPO / "tests" / "focus_validator_overrides.yml"
FOCUS_1_0 = ["BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart",
             "ChargeCategory", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "EffectiveCost",
             "InvoiceIssuerName", "ListCost", "ProviderName", "PublisherName", "ResourceId", "ServiceCategory",
             "ServiceName", "Tags"]


def export(out: Path, billing: Path, policy: Path = DEMO / "policy.yml", *extra: str) -> str:
    result = CliRunner().invoke(cli, ["export", "--focus", str(out), "--policy", str(policy), "--quarter",
                                      "2026-Q3", *extra, str(billing)])
    assert result.exit_code == 0, result.output
    return result.output


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def billed(items: list[dict[str, str]], key: str = "BillingCurrency") -> dict[str, Decimal]:
    out: dict[str, Decimal] = defaultdict(Decimal)
    for r in items:
        out[r[key]] += Decimal(r["BilledCost"])
    return dict(out)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("focus")
    export(out, DEMO / "billing", DEMO / "policy.yml", "--inventory", str(DEMO / "inventory.json"))
    return out


def test_demo_adds_up_to_the_bill_exactly(demo):
    doc = run_audit(load_policy(DEMO / "policy.yml"), [DEMO / "billing"], DEMO / "inventory.json",
                    parse_quarter("2026-Q3"), date(2026, 10, 15)).to_dict()
    totals = billed(rows(demo / "focus.csv"))
    cents = {c: str(v.quantize(Decimal("0.01"))) for c, v in totals.items()}
    assert cents == {"USD": "341964.32"}  # the README's total spend
    assert cents == {c: str(v) for c, v in doc["summary"]["billed_cost"].items()}
    parquet = duckdb.sql(f"SELECT BillingCurrency, sum(BilledCost), count(*) FROM '{demo / 'focus.parquet'}' "
                         "GROUP BY 1").fetchall()
    assert parquet == [("USD", totals["USD"], len(rows(demo / "focus.csv")))]  # the same rows, to the last digit


def test_demo_columns_are_focus_first_then_the_allocation(demo):
    header = next(csv.reader((demo / "focus.csv").open(encoding="utf-8")))
    assert set(FOCUS_1_0) <= set(header)
    custom = [i for i, c in enumerate(header) if c.startswith("x_")]
    assert custom == list(range(len(header) - len(custom), len(header)))  # x_ columns after the FOCUS ones
    assert header[-7:] == ["x_Team", "x_Project", "x_Namespace", "x_Job", "x_CostCategory", "x_InstanceType",
                           "x_GpuModel"]


def test_demo_team_allocation_is_the_audits(demo):
    """Per team the rows add up to the audit's spend by team (rounded once there, to the cent)."""
    doc = run_audit(load_policy(DEMO / "policy.yml"), [DEMO / "billing"], DEMO / "inventory.json",
                    parse_quarter("2026-Q3"), date(2026, 10, 15)).to_dict()
    per_team = billed(rows(demo / "focus.csv"), "x_Team")
    by_team = {t: Decimal(v["USD"]) for t, v in doc["summary"]["by_team"].items()}
    assert set(per_team) == set(by_team)
    for team, amount in per_team.items():
        assert abs(amount - by_team[team]) < Decimal("0.01"), team


def test_demo_jobs_are_named(demo):
    jobs = {r["x_Job"]: r["ResourceId"] for r in rows(demo / "focus.csv") if r["x_Job"]}
    assert "vision-detector-v3-train-0805" in jobs
    assert jobs["vision-detector-v3-train-0805"].endswith("vision-detector-v3-train-0805")


def _charge(template: dict[str, str], cost: str, tags: dict[str, str], resource: str, day: int,
            currency: str = "USD") -> dict[str, str]:
    return {**template, "BilledCost": cost, "EffectiveCost": cost, "ListCost": cost, "ContractedCost": cost,
            "BillingCurrency": currency, "Tags": json.dumps(tags), "ResourceId": resource,
            "ChargePeriodStart": f"2026-07-{day:02d}T00:00:00Z", "ChargePeriodEnd": f"2026-07-{day + 1:02d}T00:00:00Z"}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """Four charges written for the test, in two currencies: the right allocation of each is stated below."""
    folder = tmp_path_factory.mktemp("written")
    demo_rows = rows(DEMO / "billing" / "focus-azure-2026-q3.csv")
    template, fields = demo_rows[0], list(demo_rows[0])
    vm = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/"
    charges = [
        _charge(template, "100.005", {"team": "nlp"}, vm + "a", 1),
        _charge(template, "0.015", {"project": "detector"}, vm + "b", 2),  # the policy maps detector to vision
        _charge(template, "12.34", {"namespace": "research", "team": "vision"}, vm + "aks-gpu-0", 3),
        _charge(template, "7.5", {}, vm + "c", 4, "EUR"),
    ]
    with (folder / "billing.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        w.writerows(charges)
    out = folder / "out"
    export(out, folder / "billing.csv")
    return out


def test_written_charges_are_allocated_as_stated(written):
    got = [(r["x_Team"], r["x_Project"], r["x_Namespace"], r["BillingCurrency"], Decimal(r["BilledCost"]))
           for r in rows(written / "focus.csv")]
    assert got == [("nlp", "", "", "USD", Decimal("100.005")),
                   ("vision", "detector", "", "USD", Decimal("0.015")),
                   ("vision", "", "research", "USD", Decimal("12.34")),
                   ("(unattributed)", "", "", "EUR", Decimal("7.5"))]
    # 100.005 + 0.015 + 12.34: each charge unrounded, so the sum is the bill's, not a sum of rounded cents
    assert billed(rows(written / "focus.csv")) == {"USD": Decimal("112.36"), "EUR": Decimal("7.5")}


def test_bad_window_is_one_line_and_writes_nothing(tmp_path):
    result = CliRunner().invoke(cli, ["export", "--focus", str(tmp_path / "out"), "--policy",
                                      str(DEMO / "policy.yml"), "--quarter", "2026-Q9", str(DEMO / "billing")])
    assert result.exit_code == 2 and "2026-Q9" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


# --- the FinOps Foundation's validator -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def focus_validator() -> Path:
    """focus-validator 1.0.0 (PyPI), in its own venv: $GPU_AUDITOR_FOCUS_VALIDATOR, else .venv-focus (.ci/run)."""
    exe = Path(os.environ.get("GPU_AUDITOR_FOCUS_VALIDATOR") or REPO / ".venv-focus" / "bin" / "focus-validator")
    if not exe.is_file():
        _missing(f"focus-validator not found at {exe} (python3 -m venv .venv-focus && .venv-focus/bin/pip install "
                 "'.[focus-validator]'; or set GPU_AUDITOR_FOCUS_VALIDATOR)", "focus")
    return exe


def validate(exe: Path, data: Path) -> str:
    """The validator's verdict. It reads its list of currency codes from a path relative to the working
    directory (focus_validator/utils/currency_codes.csv), so it runs from the folder that holds its package."""
    site = next((exe.parent.parent / "lib").glob("python3*/site-packages"))
    done = subprocess.run([str(exe), "--data-file", str(data), "--validate-version", "1.0", "--override-file",
                           str(OVERRIDES)], cwd=site, capture_output=True, text=True, timeout=600)
    return done.stdout + done.stderr


@pytest.mark.slow
def test_focus_validator_passes_the_csv(focus_validator, demo):
    out = validate(focus_validator, demo / "focus.csv")
    assert "Validation succeeded." in out, out[-3000:]


DECIMALS = ["BilledCost", "ConsumedQuantity", "ContractedCost", "ContractedUnitPrice", "EffectiveCost", "ListCost",
            "ListUnitPrice", "PricingQuantity"]


@pytest.mark.slow
def test_focus_validator_on_the_parquet_fails_only_its_float_check(focus_validator, demo):
    """The Parquet keeps money exact, as DECIMAL(38, 18): focus-validator 1.0.0 reads it with pandas as Python
    Decimals and its IsDecimal rule asks for a pandas float column. Every other rule passes."""
    described = {r[0]: r[1] for r in duckdb.sql(f"DESCRIBE SELECT * FROM '{demo / 'focus.parquet'}'").fetchall()}
    assert {described[c] for c in DECIMALS} == {"DECIMAL(38,18)"}
    out = validate(focus_validator, demo / "focus.parquet")
    failed = sorted(line.split()[0] for line in out.splitlines() if line.endswith(" failed:"))
    assert failed == [f"{c}_IsDecimal" for c in DECIMALS], out[-3000:]


@pytest.mark.slow
def test_focus_validator_fails_a_broken_export(focus_validator, demo, tmp_path):
    """The validator does judge: a cost that is no decimal and a currency that is no ISO 4217 code fail it."""
    items = rows(demo / "focus.csv")
    items[0]["BilledCost"] = "abc"
    items[1]["BillingCurrency"] = "XXZ"
    broken = tmp_path / "broken.csv"
    with broken.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(items[0]))
        w.writeheader()
        w.writerows(items)
    out = validate(focus_validator, broken)
    assert "Validation failed" in out, out[-3000:]
    assert "BilledCost_IsDecimal failed" in out and "BillingCurrency_IsCurrencyCode failed" in out

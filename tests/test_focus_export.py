"""`gpu-auditor export --focus` (auditor/tables/focus_export.py): the audit's attributed costs as a FOCUS 1.3
dataset, CSV and Parquet and its metadata, one row per charge, that adds up to the bill exactly, passes the FinOps
Foundation's focus-validator (1.0.0: it checks the FOCUS 1.0 columns) and our own checks of the 1.3 columns
(tests/focus_spec.py), and carries each charge's team, project, namespace and job in FOCUS 1.3's allocation
columns and in `x_` columns."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections import defaultdict
from datetime import date
from decimal import Decimal
from pathlib import Path

import billing_csv
import duckdb
import focus_spec
import pytest
from click.testing import CliRunner
from conftest import REPO, _missing

from auditor.cli import cli

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


@pytest.mark.heavy
def test_demo_adds_up_to_the_bill_exactly(demo, demo_audit_result):
    doc = demo_audit_result.to_dict()  # the demo, 2026-Q3, today 2026-10-15, with the inventory (conftest)
    totals = billed(rows(demo / "focus.csv"))
    cents = {c: str(v.quantize(Decimal("0.01"))) for c, v in totals.items()}
    assert cents == {"USD": "341964.32"}  # the README's total spend
    assert cents == {c: str(v) for c, v in doc["summary"]["billed_cost"].items()}
    parquet = duckdb.sql(f"SELECT BillingCurrency, sum(BilledCost), count(*) FROM '{demo / 'focus.parquet'}' "
                         "GROUP BY 1").fetchall()
    assert parquet == [("USD", totals["USD"], len(rows(demo / "focus.csv")))]  # the same rows, to the last digit


@pytest.mark.heavy
def test_demo_columns_are_focus_first_then_the_allocation(demo):
    header = next(csv.reader((demo / "focus.csv").open(encoding="utf-8")))
    assert set(FOCUS_1_0) <= set(header)
    custom = [i for i, c in enumerate(header) if c.startswith("x_")]
    assert custom == list(range(len(header) - len(custom), len(header)))  # x_ columns after the FOCUS ones
    assert header[-7:] == ["x_Team", "x_Project", "x_Namespace", "x_Job", "x_CostCategory", "x_InstanceType",
                           "x_GpuModel"]


def test_demo_team_allocation_is_the_audits(demo, demo_audit_result):
    """Per team the rows add up to the audit's spend by team (rounded once there, to the cent)."""
    doc = demo_audit_result.to_dict()  # the demo, 2026-Q3, today 2026-10-15, with the inventory (conftest)
    per_team = billed(rows(demo / "focus.csv"), "x_Team")
    by_team = {t: Decimal(v["USD"]) for t, v in doc["summary"]["by_team"].items()}
    assert set(per_team) == set(by_team)
    for team, amount in per_team.items():
        assert abs(amount - by_team[team]) < Decimal("0.01"), team


@pytest.mark.heavy
def test_demo_jobs_are_named(demo):
    jobs = {r["x_Job"]: r for r in rows(demo / "focus.csv") if r["x_Job"]}
    assert "vision-detector-v3-train-0805" in jobs
    job = jobs["vision-detector-v3-train-0805"]
    assert job["ResourceId"].endswith("vision-detector-v3-train-0805")
    inventory = {j["name"]: j["id"] for j in json.loads((DEMO / "inventory.json").read_text())["jobs"]}
    assert (job["AllocatedResourceId"], job["AllocatedResourceName"]) == (
        "job/" + inventory["vision-detector-v3-train-0805"], "vision-detector-v3-train-0805")
    assert json.loads(job["AllocatedTags"])["gpu-auditor/job"] == "vision-detector-v3-train-0805"


def test_demo_passes_our_focus_1_3_checks(demo):
    """Each allocated charge is the whole of its origin charge (itself): AllocatedRatio 1 per row."""
    items = rows(demo / "focus.csv")
    assert focus_spec.errors(items, origin=id) == []
    allocated = [r for r in items if r["AllocatedMethodId"]]
    assert {r["AllocatedMethodId"] for r in allocated} == {"gpu-auditor-attribution"}
    assert 0 < len(allocated) < len(items)  # the unattributed and tax charges are allocated to nothing
    for r in items:  # the allocation columns say what the x_ columns say
        tags = json.loads(r["AllocatedTags"] or "{}")
        team = r["x_Team"] if r["x_Team"] not in ("(unattributed)", "(tax)") else ""
        assert (tags.get("gpu-auditor/team", ""), tags.get("gpu-auditor/namespace", ""),
                tags.get("gpu-auditor/job", "")) == (team, r["x_Namespace"], r["x_Job"])
        assert bool(r["AllocatedMethodId"]) == bool(team or r["x_Namespace"] or r["x_Job"])
        assert r["ServiceProviderName"] == r["HostProviderName"] == r["ProviderName"] != ""


def test_our_focus_1_3_checks_judge(demo):
    """Each rule of tests/focus_spec.py fails a row that breaks it."""
    row = next(r for r in rows(demo / "focus.csv") if r["AllocatedMethodId"])
    broken = {
        "AllocatedResourceName": {**row, "AllocatedResourceName": ""},
        "AllocatedMethodDetails: not an object": {**row, "AllocatedMethodDetails": "[1]"},
        "AllocatedRatio outside": {**row, "AllocatedMethodDetails": '{"Elements":[{"AllocatedRatio":2}]}'},
        "UsageQuantity without": {**row, "AllocatedMethodDetails": '{"Elements":[{"AllocatedRatio":1,'
                                                                   '"UsageQuantity":3}]}'},
        "not prefixed x_": {**row, "AllocatedMethodDetails": '{"Elements":[{"AllocatedRatio":1,"Pods":3}]}'},
        "already in Tags": {**row, "Tags": '{"gpu-auditor/team":"x"}'},
        "a value neither": {**row, "AllocatedTags": '{"gpu-auditor/team":3}'},
        "no AllocatedMethodId": {**row, "AllocatedMethodId": ""},
        "ServiceProviderName: null": {**row, "ServiceProviderName": ""},
    }
    for expected, bad in broken.items():
        found = focus_spec.row_errors(bad)
        assert any(expected in e for e in found), (expected, found)
    half = {**row, "AllocatedMethodDetails": '{"Elements":[{"AllocatedRatio":0.5}]}'}
    assert focus_spec.ratio_errors([half], origin=id) != []
    assert focus_spec.ratio_errors([half, dict(half)], origin=lambda r: "node") == []  # two halves of one origin


def test_metadata_names_the_version_and_every_column(demo):
    schema = json.loads((demo / "focus-metadata.json").read_text())["Schema"]
    assert schema["FocusVersion"] == "1.3"
    header = next(csv.reader((demo / "focus.csv").open(encoding="utf-8")))
    assert [c["ColumnName"] for c in schema["ColumnDefinition"]] == header
    types = {c["ColumnName"]: c["DataType"] for c in schema["ColumnDefinition"]}
    assert (types["BilledCost"], types["ChargePeriodStart"], types["AllocatedTags"], types["ResourceId"]) == (
        "DECIMAL", "DATETIME", "JSON", "STRING")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """Four charges written for the test, in two currencies: the right allocation of each is stated below."""
    folder = tmp_path_factory.mktemp("written")
    vm = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/"
    billing_csv.write(folder / "billing.csv", [
        billing_csv.charge(vm + "a", date(2026, 7, 1), {"team": "nlp"}, "100.005"),
        billing_csv.charge(vm + "b", date(2026, 7, 2), {"project": "detector"}, "0.015"),  # detector: vision's
        billing_csv.charge(vm + "aks-gpu-0", date(2026, 7, 3), {"namespace": "research", "team": "vision"}, "12.34"),
        billing_csv.charge(vm + "c", date(2026, 7, 4), {}, "7.5", BillingCurrency="EUR")])
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
    # FOCUS 1.3: the most specific of namespace and team is what the charge is allocated to; the EUR charge has
    # neither, so it is no allocated charge
    allocation = [(r["AllocatedResourceId"], r["AllocatedResourceName"], r["AllocatedTags"])
                  for r in rows(written / "focus.csv")]
    assert allocation == [
        ("team/nlp", "nlp", '{"gpu-auditor/team":"nlp"}'),
        ("team/vision", "vision", '{"gpu-auditor/team":"vision","gpu-auditor/project":"detector"}'),
        ("namespace/research", "research", '{"gpu-auditor/team":"vision","gpu-auditor/namespace":"research"}'),
        ("", "", "")]
    assert focus_spec.errors(rows(written / "focus.csv"), origin=id) == []
    # 100.005 + 0.015 + 12.34: each charge unrounded, so the sum is the bill's, not a sum of rounded cents
    assert billed(rows(written / "focus.csv")) == {"USD": Decimal("112.36"), "EUR": Decimal("7.5")}


def test_bad_window_is_one_line_and_writes_nothing(tmp_path):
    result = CliRunner().invoke(cli, ["export", "--focus", str(tmp_path / "out"), "--policy",
                                      str(DEMO / "policy.yml"), "--quarter", "2026-Q9", str(DEMO / "billing")])
    assert result.exit_code == 2 and "2026-Q9" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_window_with_no_billing_says_so(tmp_path):
    """The dataset of a quarter the billing does not reach: written (a header, no charge), and said to be empty, as
    the audit says; it printed "BilledCost " and nothing after, without a warning."""
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["export", "--focus", str(out), "--policy", str(DEMO / "policy.yml"),
                                      "--quarter", "2026-Q1", str(REPO / "fixtures" / "billing" / "cur-gpu-spot.csv")])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "FOCUS 1.3 dataset, 2026-Q1: 0 charges, BilledCost –"
    assert result.stderr == "warning: no billing lines fall in the export window 2026-Q1: the dataset is empty\n"
    assert rows(out / "focus.csv") == []


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

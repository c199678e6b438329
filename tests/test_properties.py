"""Properties over generated exports (Hypothesis): small AWS CUR and FOCUS files with exact decimal costs of
either sign, several currencies, arbitrary tag text (commas, quotes, any script), GPU, CPU, storage, transfer
and credit lines.

- Reading a generated file, or one damaged at random, raises nothing but the auditor's InputError.
- The total of a file is, per currency, exactly the Decimal sum of its cost column.
- Shuffling the lines, or splitting the file into parts, changes no total and no finding; one file holding two
  exports' lines totals what the two total apart.
- Through the command line, a generated export, damaged or not, ends in exit 0 with a complete new output set, or
  exit 2 with one line naming the file and the previous set untouched: never a traceback, never a mixed set.

Example counts are kept small so the suite stays fast; Hypothesis remembers and replays any failure it finds.
"""

from __future__ import annotations

import csv
import json
import random
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from auditor.core import run_audit
from auditor.errors import InputError
from auditor.policy import parse_policy
from auditor.tables.store import Store
from auditor.window import parse_quarter

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# The properties that run three audits or more an example: fewer examples a run (each run draws new ones).
AUDITS = settings(SETTINGS, max_examples=8)
JULY = datetime(2026, 7, 1)
POLICY = parse_policy("policy: Properties\nowner: finops@example.com\ncurrency: USD\n"
                      "teams:\n  vision: {lead: lead@example.com, budget_per_quarter: 100}\n", "properties.yml")

# exact amounts, either sign, up to 8 decimal places and 10^12 in size (DECIMAL(38,18) holds their sums exactly)
MONEY = st.builds(lambda n, places: Decimal(n).scaleb(-places),
                  st.one_of(st.integers(0, 10**12), st.integers(-10**12, 10**12)), st.integers(0, 8))
QUANTITY = st.builds(lambda n: Decimal(n).scaleb(-3), st.integers(0, 5_000_000))
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
TAG = st.one_of(st.sampled_from(["", "vision", "nlp", "Vision ", "a,b", 'say "hi"']), TEXT)
LINE = st.fixed_dictionaries({
    "kind": st.sampled_from(["gpu", "gpu", "cpu", "transfer", "storage", "credit"]),
    "cost": MONEY,
    "currency": st.sampled_from(["USD", "USD", "EUR", "JPY"]),
    "resource": st.sampled_from(["i-0a", "i-0b", "vol-0c", "", "arn:aws:sagemaker:us-east-1:1:training-job/j-1"]),
    "account": st.sampled_from(["111111111111", "222222222222"]),
    "quantity": QUANTITY,
    "team": TAG, "owner": TAG, "project": TAG,
})


@st.composite
def exports(draw, min_lines: int = 1, max_lines: int = 24) -> list[dict]:
    """Lines of one export; each starts in its own hour of July 2026, so no two lines are the same line."""
    lines = draw(st.lists(LINE, min_size=min_lines, max_size=max_lines))
    hours = draw(st.lists(st.integers(0, 24 * 31 - 1), min_size=len(lines), max_size=len(lines), unique=True))
    for line, hour in zip(lines, hours, strict=True):
        line["start"] = JULY + timedelta(hours=hour)
    return lines


CUR_KINDS = {  # line item type, product code, usage type, product family, instance type, unit
    "gpu": ("Usage", "AmazonEC2", "BoxUsage:p4d.24xlarge", "Compute Instance", "p4d.24xlarge", "Hrs"),
    "cpu": ("Usage", "AmazonEC2", "BoxUsage:m5.large", "Compute Instance", "m5.large", "Hrs"),
    "transfer": ("Usage", "AWSDataTransfer", "USE1-USW2-AWS-Out-Bytes", "Data Transfer", "", "GB"),
    "storage": ("Usage", "AmazonEC2", "EBS:VolumeUsage.gp3", "Storage", "", "GB-Mo"),
    "credit": ("Credit", "AmazonEC2", "BoxUsage:p4d.24xlarge", "Compute Instance", "p4d.24xlarge", "Hrs"),
}
FOCUS_KINDS = {  # charge category, service category, description, unit
    "gpu": ("Usage", "Compute", "$32.7726 per On Demand Linux p4d.24xlarge Instance Hour", "Hours"),
    "cpu": ("Usage", "Compute", "$0.096 per On Demand Linux m5.large Instance Hour", "Hours"),
    "transfer": ("Usage", "Networking", "$0.02 per GB - US East (N. Virginia) data transfer to US West (Oregon)",
                 "GB"),
    "storage": ("Usage", "Storage", "$0.08 per GB-month of General Purpose SSD (gp3) provisioned storage", "GB-Mo"),
    "credit": ("Credit", "Compute", "Promotional credit", "Hours"),
}


def cur_rows(lines: list[dict]) -> list[list[str]]:
    header = ["identity/LineItemId", "bill/PayerAccountId", "lineItem/UsageAccountId", "lineItem/LineItemType",
              "lineItem/UsageStartDate", "lineItem/UsageEndDate", "lineItem/ProductCode", "lineItem/UsageType",
              "lineItem/ResourceId", "lineItem/UsageAmount", "lineItem/CurrencyCode", "lineItem/UnblendedCost",
              "product/productFamily", "product/instanceType", "product/regionCode", "pricing/unit",
              "resourceTags/user:team", "resourceTags/user:owner", "resourceTags/user:project"]
    rows = [header]
    for i, x in enumerate(lines):
        kind, code, usage, family, itype, unit = CUR_KINDS[x["kind"]]
        rows.append([f"li-{i}", "999999999999", x["account"], kind, f"{x['start']:%Y-%m-%dT%H:%M:%SZ}",
                     f"{x['start'] + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}", code, usage, x["resource"],
                     str(x["quantity"]), x["currency"], str(x["cost"]), family, itype, "us-east-1", unit,
                     x["team"], x["owner"], x["project"]])
    return rows


def focus_rows(lines: list[dict]) -> list[list[str]]:
    header = ["BilledCost", "EffectiveCost", "ListCost", "BillingCurrency", "ChargePeriodStart", "ChargePeriodEnd",
              "ChargeCategory", "ChargeDescription", "ProviderName", "ServiceCategory", "ServiceName", "RegionId",
              "ResourceId", "SubAccountId", "PricingCategory", "ConsumedQuantity", "ConsumedUnit", "Tags"]
    rows = [header]
    for x in lines:
        category, service, description, unit = FOCUS_KINDS[x["kind"]]
        tags = {k: x[k] for k in ("team", "owner", "project") if x[k]}
        rows.append([str(x["cost"]), str(x["cost"]), str(x["cost"]), x["currency"],
                     f"{x['start']:%Y-%m-%d %H:%M:%S}", f"{x['start'] + timedelta(hours=1):%Y-%m-%d %H:%M:%S}",
                     category, description, "AWS", service, "Amazon Elastic Compute Cloud", "us-east-1",
                     x["resource"], x["account"], "Standard", str(x["quantity"]), unit, json.dumps(tags)])
    return rows


FORMATS = {"cur": cur_rows, "focus": focus_rows}


def write(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return path


def decimal_totals(lines: list[dict]) -> dict[str, Decimal]:
    """The cost column summed per currency in Python: the count the auditor must reproduce."""
    totals: dict[str, Decimal] = {}
    for x in lines:
        totals[x["currency"]] = totals.get(x["currency"], Decimal(0)) + x["cost"]
    return totals


def audited(paths: list[Path]) -> tuple[dict[str, Decimal], list[tuple]]:
    """The audit's billed total per currency, and its findings as (fingerprint, rule, cost, saving, currency)."""
    audit = run_audit(POLICY, paths, None, parse_quarter("2026-Q3"), date(2026, 10, 1))
    findings = sorted((f.fingerprint, f.rule, f.cost, f.monthly_savings, f.currency) for f in audit.findings)
    return audit.summary["billed_cost"], findings


def damaged(raw: bytes, data) -> bytes:
    """The bytes of an export damaged at random: cut, bytes inserted or overwritten, a line dropped or doubled."""
    at = data.draw(st.integers(0, len(raw)), label="at")
    damage = data.draw(st.sampled_from(["cut", "insert", "overwrite", "drop-line", "double-line"]), label="damage")
    if damage == "cut":
        return raw[:at]
    if damage == "insert":
        return raw[:at] + data.draw(st.binary(min_size=1, max_size=16), label="bytes") + raw[at:]
    if damage == "overwrite":
        return raw[:at] + data.draw(st.binary(min_size=1, max_size=4), label="bytes") + raw[at + 4:]
    text = raw.split(b"\n")
    i = min(at * len(text) // max(len(raw), 1), len(text) - 1)
    text[i:i + 1] = [] if damage == "drop-line" else [text[i], text[i]]
    return b"\n".join(text)


@pytest.mark.slow
@SETTINGS
@given(fmt=st.sampled_from(sorted(FORMATS)), lines=exports(), data=st.data())
def test_ingest_raises_only_input_error(tmp_path_factory, fmt, lines, data):
    """A generated export reads, exactly; the same bytes damaged at random read or fail with InputError."""
    folder = tmp_path_factory.mktemp("ingest")
    good = write(folder / "export.csv", FORMATS[fmt](lines))
    [source] = Store().load_billing([good])
    assert source.rows == len(lines)
    assert source.stats["billed_cost"] == decimal_totals(lines)

    raw = damaged(good.read_bytes(), data)
    bad = folder / "damaged.csv"
    bad.write_bytes(raw)
    try:
        Store().load_billing([bad])
    except InputError as e:
        assert "\n" not in str(e) and str(bad) in str(e), str(e)


@pytest.mark.slow
@AUDITS
@given(fmt=st.sampled_from(sorted(FORMATS)), lines=exports(min_lines=2), seed=st.integers(0, 2**32 - 1),
       data=st.data())
def test_shuffling_or_splitting_changes_no_total_and_no_finding(tmp_path_factory, fmt, lines, seed, data):
    folder = tmp_path_factory.mktemp("split")
    to_rows = FORMATS[fmt]
    whole_total, whole_findings = audited([write(folder / "whole.csv", to_rows(lines))])
    assert whole_total == decimal_totals(lines)  # exactly, not to the cent: nothing was rounded yet

    shuffled = lines[:]
    random.Random(seed).shuffle(shuffled)
    assert audited([write(folder / "shuffled.csv", to_rows(shuffled))]) == (whole_total, whole_findings)

    cuts = data.draw(st.lists(st.integers(1, len(lines) - 1), min_size=1, max_size=3, unique=True), label="cuts")
    bounds = [0, *sorted(cuts), len(lines)]
    parts = [write(folder / f"part-{i}.csv", to_rows(shuffled[a:b]))
             for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]
    event(f"{'some' if whole_findings else 'no'} findings")
    assert audited(parts) == (whole_total, whole_findings)


OUTPUTS = ("audit.json", "report.html", "report.md", "findings.csv", "jobs.csv", "actions.csv")


@pytest.mark.slow
@SETTINGS
@given(fmt=st.sampled_from(sorted(FORMATS)), lines=exports(), damage=st.booleans(), data=st.data())
def test_the_command_line_ends_in_0_or_one_error_line_and_never_a_mixed_set(tmp_path_factory, fmt, lines, damage,
                                                                            data):
    """Through `audit`, over an output folder holding a previous set: exit 0 with the new set complete and its
    total the export's, or exit 2 with one line naming the file and the previous set as it was; never a
    traceback, never a file of one set beside a file of the other, nothing hidden left beside the folder."""
    from click.testing import CliRunner

    from auditor.atomic import write_files
    from auditor.cli import cli

    folder = tmp_path_factory.mktemp("cli")
    export = write(folder / "export.csv", FORMATS[fmt](lines))
    if damage:
        export.write_bytes(damaged(export.read_bytes(), data))
    policy = folder / "policy.yml"
    policy.write_text("policy: Properties\nowner: finops@example.com\n", encoding="utf-8")
    out = folder / "out"
    previous = {name: f"previous {name}\n" for name in OUTPUTS}
    write_files(out, previous)
    result = CliRunner().invoke(cli, ["audit", "-q", "--fail-on", "none", "--quarter", "2026-Q3", "--policy",
                                      str(policy), "--out", str(out), str(export)])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert "Traceback" not in result.output
    event(f"exit {result.exit_code}")
    written = {p.name: p.read_text(encoding="utf-8") for p in out.iterdir()}
    assert sorted(p.name for p in folder.iterdir()) == ["export.csv", "out", "policy.yml"]
    if result.exit_code == 2:
        lines_out = result.stderr.strip().splitlines()
        assert len(lines_out) == 1 and lines_out[0].startswith(f"gpu-auditor: error: {export}"), result.stderr
        assert written == previous
        return
    assert result.exit_code == 0, result.output
    assert sorted(written) == sorted(OUTPUTS) and not set(written.values()) & set(previous.values())
    if not damage:
        billed = json.loads(written["audit.json"])["summary"]["billed_cost"]
        assert billed == {c: str(v.quantize(Decimal("0.01"))) for c, v in decimal_totals(lines).items()}


@pytest.mark.slow
@AUDITS
@given(fmt=st.sampled_from(sorted(FORMATS)), first=exports(), second=exports())
def test_concatenating_two_exports_adds_their_totals(tmp_path_factory, fmt, first, second):
    """One file holding the lines of two exports totals, per currency, what the two total apart."""
    folder = tmp_path_factory.mktemp("concat")
    rows_a, rows_b = FORMATS[fmt](first), FORMATS[fmt](second)
    total_a, _ = audited([write(folder / "a.csv", rows_a)])
    total_b, _ = audited([write(folder / "b.csv", rows_b)])
    together, _ = audited([write(folder / "both.csv", rows_a + rows_b[1:])])  # one header
    assert together == {c: total_a.get(c, Decimal(0)) + total_b.get(c, Decimal(0)) for c in {*total_a, *total_b}}

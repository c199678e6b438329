"""Commitment coverage through the real readers and the store: COM004's steady on-demand floor (its least hour) from
FOCUS exports, daily and hourly, COM003's commitment end from the AWS CUR's reservation/EndTime and
savingsPlan/EndTime."""

from __future__ import annotations

import csv
import json
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.core import run_audit
from auditor.errors import InputError
from auditor.model import Commitment, SteadyGpuSpend
from auditor.policy import load_policy
from auditor.tables.entities import build
from auditor.tables.store import Store
from auditor.window import Window

REPO = Path(__file__).resolve().parents[1]
CUR = REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"
FOCUS_HEADER = (REPO / "fixtures" / "demo" / "billing" / "focus-azure-2026-q3.csv").read_text(
    encoding="utf-8").splitlines()[0].split(",")
A100, T4 = "Standard_NC24ads_A100_v4", "Standard_NC4as_T4_v3"
AUGUST = Window(datetime(2026, 8, 1), datetime(2026, 8, 4), "3 days")


def focus_line(day: int, vm: str, cost: str, pricing: str = "Standard", commitment: str = "") -> dict[str, str]:
    return {"BilledCost": cost, "EffectiveCost": cost, "ListCost": cost, "BillingCurrency": "USD",
            "BillingAccountId": "acct", "ChargeCategory": "Usage", "ChargeDescription": f"{vm}",
            "ChargePeriodStart": f"2026-08-0{day}T00:00:00Z", "ChargePeriodEnd": f"2026-08-0{day + 1}T00:00:00Z",
            "ConsumedQuantity": "24", "ConsumedUnit": "Hours", "PricingCategory": pricing,
            "CommitmentDiscountId": commitment, "CommitmentDiscountStatus": "Used" if commitment else "",
            "ProviderName": "Microsoft", "RegionId": "eastus", "ResourceId": f"/subscriptions/s/vm/{vm}-{pricing}",
            "ServiceCategory": "Compute", "ServiceName": "Virtual Machines", "SubAccountId": "/subscriptions/s",
            "Tags": "{}", "x_SkuDetails": json.dumps({"ServiceType": vm})}


def write_csv(path: Path, header: list[str], rows: list[dict[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, header)
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture
def steady(tmp_path) -> Path:
    return write_csv(tmp_path / "focus.csv", FOCUS_HEADER, [
        # the A100 runs on demand every day (72, 48, 96: the floor is 48 / 24 = 2.00 an hour), beside spot and
        # reserved copies of it that are not on-demand spend
        focus_line(1, A100, "72.00"), focus_line(2, A100, "48.00"), focus_line(3, A100, "96.00"),
        focus_line(2, A100, "30.00", "Dynamic"), focus_line(3, A100, "40.00", "Committed", "ri-1"),
        # the T4 misses a day: nothing of it ran every day
        focus_line(1, T4, "12.62"), focus_line(3, T4, "12.62")])


def test_a_daily_export_s_floor_is_its_least_day_spread_over_its_hours(steady):
    store = Store()
    store.load_billing([steady])
    policy = load_policy(REPO / "fixtures" / "demo" / "policy.yml")
    spend = {s.family: s for s in build(store, AUGUST, policy, SteadyGpuSpend)}
    a100 = spend[A100]
    assert (a100.days, a100.days_billed, a100.floor_per_hour, a100.on_demand, a100.committed) == \
        (3, 3, Decimal(2), Decimal("216.00"), Decimal("40.00"))
    assert a100.id == f"azure:eastus:{A100}:USD" and a100.gpu_model == "A100-80GB"
    assert (spend[T4].days_billed, spend[T4].floor_per_hour) == (2, 0)


@pytest.mark.heavy
def test_com002_states_the_saving_at_the_policy_rate(steady, tmp_path):
    policy = tmp_path / "policy.yml"
    policy.write_text("""policy: t
owner: o@example.com
clauses:
  commitment_coverage:
    text: steady GPUs are committed
    min_floor_per_hour: 1
    discount_pct: {azure: 40}
    discount_as_of: 2026-06-01
    discount_source: Azure reservations price sheet
""", encoding="utf-8")
    audit = run_audit(load_policy(policy), [steady], None, AUGUST, date(2026, 9, 1))
    [f] = [f for f in audit.findings if f.rule == "COM004"]
    assert f.resource == f"azure:eastus:{A100}:USD"
    assert f.monthly_savings == Decimal(2) * 730 * 40 / 100  # 584.00
    assert "(Azure reservations price sheet, 2026-06-01) it saves $584.00 a month" in f.message


def hourly_line(start: datetime, hours: int, vm: str, name: str, rate: str) -> dict[str, str]:
    """One on-demand line of `hours` consecutive hours of one VM at `rate` an hour."""
    end = start + timedelta(hours=hours)
    return {**focus_line(1, vm, str(Decimal(rate) * hours)), "ChargePeriodStart": start.isoformat() + "Z",
            "ChargePeriodEnd": end.isoformat() + "Z", "ConsumedQuantity": str(hours),
            "ResourceId": f"/subscriptions/s/vm/{name}"}


@pytest.fixture
def day_and_night(tmp_path) -> Path:
    """Two A100 VMs every hour of 2026-08-01..03 (32.7726 + 32.7774 = 65.55 an hour) and a third 08-20 UTC each
    day at 32.76 an hour: each day costs 65.55 x 24 + 32.76 x 12 = 1,966.32, so the least day / 24 is 81.93 an
    hour, while only 65.55 ran in every hour."""
    rows = []
    for day in range(3):
        start = datetime(2026, 8, 1 + day)
        rows += [hourly_line(start + timedelta(hours=h), 1, A100, "vm-a", "32.7726") for h in range(24)]
        rows += [hourly_line(start + timedelta(hours=h), 1, A100, "vm-b", "32.7774") for h in range(24)]
        rows += [hourly_line(start + timedelta(hours=h), 1, A100, "vm-day", "32.76") for h in range(8, 20)]
    return write_csv(tmp_path / "hourly.csv", FOCUS_HEADER, rows)


def test_the_floor_is_the_least_hour_not_the_least_day(day_and_night):
    store = Store()
    store.load_billing([day_and_night])
    policy = load_policy(REPO / "fixtures" / "demo" / "policy.yml")
    [a100] = build(store, AUGUST, policy, SteadyGpuSpend)
    assert a100.floor_per_hour == Decimal("65.55")
    assert (a100.hours, a100.hours_billed, a100.floor_at) == (72, 72, datetime(2026, 8, 1))
    assert a100.on_demand == Decimal("1966.32") * 3


def test_a_day_with_gaps_adds_to_no_hour(tmp_path):
    """A VM billed 00-04 and 20-24 on one day has one row of 8 hours over a 24-hour span: which hours it ran is
    not known, so it adds to none of them, and the floor is what ran every hour (the other VM)."""
    rows = []
    for day in range(3):
        start = datetime(2026, 8, 1 + day)
        rows += [hourly_line(start + timedelta(hours=h), 1, A100, "vm-a", "3.00") for h in range(24)]
        rows += [hourly_line(start + timedelta(hours=h), 1, A100, "vm-gaps", "5.00") for h in (*range(4),
                                                                                               *range(20, 24))]
    store = Store()
    store.load_billing([write_csv(tmp_path / "gaps.csv", FOCUS_HEADER, rows)])
    policy = load_policy(REPO / "fixtures" / "demo" / "policy.yml")
    [a100] = build(store, AUGUST, policy, SteadyGpuSpend)
    assert a100.floor_per_hour == Decimal("3.00")


def test_several_gpus_hours_on_lines_with_gaps_add_to_no_hour(tmp_path):
    """An 8-GPU VM billed in GPU-hours (8 an hour) at 00-04 and 20-24: 64 hours consumed over a 24-hour span is
    more than the span, yet its 8 lines leave 16 hours unaccounted for; it adds to no hour."""
    rows = []
    for day in range(3):
        start = datetime(2026, 8, 1 + day)
        rows += [hourly_line(start + timedelta(hours=h), 1, A100, "vm-a", "3.00") for h in range(24)]
        rows += [{**hourly_line(start + timedelta(hours=h), 1, A100, "vm-8gpu", "40.00"), "ConsumedQuantity": "8"}
                 for h in (*range(4), *range(20, 24))]
    store = Store()
    store.load_billing([write_csv(tmp_path / "gpus.csv", FOCUS_HEADER, rows)])
    policy = load_policy(REPO / "fixtures" / "demo" / "policy.yml")
    [a100] = build(store, AUGUST, policy, SteadyGpuSpend)
    assert a100.floor_per_hour == Decimal("3.00")


@pytest.mark.heavy
def test_com004_on_the_hourly_floor_with_a_dated_rate_writes_every_output(day_and_night, tmp_path):
    """The saving is 65.55 x 730 x 30% = 14,355.45 (the least day / 24 would say 81.93 x 730 x 30% = 17,943.67);
    `discount_as_of`, a date, is written to audit.json as the day it is."""
    from auditor.outputs.report import write_outputs

    policy = tmp_path / "policy.yml"
    policy.write_text("""policy: t
owner: o@example.com
clauses:
  commitment_coverage:
    text: steady GPUs are committed
    discount_pct: {azure: 30}
    term: 3y
    discount_as_of: 2026-09-30
    discount_source: Azure reservations price sheet
""", encoding="utf-8")
    audit = run_audit(load_policy(policy), [day_and_night], None, AUGUST, date(2026, 9, 1))
    [f] = [f for f in audit.findings if f.rule == "COM004"]
    assert f.monthly_savings == Decimal("14355.45")
    assert ("at least $65.55 of on-demand GPU compute in every hour of 3 days: $47,851.50 a month at on-demand "
            "prices a commitment would cover; at the policy's 30% discount for a 3y term (Azure reservations price "
            "sheet, 2026-09-30) it saves $14,355.45 a month, and breaks even if at least 70% of its hours are used"
            ) in f.message
    assert f.evidence["floor_at"] == "2026-08-01T00:00:00Z" and f.evidence["break_even_used_pct"] == "70"
    write_outputs(audit, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "audit.json").read_text(encoding="utf-8"))
    [clause] = [c for c in doc["clauses"] if c["rule"] == "COM004"]
    assert clause["options"]["discount_as_of"] == "2026-09-30" and clause["options"]["term"] == "3y"


def ri_export(tmp_path: Path, end: str) -> Path:
    with open(CUR, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        header, rows = [*reader.fieldnames, "reservation/EndTime", "savingsPlan/EndTime"], list(reader)
    for r in rows:
        r["reservation/EndTime"] = end if r["reservation/ReservationARN"] else ""
        r["savingsPlan/EndTime"] = "2028-01-01T00:00:00.000Z" if r["savingsPlan/SavingsPlanARN"] else ""
    return write_csv(tmp_path / "cur.csv", header, rows)


def test_commitment_end_from_the_cur(tmp_path):
    store = Store()
    store.load_billing([ri_export(tmp_path, "2026-07-20T23:59:59.000Z")])
    window = Window(datetime(2026, 7, 1), datetime(2026, 7, 2), "2026-07-01")
    policy = load_policy(REPO / "fixtures" / "demo" / "policy.yml")
    ends = {c.id: c.ends for c in build(store, window, policy, Commitment)}
    assert ends["arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-1"] == datetime(2026, 7, 20, 23, 59, 59)
    assert datetime(2028, 1, 1) in ends.values()  # the savings plan's


@pytest.mark.heavy
def test_com003_lists_the_reservation_that_ends_next_quarter(tmp_path):
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: t\nowner: o@example.com\nclauses:\n  commitment_renewal: {text: renew, "
                      "min_covered_per_month: 0}\n", encoding="utf-8")
    window = Window(datetime(2026, 7, 1), datetime(2026, 7, 2), "2026-07-01")
    audit = run_audit(load_policy(policy), [ri_export(tmp_path, "2026-07-20T23:59:59.000Z")], None, window,
                      date(2026, 7, 2))
    [f] = [f for f in audit.findings if f.rule == "COM003"]
    assert f.resource == "arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-1"
    assert "ends on 2026-07-20, 18 days after 2026-07-01" in f.message


def test_an_unreadable_end_time_names_its_line(tmp_path):
    with pytest.raises(InputError) as e:
        Store().load_billing([ri_export(tmp_path, "next spring")])
    assert str(e.value) == (f"{tmp_path / 'cur.csv'}:7: column 'reservation/EndTime': 'next spring' is not a UTC "
                            "time like 2026-07-01T00:00:00Z")


@pytest.mark.heavy
def test_the_hourly_floor_of_an_export_split_into_parts_is_that_of_the_whole(day_and_night, tmp_path):
    """The hourly lines of one export dealt into two parts alternately: each part holds every VM's days with
    gaps, the two together hold them whole, and the floor is that of the whole file."""
    with open(day_and_night, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    parts = []
    for i in range(2):  # in folders of their own: read apart, not as one scan of a folder's parts
        (tmp_path / f"p{i}").mkdir()
        parts.append(write_csv(tmp_path / f"p{i}" / "part.csv", FOCUS_HEADER, rows[i::2]))
    store = Store()
    store.load_billing(parts)
    policy = load_policy(REPO / "fixtures" / "demo" / "policy.yml")
    [a100] = build(store, AUGUST, policy, SteadyGpuSpend)
    assert a100.floor_per_hour == Decimal("65.55")

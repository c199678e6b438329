"""The breakdowns (tables/breakdown.py) worked by hand: GPU-hours as text, the organisation's GPU-hours by pricing
and GPU spend by model from the teams', a monthly amount over the next window, and, on a small FOCUS file of three
lines, the forecast at the run rate of the window's last month, the window before, and billing coverage by month.

2026-Q3 is 2,208 hours (92 days) and so is 2026-Q4; a month in the forecasts is 730 hours (model.HOURS_PER_MONTH)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from auditor.model import UNATTRIBUTED
from auditor.tables import breakdown
from auditor.tables.sql import tag_sql
from auditor.tables.store import Store
from auditor.window import Window, parse_quarter

D = Decimal
Q3 = parse_quarter("2026-Q3")


def test_gpu_hours_are_text_with_one_decimal():
    assert [breakdown.hours_text(v) for v in (None, D(0), D("12.34"), D("12.36"), D(7))] == [
        "0.0", "0.0", "12.3", "12.4", "7.0"]


def test_the_organisations_gpu_hours_by_pricing_add_up_the_teams():
    teams = {"a": {"gpu_hours_by_pricing": {"on_demand": "10.5", "spot": "2.26"}},
             "b": {"gpu_hours_by_pricing": {"on_demand": "1.0", "committed": "4"}}, "c": {}}
    got = breakdown.gpu_hours_by_pricing(teams)
    assert list(got.items()) == [("on_demand", "11.5"), ("spot", "2.3"), ("committed", "4.0")]
    assert breakdown.gpu_hours_by_pricing({}) == {"on_demand": "0.0", "spot": "0.0", "committed": "0.0"}


def test_gpu_spend_by_model_most_hours_first():
    teams = {"a": {"by_model": {"A100": {"gpu_hours": "10", "billed_cost": {"USD": D("30.00")}},
                                "L4": {"gpu_hours": "20", "billed_cost": {"USD": D("8.00")}}}},
             "b": {"by_model": {"A100": {"gpu_hours": "15.25", "billed_cost": {"USD": D("45.50"), "EUR": D("1.25")}},
                                "H100": {"gpu_hours": "20", "billed_cost": {"USD": None}}}},
             "c": {}}
    assert breakdown.gpu_by_model(teams) == [
        {"model": "A100", "gpu_hours": "25.2", "billed_cost": {"USD": D("75.50"), "EUR": D("1.25")}},
        {"model": "H100", "gpu_hours": "20.0", "billed_cost": {}},  # a tie in hours: by model
        {"model": "L4", "gpu_hours": "20.0", "billed_cost": {"USD": D("8.00")}}]


def test_a_monthly_amount_over_the_next_window():
    assert breakdown.over_next(Q3, {"USD": D(730), "EUR": D(365)}) == {"USD": D(2208), "EUR": D(1104)}
    short = Window.of(datetime(2026, 7, 1, tzinfo=UTC), datetime(2026, 7, 31, 10, tzinfo=UTC))
    assert breakdown.over_next(short, {"USD": D(73)}) == {"USD": D(73)}  # 730 hours next: a month of 730


def store_of(tmp_path: Path, lines: list[tuple[str, ...]]) -> Store:
    """A FOCUS file of AWS GPU lines: (start, end, billed cost[, team, project])."""
    path = tmp_path / "focus.csv"
    rows = ["BilledCost,EffectiveCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,"
            "ServiceCategory,ProviderName,ResourceId,SkuPriceDetails,Tags"]
    for i, (start, end, cost, *tags) in enumerate(lines):
        labels = dict(zip(("team", "project"), tags, strict=False))
        tag_text = '"' + json.dumps(labels).replace('"', '""') + '"' if labels else ""
        rows.append(f'{cost},{cost},USD,{start},{end},Usage,Compute,AWS,i-{i},"{{""GpuCount"": 1}}",{tag_text}')
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    store = Store()
    store.load_billing([path])
    return store


def test_forecast_at_the_run_rate_of_the_last_month(tmp_path):
    """The billing of 2026-Q3 ends on 11 September: the run rate is September's 240.00 over its 240 hours, $1 an
    hour, times Q4's 2,208 hours; July's line is not in the run rate. Savings of 365.00 a month are 1,104.00 over
    Q4; savings over the forecast leave 0."""
    store = store_of(tmp_path, [("2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z", "24.00"),
                                ("2026-09-01T00:00:00Z", "2026-09-11T00:00:00Z", "240.00")])
    fc = breakdown.forecast(store, Q3, "x_Provider", {"USD": D(365)})
    assert fc is not None
    assert (fc["basis"]["label"], fc["basis"]["hours"], fc["next"]["label"], fc["next"]["hours"]) == (
        "2026-09-01 to 2026-09-10", "240", "2026-Q4", "2208")
    assert (fc["billed_cost"], fc["gpu_cost"], fc["by_team"]) == ({"USD": D(2208)}, {"USD": D(2208)},
                                                                  {"aws": {"USD": D(2208)}})
    assert (fc["savings"], fc["with_savings"]) == ({"USD": D(1104)}, {"USD": D(1104)})
    assert breakdown.forecast(store, Q3, "x_Provider", {"USD": D(1000)})["with_savings"] == {"USD": D(0)}
    assert breakdown.forecast(store, parse_quarter("2026-Q1"), "x_Provider", {}) is None  # no billing in it


def test_forecast_where_the_billing_stops_before_the_last_month(tmp_path):
    """No line in September: the run rate is of what the billing covers, from the window's start."""
    store = store_of(tmp_path, [("2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z", "24.00")])
    fc = breakdown.forecast(store, Q3, "x_Provider", {})
    assert (fc["basis"]["hours"], fc["billed_cost"]) == ("24", {"USD": D(2208)})


def test_the_window_before_and_coverage(tmp_path):
    store = store_of(tmp_path, [("2026-06-30T00:00:00Z", "2026-06-30T01:00:00Z", "5.00"),
                                ("2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z", "24.00"),
                                ("2026-09-01T00:00:00Z", "2026-09-02T00:00:00Z", "24.00")])
    prev = breakdown.previous_spend(store, Q3)
    assert (prev["label"], prev["rows"], prev["billed_cost"], prev["gpu_cost"]) == (
        "2026-Q2", 1, {"USD": D("5.00")}, {"USD": D("5.00")})
    assert breakdown.previous_spend(store, parse_quarter("2026-Q2")) is None
    assert breakdown.coverage(store, Q3) == {
        "months": [{"month": "2026-07", "lines": {"aws": 1}}, {"month": "2026-08", "lines": {}},
                   {"month": "2026-09", "lines": {"aws": 1}}],
        "missing": ["no aws billing lines for 2026-08"]}
    assert breakdown.coverage(store, parse_quarter("2027-Q1"))["missing"] == [
        "no billing lines in the window 2027-Q1"]


def test_spend_by_every_dimension_and_team(tmp_path):
    """Largest first; a line without a team tag is unattributed, without a project tag of no project. Attributed
    by other keys (the project tag as the team), the teams are those keys', not the first call's."""
    store = store_of(tmp_path, [("2026-09-01T00:00:00Z", "2026-09-02T00:00:00Z", "60.00", "cv", "p2"),
                                ("2026-09-01T00:00:00Z", "2026-09-11T00:00:00Z", "240.00", "nlp", "p1"),
                                ("2026-09-02T00:00:00Z", "2026-09-03T00:00:00Z", "10.00")])
    team, project = tag_sql(["team"]), tag_sql(["project"])

    def rows(key, *items):
        return [{"key": k, "billed_cost": {"USD": D(v)}, "gpu_cost": {"USD": D(v)}} for k, v in items]

    got = breakdown.spend_breakdown(store, Q3, "USD", team, project)
    assert got == {"provider": rows("aws", ("aws", "310.00")), "account": rows("a", ("aws (no account)", "310.00")),
                   "region": rows("r", ("(global)", "310.00")),
                   "team": rows("t", ("nlp", "240.00"), ("cv", "60.00"), (UNATTRIBUTED, "10.00")),
                   "project": rows("p", ("p1", "240.00"), ("p2", "60.00"), ("(no project)", "10.00"))}
    again = breakdown.spend_breakdown(store, Q3, "USD", project, team)
    assert again["team"] == rows("t", ("p1", "240.00"), ("p2", "60.00"), (UNATTRIBUTED, "10.00"))
    assert again["project"] == rows("p", ("nlp", "240.00"), ("cv", "60.00"), ("(no project)", "10.00"))
    spend = breakdown.team_spend(store, Q3, team, project)
    assert sorted(spend) == sorted(["nlp", "cv", UNATTRIBUTED])
    nlp = spend["nlp"]
    assert (nlp["by_category"], nlp["by_provider"], nlp["by_project"], nlp["gpu_by_provider"],
            nlp["gpu_by_project"]) == ({"gpu_compute": {"USD": D(240)}}, {"aws": {"USD": D(240)}},
                                       {"p1": {"USD": D(240)}}, {"aws": {"USD": D(240)}}, {"p1": {"USD": D(240)}})
    assert spend[UNATTRIBUTED]["by_project"] == {"(no project)": {"USD": D(10)}}

"""The breakdowns (tables/breakdown.py) worked by hand: GPU-hours as text, the organisation's GPU-hours by pricing
and GPU spend by model from the teams', a monthly amount over the next window, and, on small FOCUS and CUR files
written by each test: spend by provider, account, region, team and project (currencies apart, ties by key, the
rest past the top rows), a team's own spend, the attribution per window and keys, the provider's split, the
forecast at the run rate of the window's last month, the window before, and billing coverage by month. These are
the tests breakdown.py's mutants run against (.ci/mutation.py CORE): each reads its own file, none an audit.

2026-Q3 is 2,208 hours (92 days) and so is 2026-Q4; a month in the forecasts is 730 hours (model.HOURS_PER_MONTH)."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.model import UNATTRIBUTED
from auditor.policy import parse_policy
from auditor.tables import breakdown
from auditor.tables.sql import TAX, spend_team_sql, tag_sql
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


# An organisation's billing in 2026-Q3 (and one line in Q2), as FOCUS lines of 10 hours each unless said: every
# figure below is worked out from these lines and the docs of breakdown.py, summary.py and tables/sql.py.
#   L1  aws, sub-account 111 of 999, us-east-1, an A100 (p4d.24xlarge, 1 GPU) on demand, 300.00 USD: nlp / p1
#   L2  aws, 111, us-east-1, storage, 40.00 USD: nlp / p1
#   L3  gcp, billing account B-1, europe-west4, an A100 (a2-highgpu-1g) committed, 50.00 EUR: project p2 only,
#       which the policy maps to cv
#   L4  gcp, B-1, europe-west4, an L4 (g2-standard-4) spot, 120.00 USD: cv / p3
#   L5  azure, no account, no region, a database, 120.00 USD: no tags (unattributed, of no project)
#   L6  aws, 111, us-east-1, tax, 7.00 USD, tagged as L1 and L2 (nlp / p1): tax is no team's, TAX
#   L7  oci, no account, us-ashburn-1, compute without a GPU, 500.00 EUR: nlp / p1
#   L8  aws, 111, us-east-1, 1,000.00 USD on 30 June (Q2): nlp / p1, outside the window
#   L9  aws, sub-account 222, us-west-2, an instance type no catalog knows, with 2 GPUs a unit as its SKU says, 3
#       hours on demand, 12.00 USD: cv / p3
#   L10 aws, 222, us-west-2, an A100 without a unit of hours (no GPU-hours), 8.00 USD: cv / p3
FOCUS_COLUMNS = ["BilledCost", "EffectiveCost", "BillingCurrency", "ChargePeriodStart", "ChargePeriodEnd",
                 "ChargeCategory", "ServiceCategory", "ProviderName", "BillingAccountId", "SubAccountId", "RegionId",
                 "ResourceId", "PricingCategory", "ConsumedQuantity", "ConsumedUnit", "SkuPriceDetails", "Tags"]
POLICY = parse_policy("""
policy: test
version: "1"
owner: finops@example.com
currency: USD
attribution: {team_tags: [team], project_tags: [project]}
teams:
  nlp: {lead: nlp@example.com, projects: [p1]}
  cv: {lead: cv@example.com, projects: [p2]}
""")


def line(cost: str, cur: str = "USD", start: str = "2026-09-01T00:00:00Z", end: str = "2026-09-01T10:00:00Z",
         provider: str = "AWS", account: str = "999", sub: str = "111", region: str = "us-east-1",
         kind: str = "Usage", service: str = "Compute", pricing: str = "Standard", hours: str = "10",
         unit: str = "Hours", instance: str = "p4d.24xlarge", gpus: str = "1",
         tags: dict[str, str] | None = None) -> dict[str, str]:
    """One FOCUS line: by default an hour-priced A100 (one GPU a unit) in AWS's us-east-1, on 1 September."""
    sku = {k: v for k, v in (("InstanceType", instance), ("GpuCount", gpus)) if v}
    return {"BilledCost": cost, "EffectiveCost": cost, "BillingCurrency": cur, "ChargePeriodStart": start,
            "ChargePeriodEnd": end, "ChargeCategory": kind, "ServiceCategory": service, "ProviderName": provider,
            "BillingAccountId": account, "SubAccountId": sub, "RegionId": region, "ResourceId": f"r-{cost}",
            "PricingCategory": pricing, "ConsumedQuantity": hours, "ConsumedUnit": unit,
            "SkuPriceDetails": json.dumps(sku) if sku else "", "Tags": json.dumps(tags) if tags else ""}


def focus_store(tmp_path: Path, lines: list[dict[str, str]]) -> Store:
    path = tmp_path / "focus-lines.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, FOCUS_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(lines)
    store = Store()
    store.load_billing([path])
    return store


def organisation(tmp_path: Path) -> Store:
    nlp, cv = {"team": "nlp", "project": "p1"}, {"team": "cv", "project": "p3"}
    no_gpu = {"instance": "", "gpus": ""}
    gcp = {"provider": "Google Cloud", "account": "B-1", "sub": "", "region": "europe-west4"}
    west = {"sub": "222", "region": "us-west-2"}
    return focus_store(tmp_path, [
        line("300.00", tags=nlp),
        line("40.00", service="Storage", hours="", **no_gpu, tags=nlp),
        line("50.00", cur="EUR", **gcp, instance="a2-highgpu-1g", pricing="Committed", tags={"project": "p2"}),
        line("120.00", **gcp, instance="g2-standard-4", pricing="Dynamic", tags=cv),
        line("120.00", provider="Microsoft", account="", sub="", region="", service="Databases", **no_gpu),
        line("7.00", kind="Tax", service="", **no_gpu, tags=nlp),
        line("500.00", cur="EUR", provider="Oracle", account="", sub="", region="us-ashburn-1", **no_gpu, tags=nlp),
        line("1000.00", start="2026-06-30T00:00:00Z", end="2026-06-30T10:00:00Z", tags=nlp),
        line("12.00", **west, instance="zz9.unknown", gpus="2", hours="3", tags=cv),
        line("8.00", **west, hours="", unit="", tags=cv)])


def amounts(*rows: tuple) -> list[dict]:
    """Breakdown rows of (key, billed, gpu): amounts as {currency: text}, {} for none."""
    def money(v: dict[str, str]) -> dict[str, Decimal]:
        return {cur: D(a) for cur, a in v.items()}
    return [{"key": k, "billed_cost": money(billed), "gpu_cost": money(gpu)} for k, billed, gpu in rows]


def test_spend_by_every_dimension_in_the_policys_currency_first(tmp_path):
    """Each dimension's keys, largest first by their USD (the policy's currency); a tie in USD by key; a key with
    no USD after every key that has some, however large its euros. Each key keeps its currencies apart, and its
    GPU compute ({} where it has none). The account is the sub-account, else the billing account; Q2's line
    counts nowhere. Teams by the team tag, else the project's team in the policy; tax under TAX, though its tags
    are nlp's."""
    got = breakdown.spend_breakdown(organisation(tmp_path), Q3, "USD", spend_team_sql(POLICY),
                                    tag_sql(POLICY.project_tags))
    assert got["provider"] == amounts(
        ("aws", {"USD": "367"}, {"USD": "320"}),  # L1 L2 L6 L9 L10; GPU L1 L9 L10
        ("azure", {"USD": "120"}, {}),
        ("gcp", {"EUR": "50", "USD": "120"}, {"EUR": "50", "USD": "120"}),  # a tie with azure at 120 USD
        ("oci", {"EUR": "500"}, {}))
    assert got["account"] == amounts(
        ("aws 111", {"USD": "347"}, {"USD": "300"}), ("azure (no account)", {"USD": "120"}, {}),
        ("gcp B-1", {"EUR": "50", "USD": "120"}, {"EUR": "50", "USD": "120"}),
        ("aws 222", {"USD": "20"}, {"USD": "20"}), ("oci (no account)", {"EUR": "500"}, {}))
    assert got["region"] == amounts(
        ("us-east-1", {"USD": "347"}, {"USD": "300"}), ("(global)", {"USD": "120"}, {}),
        ("europe-west4", {"EUR": "50", "USD": "120"}, {"EUR": "50", "USD": "120"}),
        ("us-west-2", {"USD": "20"}, {"USD": "20"}), ("us-ashburn-1", {"EUR": "500"}, {}))
    assert got["team"] == amounts(
        ("nlp", {"EUR": "500", "USD": "340"}, {"USD": "300"}),  # L1 L2 L7
        ("cv", {"EUR": "50", "USD": "140"}, {"EUR": "50", "USD": "140"}),  # L3 (p2) L4 L9 L10
        (UNATTRIBUTED, {"USD": "120"}, {}), (TAX, {"USD": "7"}, {}))
    assert got["project"] == amounts(
        ("p1", {"EUR": "500", "USD": "347"}, {"USD": "300"}), ("p3", {"USD": "140"}, {"USD": "140"}),
        ("(no project)", {"USD": "120"}, {}), ("p2", {"EUR": "50"}, {"EUR": "50"}))
    # currencies in the order of their codes
    assert [list(r["billed_cost"]) for r in got["provider"]] == [["USD"], ["USD"], ["EUR", "USD"], ["EUR"]]
    # in euros as the policy's currency: oci first, then nlp's 500 before cv's 50; keys without euros by name
    in_eur = breakdown.spend_breakdown(organisation(tmp_path), Q3, "EUR", spend_team_sql(POLICY),
                                       tag_sql(POLICY.project_tags))
    assert [r["key"] for r in in_eur["provider"]] == ["oci", "gcp", "aws", "azure"]
    assert [r["key"] for r in in_eur["team"]] == ["nlp", "cv", TAX, UNATTRIBUTED]


def test_a_teams_own_spend_by_category_provider_project_pricing_and_model(tmp_path):
    """team_spend of the same lines: a team's GPU compute by provider and project lists only where it has some;
    GPU-hours are hours times GPUs a unit (L9: 3 x 2 = 6), by pricing (Dynamic is spot, Committed committed, the
    rest on demand) and by GPU model ("(unknown)" where the catalog has none; L10 has no hours, 0 of them)."""
    spend = breakdown.team_spend(organisation(tmp_path), Q3, spend_team_sql(POLICY), tag_sql(POLICY.project_tags))
    none = {"on_demand": "0.0", "spot": "0.0", "committed": "0.0"}
    assert spend == {
        "nlp": {"by_category": {"gpu_compute": {"USD": D(300)}, "storage": {"USD": D(40)},
                                "other_compute": {"EUR": D(500)}},
                "by_provider": {"aws": {"USD": D(340)}, "oci": {"EUR": D(500)}},
                "by_project": {"p1": {"USD": D(340), "EUR": D(500)}},
                "gpu_by_provider": {"aws": {"USD": D(300)}}, "gpu_by_project": {"p1": {"USD": D(300)}},
                "gpu_hours_by_pricing": {**none, "on_demand": "10.0"},
                "by_model": {"A100": {"gpu_hours": "10.0", "billed_cost": {"USD": D(300)}}}},
        "cv": {"by_category": {"gpu_compute": {"USD": D(140), "EUR": D(50)}},
               "by_provider": {"aws": {"USD": D(20)}, "gcp": {"USD": D(120), "EUR": D(50)}},
               "by_project": {"p2": {"EUR": D(50)}, "p3": {"USD": D(140)}},
               "gpu_by_provider": {"aws": {"USD": D(20)}, "gcp": {"USD": D(120), "EUR": D(50)}},
               "gpu_by_project": {"p2": {"EUR": D(50)}, "p3": {"USD": D(140)}},
               "gpu_hours_by_pricing": {"on_demand": "6.0", "spot": "10.0", "committed": "10.0"},
               "by_model": {"A100": {"gpu_hours": "10.0", "billed_cost": {"EUR": D(50), "USD": D(8)}},
                            "L4": {"gpu_hours": "10.0", "billed_cost": {"USD": D(120)}},
                            "(unknown)": {"gpu_hours": "6.0", "billed_cost": {"USD": D(12)}}}},
        UNATTRIBUTED: {"by_category": {"other": {"USD": D(120)}}, "by_provider": {"azure": {"USD": D(120)}},
                       "by_project": {"(no project)": {"USD": D(120)}}, "gpu_by_provider": {},
                       "gpu_by_project": {}, "gpu_hours_by_pricing": none, "by_model": {}},
        TAX: {"by_category": {"tax": {"USD": D(7)}}, "by_provider": {"aws": {"USD": D(7)}},
              "by_project": {"p1": {"USD": D(7)}}, "gpu_by_provider": {}, "gpu_by_project": {},
              "gpu_hours_by_pricing": none, "by_model": {}}}
    assert list(spend["cv"]["gpu_hours_by_pricing"]) == ["on_demand", "spot", "committed"]
    # the organisation's, from the teams': 16.0 on demand (10 + 6), 10.0 spot, 10.0 committed
    assert breakdown.gpu_hours_by_pricing(spend) == {"on_demand": "16.0", "spot": "10.0", "committed": "10.0"}


def test_past_the_top_rows_the_rest_is_one_row(tmp_path):
    """21 projects: p21 (21.00 USD) down to p01 (1.00 USD of storage and 0.50 EUR): TOP is 20 rows, so the 19
    largest and "(2 more)" of p02 and p01: 3.00 USD and 0.50 EUR, of which GPU compute 2.00 USD. 20 projects
    (no p01) are 20 rows."""
    storage = {"service": "Storage", "instance": "", "gpus": "", "hours": ""}
    lines = [line(f"{i}.00", tags={"project": f"p{i:02d}"}) for i in range(2, 22)]
    cheapest = [line("1.00", **storage, tags={"project": "p01"}),
                line("0.50", cur="EUR", **storage, tags={"project": "p01"})]
    got = breakdown.spend_breakdown(focus_store(tmp_path, lines + cheapest), Q3, "USD", tag_sql(["team"]),
                                    tag_sql(["project"]))["project"]
    assert len(got) == breakdown.TOP == 20
    assert got[:19] == amounts(*((f"p{i:02d}", {"USD": i}, {"USD": i}) for i in range(21, 2, -1)))
    assert got[19] == {"key": "(2 more)", "billed_cost": {"USD": D(3), "EUR": D("0.5")}, "gpu_cost": {"USD": D(2)},
                       "rest": True}
    twenty = breakdown.spend_breakdown(focus_store(tmp_path, lines), Q3, "USD", tag_sql(["team"]),
                                       tag_sql(["project"]))["project"]
    assert twenty == amounts(*((f"p{i:02d}", {"USD": i}, {"USD": i}) for i in range(21, 1, -1)))


def test_the_attribution_of_each_window_and_keys_is_its_own(tmp_path):
    """The team lookups are kept per window and keys: Q3's tag set (team b) is not in Q2's lookup, and a lookup
    made for other keys does not replace the first one's."""
    store = focus_store(tmp_path, [line("10.00", start="2026-06-01T00:00:00Z", end="2026-06-01T10:00:00Z",
                                        tags={"team": "a", "project": "x"}),
                                   line("20.00", tags={"team": "b", "project": "y"})])
    team, project = tag_sql(["team"]), tag_sql(["project"])
    q2 = breakdown.spend_breakdown(store, parse_quarter("2026-Q2"), "USD", team, project)
    assert q2["team"] == amounts(("a", {"USD": 10}, {"USD": 10}))
    assert breakdown.spend_breakdown(store, Q3, "USD", team, project)["team"] == amounts(("b", {"USD": 20},
                                                                                          {"USD": 20}))
    assert breakdown.spend_breakdown(store, Q3, "USD", project, team)["team"] == amounts(("y", {"USD": 20},
                                                                                          {"USD": 20}))
    assert breakdown.team_spend(store, Q3, team, project)["b"]["by_project"] == {"y": {"USD": D(20)}}


def cur_line(cost: str, resource: str, team: str, **over: str) -> dict[str, str]:
    """A legacy CUR line of an hour of p4d.24xlarge (8 A100s) on 1 September 2026, tagged with `team`."""
    row = {"identity/LineItemId": f"l-{resource}", "bill/PayerAccountId": "111122223333",
           "lineItem/UsageAccountId": "444455556666", "lineItem/LineItemType": "Usage",
           "lineItem/UsageStartDate": "2026-09-01T00:00:00Z", "lineItem/UsageEndDate": "2026-09-01T01:00:00Z",
           "lineItem/ProductCode": "AmazonEC2", "lineItem/UsageType": "BoxUsage:p4d.24xlarge",
           "lineItem/ResourceId": resource, "lineItem/UsageAmount": "1", "lineItem/CurrencyCode": "USD",
           "lineItem/UnblendedCost": cost, "lineItem/LineItemDescription": "an hour",
           "product/productFamily": "Compute Instance", "product/regionCode": "us-east-1",
           "pricing/term": "OnDemand", "pricing/unit": "Hrs", "resourceTags/user:team": team,
           "splitLineItem/ParentResourceId": "", "splitLineItem/SplitCost": "", "splitLineItem/UnusedCost": ""}
    row.update({k.replace("__", "/"): v for k, v in over.items()})
    return row


def test_the_providers_split_moves_spend_and_gpu_hours_between_teams(tmp_path):
    """A node of team platform billed 10.00 USD for an hour of its 8 A100s (8 GPU-hours); AWS's split gives a pod
    of team nlp 6.00 of it and 1.00 of its unused capacity: nlp bears 7.00 and platform the 3.00 left, and the
    GPU-hours go with the cost (7/10 of 8 = 5.6 to nlp, 2.4 left), and so does each team's forecast. The total
    stays 10.00."""
    path = tmp_path / "cur.csv"
    rows = [cur_line("10.00", "i-node", "platform"),
            cur_line("0.00", "pod-1", "nlp", lineItem__UsageAmount="0", splitLineItem__ParentResourceId="i-node",
                     splitLineItem__SplitCost="6.00", splitLineItem__UnusedCost="1.00")]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    store = Store()
    store.load_billing([path])
    team, project = tag_sql(["team"]), tag_sql(["project"])
    got = breakdown.spend_breakdown(store, Q3, "USD", team, project)
    assert got["team"] == amounts(("nlp", {"USD": 7}, {"USD": 7}), ("platform", {"USD": 3}, {"USD": 3}))
    assert got["provider"] == amounts(("aws", {"USD": 10}, {"USD": 10}))
    # the split moves spend between teams and projects only: the account and region are the node's, whole
    assert got["account"] == amounts(("aws 444455556666", {"USD": 10}, {"USD": 10}))
    assert got["region"] == amounts(("us-east-1", {"USD": 10}, {"USD": 10}))
    spend = breakdown.team_spend(store, Q3, team, project)
    assert {t: (v["by_category"], v["gpu_hours_by_pricing"]["on_demand"], v["by_model"]) for t, v in spend.items()} == {
        "nlp": ({"gpu_compute": {"USD": D(7)}}, "5.6", {"A100": {"gpu_hours": "5.6", "billed_cost": {"USD": D(7)}}}),
        "platform": ({"gpu_compute": {"USD": D(3)}}, "2.4",
                     {"A100": {"gpu_hours": "2.4", "billed_cost": {"USD": D(3)}}})}
    # a team's forecast follows the split as its spend does: the hour's 10.00 over Q4's 2,208 hours is 22,080.00,
    # of which nlp's 7.00 an hour is 15,456.00 and platform's 3.00 6,624.00
    fc = breakdown.forecast(store, Q3, team, {})
    assert (fc["basis"]["hours"], fc["billed_cost"], fc["gpu_cost"]) == ("1", {"USD": D(22080)}, {"USD": D(22080)})
    assert fc["by_team"] == {"nlp": {"USD": D(15456)}, "platform": {"USD": D(6624)}}


def test_the_window_before_counts_its_lines_currencies_and_gpu(tmp_path):
    """Q2 has four lines: two alike of 5.00 USD of GPU, 3.00 USD of storage and 4.00 EUR of GPU."""
    june = {"start": "2026-06-10T00:00:00Z", "end": "2026-06-10T10:00:00Z"}
    store = focus_store(tmp_path, [line("5.00", **june), line("5.00", **june),
                                   line("3.00", **june, service="Storage", instance="", gpus="", hours=""),
                                   line("4.00", cur="EUR", **june), line("24.00")])
    prev = breakdown.previous_spend(store, Q3)
    q2 = parse_quarter("2026-Q2")
    assert prev == {"label": "2026-Q2", "start": q2.start, "end": q2.end, "rows": 4,
                    "billed_cost": {"USD": D(13), "EUR": D(4)}, "gpu_cost": {"USD": D(10), "EUR": D(4)}}
    # a window before without GPU compute has none of it, not None
    only_storage = focus_store(tmp_path, [line("3.00", **june, service="Storage", instance="", gpus="", hours="")])
    assert breakdown.previous_spend(only_storage, Q3)["gpu_cost"] == {}


def test_coverage_by_calendar_month_of_a_window_not_on_month_boundaries(tmp_path):
    """A window from 15 July 06:30:45.5 to a microsecond past 1 September: its months are July, August and September
    (the instant at midnight on 1 September is in it). aws has lines in July and at that instant, gcp two in
    August (its line on 1 July is before the window): each month names the providers it lacks, in their order."""
    store = focus_store(tmp_path, [
        line("1.00", start="2026-07-20T00:00:00Z", end="2026-07-20T01:00:00Z"),
        line("1.00", start="2026-09-01T00:00:00Z", end="2026-09-01T01:00:00Z"),
        line("2.00", provider="Google Cloud", start="2026-08-03T00:00:00Z", end="2026-08-03T01:00:00Z"),
        line("3.00", provider="Google Cloud", start="2026-08-04T00:00:00Z", end="2026-08-04T01:00:00Z"),
        line("4.00", provider="Google Cloud", start="2026-07-01T00:00:00Z", end="2026-07-01T01:00:00Z")])
    window = Window.of(datetime(2026, 7, 15, 6, 30, 45, 500000), datetime(2026, 9, 1, 0, 0, 0, 1))
    assert breakdown.coverage(store, window) == {
        "months": [{"month": "2026-07", "lines": {"aws": 1}}, {"month": "2026-08", "lines": {"gcp": 2}},
                   {"month": "2026-09", "lines": {"aws": 1}}],
        "missing": ["no gcp billing lines for 2026-07", "no aws billing lines for 2026-08",
                    "no gcp billing lines for 2026-09"]}
    # the first twelve hours of July are in July: gcp's line at midnight, and no provider lacks a month
    assert breakdown.coverage(store, Window.of(datetime(2026, 7, 1), datetime(2026, 7, 1, 12))) == {
        "months": [{"month": "2026-07", "lines": {"gcp": 1}}], "missing": []}


def test_forecast_per_currency_and_team_with_savings_in_their_own_currency(tmp_path):
    """September's billing ends on the 11th (240 hours): nlp's 240.00 USD of GPU and 48.00 EUR of untagged
    storage, times Q4's 2,208 hours over 240: 2,208 USD (all GPU, nlp's) and 441.60 EUR (unattributed). Savings
    of 365.00 USD and 73.00 GBP a month are 1,104.00 USD and 220.80 GBP over Q4: the dollars come off the
    dollars; the euros keep theirs, and no pound is forecast."""
    store = focus_store(tmp_path, [
        line("240.00", end="2026-09-11T00:00:00Z", tags={"team": "nlp"}),
        line("48.00", cur="EUR", end="2026-09-03T00:00:00Z", service="Storage", instance="", gpus="", hours="")])
    fc = breakdown.forecast(store, Q3, tag_sql(["team"]), {"USD": D(365), "GBP": D(73)})
    assert (fc["billed_cost"], fc["gpu_cost"], fc["by_team"]) == (
        {"USD": D(2208), "EUR": D("441.6")}, {"USD": D(2208)},
        {"nlp": {"USD": D(2208)}, UNATTRIBUTED: {"EUR": D("441.6")}})
    assert (fc["savings"], fc["with_savings"]) == ({"USD": D(1104), "GBP": D("220.8")},
                                                   {"USD": D(1104), "EUR": D("441.6")})
    assert fc["basis"] == {"start": datetime(2026, 9, 1), "end": datetime(2026, 9, 11),  # naive UTC, as windows
                           "label": "2026-09-01 to 2026-09-10", "hours": "240"}
    q4 = parse_quarter("2026-Q4")
    assert fc["next"] == {"start": q4.start, "end": q4.end, "label": "2026-Q4", "hours": "2208"}


@pytest.mark.heavy
def test_forecast_of_billing_that_runs_past_the_window_or_ends_where_its_last_month_starts(tmp_path):
    """A line from 30 September into October counts up to the window's end: September's 720 hours at 72.00 are
    0.10 an hour, 220.80 over Q4. Billing that ends at midnight on 1 September (July and August, 1,488 hours at
    1,488.00) has nothing in September: the run rate is of July and August, 1.00 an hour, 2,208.00 over Q4. A
    window whose billing is an instant at its start has no hours to take a rate from: no forecast; half an hour of
    it is a rate."""
    past = focus_store(tmp_path, [line("72.00", start="2026-09-30T00:00:00Z", end="2026-10-05T00:00:00Z")])
    fc = breakdown.forecast(past, Q3, tag_sql(["team"]), {})
    assert (fc["basis"]["hours"], fc["billed_cost"]) == ("720", {"USD": D("220.8")})
    before = focus_store(tmp_path, [line("1488.00", start="2026-07-01T00:00:00Z", end="2026-09-01T00:00:00Z")])
    fc = breakdown.forecast(before, Q3, tag_sql(["team"]), {})
    assert (fc["basis"]["label"], fc["basis"]["hours"], fc["billed_cost"]) == (
        "2026-07-01 to 2026-08-31", "1488", {"USD": D(2208)})
    instant = focus_store(tmp_path, [line("1.00", start="2026-07-01T00:00:00Z", end="2026-07-01T00:00:00Z")])
    assert breakdown.forecast(instant, Q3, tag_sql(["team"]), {}) is None
    half_hour = focus_store(tmp_path, [line("0.50", start="2026-07-01T00:00:00Z", end="2026-07-01T00:30:00Z")])
    assert breakdown.forecast(half_hour, Q3, tag_sql(["team"]), {})["billed_cost"] == {"USD": D(2208)}  # 1.00 an hour
    # a window that ends a microsecond into September: its last month is September, where nothing is billed
    window = Window.of(datetime(2026, 7, 1), datetime(2026, 9, 1, 0, 0, 0, 1))
    assert breakdown.forecast(before, window, tag_sql(["team"]), {})["basis"]["hours"] == "1488"


def test_the_attributed_lines_carry_their_team_and_project(tmp_path):
    """`attributed` is the window's lines with the team and project their tags give (unattributed, of no project,
    where a line has neither tag): what the daily view reads."""
    store = focus_store(tmp_path, [line("10.00", tags={"team": "a", "project": "x"}), line("20.00", tags={})])
    lines = breakdown.attributed(store, Q3, tag_sql(["team"]), tag_sql(["project"]))
    assert store.con.execute(f"SELECT team, project, BilledCost FROM {lines} ORDER BY BilledCost").fetchall() == [
        ("a", "x", D("10.00")), (UNATTRIBUTED, "(no project)", D("20.00"))]

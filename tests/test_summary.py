"""The summary's rounding (tables/summary.py: _round_breakdowns): every breakdown rounded once, to the cent, so that
its parts add up to the figure it breaks down as that is shown; a team's GPU compute is the one the org's "by
team" table shows for it. Worked by hand on a summary of sub-cent amounts, with figures.apportion's rule: each
part rounded down, the cents left to the largest remainders (ties by key); the total rounded half to even."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from auditor.audit_model import Summary
from auditor.figures import actions
from auditor.model import Finding, Severity, money
from auditor.policy import parse_policy
from auditor.providers.catalog import load_catalog
from auditor.tables.store import Store
from auditor.tables.summary import _pct, _round_breakdowns, summarize
from auditor.window import parse_quarter

D = Decimal


def usd(amount: str) -> dict[str, Decimal]:
    return {"USD": D(amount)}


def summary() -> dict:
    return {
        "billed_cost": usd("10.006"),  # shown as 10.01
        "gpu_cost": usd("6.004"),  # shown as 6.00
        "by_category": {"gpu_compute": usd("6.004"), "storage": usd("2.001"), "other": usd("2.001")},
        "by_provider": {"aws": usd("5.003"), "gcp": usd("5.003")},
        "by_team": {"nlp": usd("7.004"), "cv": usd("3.002")},
        "breakdown": {
            "team": [{"key": "nlp", "billed_cost": usd("7.004"), "gpu_cost": usd("4.003")},
                     {"key": "cv", "billed_cost": usd("3.002"), "gpu_cost": usd("2.001")}],
            "provider": [{"key": "aws", "billed_cost": usd("5.003"), "gpu_cost": usd("3.0025")},
                         {"key": "gcp", "billed_cost": usd("5.003"), "gpu_cost": usd("3.0015")}]},
        "team_spend": {
            "nlp": {"by_category": {"gpu_compute": usd("4.003"), "storage": usd("3.001")},
                    "by_provider": {"aws": usd("3.502"), "gcp": usd("3.502")},
                    "by_project": {"p1": usd("4.5"), "p2": usd("2.504")},
                    "gpu_by_provider": {"aws": usd("2.0035"), "gcp": usd("1.9995")},
                    "gpu_by_project": {"p1": usd("4.003")},
                    "by_model": {"A100": {"billed_cost": usd("2.506")}, "L4": {"billed_cost": usd("1.497")}}},
            "cv": {"by_category": {"other": usd("3.002")}, "by_provider": {"gcp": usd("3.002")},
                   "by_project": {}, "gpu_by_provider": {}, "gpu_by_project": {}, "by_model": {}}},
        "fleet": {"by_model": [{"model": "A100", "billed_cost": usd("3.755")},
                               {"model": "L4", "billed_cost": usd("2.249")}]},
    }


def test_the_orgs_breakdowns_add_up_to_the_total_shown():
    s = summary()
    _round_breakdowns(s)
    # GPU compute keeps the headline's 6.00; storage and other share the 4.01 left, the cent to "other" (a tie)
    assert s["by_category"] == {"gpu_compute": usd("6.00"), "storage": usd("2.00"), "other": usd("2.01")}
    assert s["by_provider"] == {"aws": usd("5.01"), "gcp": usd("5.00")}  # a tie: by key
    assert s["by_team"] == {"nlp": usd("7.01"), "cv": usd("3.00")}  # .004 over .002
    assert s["breakdown"]["team"] == [{"key": "nlp", "billed_cost": usd("7.01"), "gpu_cost": usd("4.00")},
                                      {"key": "cv", "billed_cost": usd("3.00"), "gpu_cost": usd("2.00")}]
    # 3.0025 + 3.0015 to 6.00: 3.00 and 3.00, no cent left
    assert s["breakdown"]["provider"] == [{"key": "aws", "billed_cost": usd("5.01"), "gpu_cost": usd("3.00")},
                                          {"key": "gcp", "billed_cost": usd("5.00"), "gpu_cost": usd("3.00")}]
    # the fleet's models to the GPU compute shown: 3.75 + 2.24, the cent left to L4 (.009 over .005)
    assert s["fleet"]["by_model"] == [{"model": "A100", "billed_cost": usd("3.75")},
                                      {"model": "L4", "billed_cost": usd("2.25")}]


def test_a_teams_breakdowns_add_up_to_its_spend_and_its_gpu_compute_shown():
    s = summary()
    _round_breakdowns(s)
    nlp, cv = s["team_spend"]["nlp"], s["team_spend"]["cv"]
    # nlp's spend is 7.01 (by team) and its GPU compute 4.00 (the org's "by team" table): storage is the 3.01 left
    assert nlp["by_category"] == {"gpu_compute": usd("4.00"), "storage": usd("3.01")}
    assert nlp["by_provider"] == {"aws": usd("3.51"), "gcp": usd("3.50")}
    assert nlp["by_project"] == {"p1": usd("4.50"), "p2": usd("2.51")}
    # GPU parts add up to the team's GPU compute: 2.00 + 1.99, the cent to gcp (.0095 over .0035)
    assert nlp["gpu_by_provider"] == {"aws": usd("2.00"), "gcp": usd("2.00")}
    assert nlp["gpu_by_project"] == {"p1": usd("4.00")}
    assert nlp["by_model"] == {"A100": {"billed_cost": usd("2.50")}, "L4": {"billed_cost": usd("1.50")}}
    # cv has no GPU compute: nothing pinned, its one category and provider are its 3.00
    assert cv["by_category"] == {"other": usd("3.00")}
    assert cv["by_provider"] == {"gcp": usd("3.00")}
    assert cv["by_project"] == cv["gpu_by_provider"] == cv["gpu_by_project"] == cv["by_model"] == {}



def test_breakdowns_add_up_to_the_total_shown_where_it_is_a_cent_off_their_own_sum():
    """Each breakdown is rounded to the total as it is shown, not to its parts' own rounded sum: with a billed cost
    of 10.016 (10.02) over parts of 10.006 (10.01), the two cents left go to the largest remainders."""
    s = summary()
    s["billed_cost"] = usd("10.016")
    _round_breakdowns(s)
    # 2.001 and 2.001 to the 4.02 GPU compute's 6.00 leaves: a cent each
    assert s["by_category"] == {"gpu_compute": usd("6.00"), "storage": usd("2.01"), "other": usd("2.01")}
    assert s["by_provider"] == {"aws": usd("5.01"), "gcp": usd("5.01")}
    assert s["by_team"] == {"nlp": usd("7.01"), "cv": usd("3.01")}
    assert [i["billed_cost"] for i in s["breakdown"]["team"]] == [usd("7.01"), usd("3.01")]
    assert [i["billed_cost"] for i in s["breakdown"]["provider"]] == [usd("5.01"), usd("5.01")]
    assert s["team_spend"]["cv"]["by_category"] == {"other": usd("3.01")}


def test_a_teams_gpu_columns_add_up_to_its_gpu_compute_shown_where_it_is_a_cent_off_their_own_sum():
    """nlp's GPU compute is 4.005 of a GPU compute of 6.008 (6.01): the org's "by team" table shows it as 4.01 (the
    cent left goes to .005 over cv's .003), and its GPU parts, 4.005 (4.00 on their own), add up to that 4.01; the
    fleet's models add up to the 6.01."""
    s = summary()
    s["gpu_cost"] = usd("6.008")
    s["breakdown"]["team"] = [{"key": "nlp", "billed_cost": usd("7.004"), "gpu_cost": usd("4.005")},
                              {"key": "cv", "billed_cost": usd("3.002"), "gpu_cost": usd("2.003")}]
    nlp = s["team_spend"]["nlp"]
    nlp["by_category"] = {"gpu_compute": usd("4.005"), "storage": usd("3.001")}
    nlp["gpu_by_provider"] = {"aws": usd("2.0025"), "gcp": usd("2.0025")}
    nlp["gpu_by_project"] = {"p1": usd("4.005")}
    nlp["by_model"] = {"A100": {"billed_cost": usd("2.5")}, "L4": {"billed_cost": usd("1.505")}}
    _round_breakdowns(s)
    assert [i["gpu_cost"] for i in s["breakdown"]["team"]] == [usd("4.01"), usd("2.00")]
    assert nlp["by_category"] == {"gpu_compute": usd("4.01"), "storage": usd("3.00")}  # of its 7.01
    assert nlp["gpu_by_provider"] == {"aws": usd("2.01"), "gcp": usd("2.00")}  # a tie: by key
    assert nlp["gpu_by_project"] == {"p1": usd("4.01")}
    assert nlp["by_model"] == {"A100": {"billed_cost": usd("2.50")}, "L4": {"billed_cost": usd("1.51")}}
    # the fleet's models, 6.004 (6.00 on their own), to the 6.01 shown: a cent each, L4's .009 first
    assert s["fleet"]["by_model"] == [{"model": "A100", "billed_cost": usd("3.76")},
                                      {"model": "L4", "billed_cost": usd("2.25")}]


def test_teams_in_the_rest_row_keep_their_own_gpu_compute():
    """Past the top rows, teams are summed in one rest row, `(2 more)`: its GPU compute is no team's, not even that
    of a team whose tag reads `(2 more)`. A team there has nothing pinned: its categories add up to its spend."""
    s = summary()
    s["by_team"] = {"nlp": usd("7.004"), "cv": usd("2.001"), "(2 more)": usd("1.001")}
    s["breakdown"]["team"] = [{"key": "nlp", "billed_cost": usd("7.004"), "gpu_cost": usd("4.003")},
                              {"key": "(2 more)", "billed_cost": usd("3.002"), "gpu_cost": usd("2.001"),
                               "rest": True}]
    empty = {"by_provider": {}, "by_project": {}, "gpu_by_provider": {}, "gpu_by_project": {}, "by_model": {}}
    s["team_spend"]["cv"] = {"by_category": {"gpu_compute": usd("1.001"), "other": usd("1.000")}, **empty}
    s["team_spend"]["(2 more)"] = {"by_category": {"gpu_compute": usd("1.000"), "other": usd("0.001")}, **empty}
    _round_breakdowns(s)
    assert s["breakdown"]["team"][1]["gpu_cost"] == usd("2.00")
    assert s["by_team"] == {"nlp": usd("7.01"), "cv": usd("2.00"), "(2 more)": usd("1.00")}
    assert s["team_spend"]["nlp"]["by_category"]["gpu_compute"] == usd("4.00")  # pinned to its own row
    assert s["team_spend"]["cv"]["by_category"] == {"gpu_compute": usd("1.00"), "other": usd("1.00")}
    assert s["team_spend"]["(2 more)"]["by_category"] == {"gpu_compute": usd("1.00"), "other": usd("0.00")}

def test_share_of_a_budget_in_percent():
    assert _pct(D(1), D(3)) == 33.3
    assert _pct(D(2), D(3)) == 66.7
    assert _pct(D("12.50"), D(10)) == 125.0
    assert _pct(D(5), None) is None
    assert _pct(D(5), D(0)) is None


# ---- summarize: the audit's summary from the tables and the findings --------------------------------------------

BILL = Path(__file__).resolve().parents[1] / "fixtures" / "billing" / "cur-gpu-spot.csv"
Q3 = parse_quarter("2026-Q3")
P4D, G5_SPOT, M5 = "i-0p4d000000000001", "i-0g5spot00000002", "i-0m5000000000008"
POLICY = """\
policy: Summary test
owner: finops@example.com
teams:
  research: {lead: lead-research@example.com, budget_per_quarter: 400, gpu_hours_per_quarter: 64}
  vision: {lead: lead-vision@example.com}
"""


def asset(rid: str, team: str, itype: str = "g5.xlarge", gpus: int = 1) -> dict:
    return {"id": rid, "provider": "aws", "account": "222222222222", "region": "us-east-1", "kind": "vm",
            "instance_type": itype, "gpu_model": "A10G", "gpu_count": gpus, "gpu_memory_gb": 24,
            "lifecycle": "on_demand", "state": "running", "tags": {"team": team}}


def usage(rid: str, start: str, end: str, mean: float) -> dict:
    return {"asset_id": rid, "window_start": start, "window_end": end, "samples": 10, "mean_util_pct": mean,
            "p95_util_pct": mean, "peak_mem_gb": 1.0, "source": "test"}


def store_of(snapshot: dict | None) -> Store:
    store = Store(load_catalog())
    store.load_billing([BILL])
    if snapshot is not None:
        store.load_snapshot(snapshot)
    return store


def gpu_finding(rule: str, resource: str, severity: Severity, cost: str, *, saving: str | None = None,
                wasted: str | None = None, currency: str = "USD", team: str | None = None,
                confidence: str = "high", waived: bool = False) -> Finding:
    return Finding(rule=rule, name=rule.lower(), severity=severity, resource=resource, message="m",
                   entity_type="GpuAsset", cost=D(cost), monthly_savings=None if saving is None else D(saving),
                   wasted=None if wasted is None else D(wasted), currency=currency, team=team,
                   confidence=confidence, waiver={"reason": "r"} if waived else None)


def test_the_summary_counts_the_open_findings_and_totals_their_actions():
    """Four open findings and one waived: the counts by severity (most severe first), their billed cost per
    currency, the actions' savings (the low-confidence one to check), waste, savings by team (none: unattributed),
    the quarterly savings over Q4's 2,208 hours (92 days) of 730-hour months, and the machines left out of the
    baseline, sorted."""
    findings = [gpu_finding("GPU001", P4D, Severity.HIGH, "65.55", saving="100.00", wasted="65.55", team="research"),
                gpu_finding("GPU002", G5_SPOT, Severity.MEDIUM, "0.30", saving="0.10", confidence="low",
                            team="vision"),
                gpu_finding("TAG001", M5, Severity.MEDIUM, "0.19"),
                gpu_finding("STO001", "ckpt-bucket", Severity.LOW, "30.00", saving="20.00", wasted="15.00",
                            currency="EUR"),
                gpu_finding("GPU002", "i-0bench", Severity.MEDIUM, "500.00", saving="300.00", waived=True)]
    policy = parse_policy(POLICY)
    store = store_of(None)
    store.freed = {"i-0zz", "i-0aa"}
    s = summarize(store, policy, Q3, findings, actions([f for f in findings if not f.waived]))
    assert s["findings"] == {"total": 4, "waived": 1,
                             "by_severity": {"critical": 0, "high": 1, "medium": 2, "low": 1, "info": 0}}
    assert list(s["findings"]["by_severity"]) == ["critical", "high", "medium", "low", "info"]
    assert s["findings_cost"] == {"USD": D("66.04"), "EUR": D("30.00")}
    assert s["monthly_savings"] == {"USD": D("100.00"), "EUR": D("20.00")}
    assert s["savings_to_check"] == {"USD": D("0.10")}
    assert s["wasted"] == {"USD": D("65.55"), "EUR": D("15.00")}
    assert s["savings_by_team"] == {"research": {"USD": D("100.00")}, "(unattributed)": {"EUR": D("20.00")}}
    assert {c: money(v) for c, v in s["quarterly_savings"].items()} == {"USD": D("302.47"), "EUR": D("60.49")}
    assert [a["resource"] for a in s["actions"]] == [P4D, G5_SPOT, M5, "ckpt-bucket"]
    assert s["baseline_left_out"] == ["i-0aa", "i-0zz"]
    assert set(s) == Summary.__required_keys__ - {"jobs", "unit_costs"}  # those two run_audit adds


ROBOT, UNSEEN, DARK = "i-0robot000000001", "i-0unseen00000001", "i-0dark000000000001"
NO_INVENTORY = "no GPU inventory: the idle, rightsizing and spot checks had nothing to read"


def test_the_summary_of_the_fleet_the_teams_budgets_and_what_the_audit_could_not_see():
    """The inventory: the p4d (8 GPUs, research) at 5% for 24 hours (192.0 GPU-hours under 10%); the spot g5
    (vision, billed 0.3018) at 30% for 5 hours; a robotics machine (1 GPU, a team with no billing line) at 60% for
    10 hours; a vision machine without metrics. The machines most expensive first (the p4d, the g5), then by
    id. Research
    billed 36.7976 in Q3 (32.7726 on demand, 32.7726 under the savings plan and its -32.7726 negation, the
    SageMaker job's 3.825, 0.20 of transfer): 9.2% of its 400; 17.0 GPU-hours (the p4d's two hours, 8 GPUs
    each, and the job's V100 hour) of its 64: 26.6%."""
    snapshot = {"assets": [asset(P4D, "research", "p4d.24xlarge", 8), asset(ROBOT, "robotics"),
                           asset(UNSEEN, "vision"), asset(G5_SPOT, "vision")],
                "gpu_usage": [usage(P4D, "2026-07-01T00:00:00Z", "2026-07-02T00:00:00Z", 5.0),
                              usage(G5_SPOT, "2026-07-01T00:00:00Z", "2026-07-01T05:00:00Z", 30.0),
                              usage(ROBOT, "2026-08-01T00:00:00Z", "2026-08-01T10:00:00Z", 60.0)]}
    idle = [gpu_finding("GPU001", P4D, Severity.HIGH, "65.55", saving="100.00", team="research")]
    s = summarize(store_of(snapshot), parse_policy(POLICY), Q3, idle, actions(idle))
    assert s["team_spend"]["robotics"] == {
        "by_category": {}, "by_provider": {}, "by_project": {}, "gpu_by_provider": {}, "gpu_by_project": {},
        "gpu_hours_by_pricing": {"on_demand": "0.0", "spot": "0.0", "committed": "0.0"}, "by_model": {},
        "utilisation": {"under_10": "0.0", "10_to_50": "0.0", "over_50": "10.0"}}
    assert s["team_spend"]["research"]["utilisation"] == {"under_10": "192.0", "10_to_50": "0.0", "over_50": "0.0"}
    assert s["team_spend"]["vision"]["utilisation"] == {"under_10": "0.0", "10_to_50": "5.0", "over_50": "0.0"}
    assert s["fleet"]["utilisation"] == {"under_10": "192.0", "10_to_50": "5.0", "over_50": "10.0"}
    assert s["fleet"]["machines_total"] == 4
    assert [m["id"] for m in s["fleet"]["machines"]] == [P4D, G5_SPOT, ROBOT, UNSEEN]
    assert s["coverage"]["missing"][-1] == ("1 GPU machine without utilisation metrics in the window: idle and "
                                            "rightsizing could not judge them")
    assert NO_INVENTORY not in s["coverage"]["missing"]
    assert s["teams"]["research"] == {"lead": "lead-research@example.com", "quarter": "2026-Q3",
                                      "budget": D("400"), "spent": D("36.7976"), "share_of_budget": 9.2,
                                      "left_out": {}, "gpu_hours": "17.0", "gpu_hours_budget": "64",
                                      "gpu_hours_share": 26.6}
    assert s["teams"]["vision"] == {"lead": "lead-vision@example.com", "quarter": "2026-Q3", "budget": None,
                                    "spent": D("0.3018"), "share_of_budget": None, "left_out": {},
                                    "gpu_hours": "1.0", "gpu_hours_budget": None, "gpu_hours_share": None}
    # the bill's 917.2914 by team, largest first: the RI fee (876.00) and the m5 (0.192) no team's, research's
    # 36.7976 (36.5976 of it GPU compute: the p4d's 32.7726 and the job's 3.825), the tax, vision's spot g5
    assert s["breakdown"]["team"] == [
        {"key": "(unattributed)", "billed_cost": {"USD": D("876.19")}, "gpu_cost": {"USD": D("876.00")}},
        {"key": "research", "billed_cost": {"USD": D("36.80")}, "gpu_cost": {"USD": D("36.60")}},
        {"key": "(tax)", "billed_cost": {"USD": D("4.00")}, "gpu_cost": {}},
        {"key": "vision", "billed_cost": {"USD": D("0.30")}, "gpu_cost": {"USD": D("0.30")}}]
    # GPU-hours by pricing: on demand the p4d's hour (8) and the V100 job's (1); spot the g5's; committed the
    # p4d's hour under the savings plan (8) and the reserved g5.2xlarge's (1)
    assert s["gpu_hours_by_pricing"] == {"on_demand": "9.0", "spot": "1.0", "committed": "9.0"}
    # GPU compute by model, to the 912.90 shown: A100 32.7726, A10G 876.3018, V100 3.825 (the cent left to V100)
    assert s["fleet"]["by_model"] == [
        {"model": "A100", "gpu_hours": "16.0", "billed_cost": {"USD": D("32.77")}},
        {"model": "A10G", "gpu_hours": "2.0", "billed_cost": {"USD": D("876.30")}},
        {"model": "V100", "gpu_hours": "1.0", "billed_cost": {"USD": D("3.83")}}]
    # the forecast: July's 917.2914 over its 744 hours, for Q4's 2,208; less the 100.00 a month saved over them
    forecast = s["forecast"]
    assert money(forecast["billed_cost"]["USD"]) == money(D("917.2914") * 2208 / 744) == D("2722.28")
    assert forecast["savings"] == {"USD": D(100) * 2208 / 730}
    assert forecast["with_savings"] == {"USD": forecast["billed_cost"]["USD"] - D(100) * 2208 / 730}
    # week by week: all the GPU compute in the week of July 1 (ISO week 27), the utilisation in its week
    weeks = {w["week"]: w for w in s["weekly"]["weeks"]}
    assert weeks["2026-W27"]["gpu_cost"] == {"USD": {"(unattributed)": D("876.00"), "research": D("36.60"),
                                                     "vision": D("0.30")}}
    assert weeks["2026-W27"]["utilisation"] == {
        "research": {"under_10": "192.0", "10_to_50": "0.0", "over_50": "0.0"},
        "vision": {"under_10": "0.0", "10_to_50": "5.0", "over_50": "0.0"}}
    assert weeks["2026-W31"]["utilisation"] == {"robotics": {"under_10": "0.0", "10_to_50": "0.0",
                                                             "over_50": "10.0"}}
    assert s["findings"] == {"total": 1, "waived": 0,
                             "by_severity": {"critical": 0, "high": 1, "medium": 0, "low": 0, "info": 0}}


def test_the_kubernetes_gpus_are_each_pods_team_by_its_tags():
    """The p4d as a Kubernetes node offering its 8 GPUs whole; a pod of namespace ml (team vision, owner ana)
    holds 4 for an hour: ml's row is vision's (the team tag, not the owner)."""
    snapshot = {"assets": [asset(P4D, "research", "p4d.24xlarge", 8)],
                "gpu_units": [{"asset_id": P4D, "resource": "nvidia.com/gpu", "sharing": "none", "count": 8,
                               "slices": 1, "slices_per_gpu": 1, "replicas": 1}],
                "gpu_allocations": [{"id": "train-1", "asset_id": P4D, "resource": "nvidia.com/gpu", "units": 4,
                                     "namespace": "ml", "pod": "train-1", "state": "Running",
                                     "start_time": "2026-07-01T00:00:00Z", "end_time": "2026-07-01T01:00:00Z",
                                     "tags": {"team": "vision", "owner": "ana@example.com"}}]}
    s = summarize(store_of(snapshot), parse_policy(POLICY), Q3, [], [])
    assert {(r["namespace"], r["team"]) for r in s["kubernetes_gpus"]["namespaces"]} == {("ml", "vision")}


@pytest.mark.heavy
def test_machines_without_metrics_are_counted_and_no_inventory_is_said():
    two = {"assets": [asset(UNSEEN, "vision"), asset(DARK, "vision")]}
    s = summarize(store_of(two), parse_policy(POLICY), Q3, [], [])
    assert s["coverage"]["missing"][-1] == ("2 GPU machines without utilisation metrics in the window: idle and "
                                            "rightsizing could not judge them")
    assert NO_INVENTORY not in s["coverage"]["missing"]
    assert NO_INVENTORY in summarize(store_of(None), parse_policy(POLICY), Q3, [], [])["coverage"]["missing"]
    # jobs alone are an inventory too (the spot checks read them)
    job = {"id": "arn:aws:sagemaker:us-east-1:222222222222:training-job/bert-ft-7", "platform": "sagemaker",
           "provider": "aws", "name": "bert-ft-7", "state": "Completed", "instance_type": "ml.p3.2xlarge",
           "instance_count": 1, "gpu_model": "V100", "gpu_count": 1, "spot": False,
           "start_time": "2026-07-01T00:00:00Z", "end_time": "2026-07-01T01:00:00Z", "tags": {"team": "research"}}
    missing = summarize(store_of({"jobs": [job]}), parse_policy(POLICY), Q3, [], [])["coverage"]["missing"]
    assert NO_INVENTORY not in missing and not any("without utilisation" in m for m in missing)


def test_team_spend_follows_the_providers_split_of_a_shared_node():
    """cur2-eks-split.csv's node (tagged ml-platform, 2,359.6272) is split whole by the provider: research bears
    1,573.2081 of it and vision 786.4191 (tests/test_billing_gpu.py); the node's own team keeps its empty
    reservation, 2,359.6272. Spend by team is that split, apportioned to the 4,719.25 billed: 1,573.20, 786.41 and
    2,359.62 rounded down, the two cents left to the largest remainders (vision's .91, research's .81 of a cent)."""
    policy = parse_policy(POLICY + "  ml-platform: {lead: lead-platform@example.com}\n")
    store = Store(load_catalog())
    store.load_billing([BILL.parent / "gpu" / "cur2-eks-split.csv"])
    s = summarize(store, policy, Q3, [], [])
    assert s["allocation"] is not None
    assert s["by_team"] == {"research": {"USD": D("1573.21")}, "vision": {"USD": D("786.42")},
                            "ml-platform": {"USD": D("2359.62")}}

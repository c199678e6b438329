"""The wider rule pack (GPU002 fewer GPUs, GPU005, SPOT002, SPOT003, BUD001, TAG003, REG002, COM001, STO001,
POL001): its YAML cases and savings, the entities the store builds for it from real billing in DuckDB (checked
against sums read from the CSVs with the csv module and Decimal), the demo audit, the written policy
(`policy render`), and the rule documentation (`rules list`, `rules explain`)."""

from __future__ import annotations

import csv
import gzip
import json
import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.core import configured_rules, run_audit, waiver_statuses
from auditor.model import GpuCapacity, StorageGrowth, money
from auditor.policy import load_policy, parse_policy, render_markdown
from auditor.providers.catalog import load_catalog
from auditor.providers.live.snapshot import load_snapshot
from auditor.registry import all_rules, get_rule, policy_keys
from auditor.tables import breakdown, entities, gpu_machines, stats
from auditor.tables.store import Store
from auditor.testing import context, load_cases, make_entity, run_case
from auditor.window import parse_quarter

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
CASES = load_cases(REPO / "fixtures" / "rules")
PACK = ("GPU005", "GPU007", "SPOT002", "SPOT003", "BUD001", "TAG003", "REG002", "COM001", "STO001", "POL001")
Q3 = parse_quarter("2026-Q3")
D = Decimal

# Demo resources (fixtures/demo/generate.py)
IDLE_H100 = "i-0a1f3c5e7b9d24680"
BATCH_G5X8 = "i-0e1d3b5f7a9c0e2d4"
SANDBOX_L4 = "i-0a2c4e6f8b0d1f3a5"
UNTAGGED_T4 = "i-0e5a7c9b1d3f57924"
AZ = "/subscriptions/3f2b8c1d-6a4e-4b7f-9c0d-2e5a7b9c1d3f/resourcegroups"
PARKED_AZ_A100 = f"{AZ}/rg-nlp-train/providers/microsoft.compute/virtualmachines/nlp-a100-train-02"
RESERVATION = ("/providers/microsoft.capacity/reservationorders/5b7e9d1f-3a2c-4e6b-8d0f-1a3c5e7b9d2f/"
               "reservations/9c1e3a5b-7d9f-4b2d-a6c8-0e2f4a6c8e1b")
JOB = "arn:aws:sagemaker:us-east-1:444455556666:training-job/"
FLOW = "aws:444455556666:inter_region:us-east-1->us-west-2"
HEALTHY = ("i-0d4f6a8c0e2b46813", "i-0b8d0f2a4c6e8a257", "i-0c9e1a3b5d7f9b368",
           f"{AZ}/rg-nlp-train/providers/microsoft.compute/virtualmachines/nlp-a100-train-01",
           f"{AZ}/rg-platform-ci/providers/microsoft.compute/virtualmachines/platform-ci-gpu-01",
           f"{AZ}/rg-vision-spot/providers/microsoft.compute/virtualmachines/vision-t4-spot-01",
           JOB + "nlp-summarizer-v4-spot-0721", JOB + "platform-eval-harness-0902", "platform-artifacts",
           "vision-datasets-use1", "vision-datasets-usw2", "nlp-model-releases", "platform")


def cli_run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


# ---- YAML cases -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", PACK + ("GPU002",))
def test_each_rule_has_three_failing_and_three_passing_cases(rule):
    cases = [c for c in CASES if c.rule == rule]
    assert sum(1 for c in cases if c.fail) >= 3, rule
    assert sum(1 for c in cases if not c.fail) >= 3, rule


# Monthly savings worked out by hand (see each case's description).
EXPECTED = {
    "GPU002-fewer_gpus_same_family_fails": {"i-t4x8": "5327.54"},
    "GPU002-fewer_gpus_half_the_machine_fails": {"i-g5x8": "7749.68"},
    "GPU002-fewer_gpus_need_the_memory_of_all_of_them_fails": {"i-g5x8-mem": "2144.45"},
    "GPU002-same_gpu_count_or_fewer_of_the_same_model_fails": {"i-g5x4": "781.39", "i-t4x4": "2471.78"},
    "SPOT002-checkpointing_on_demand_job_fails": {JOB.replace("444455556666", "111122223333") + "detector-v3":
                                                  "283.15"},
    "SPOT002-azure_uses_its_own_discount_fails": {"azureml:nlp/train-1": "694.29"},
    "SPOT002-no_checkpoint_counted_when_option_off_fails": {"job-big": "1074.50"},
    "SPOT003-lost_progress_from_checkpoint_interval_fails": {"job-lossy": "142.30"},
    "SPOT003-lost_progress_from_billable_beyond_training_fails": {"k8s:ml/Job/pretrain": "198.37"},
    "REG002-dataset_copied_to_the_gpu_region_fails": {FLOW: "99.18"},
    "COM001-unused_azure_reservation_fails": {
        "/providers/microsoft.capacity/reservationorders/1111/reservations/2222": "1067.56"},
    "COM001-partly_used_aws_reservation_fails": {"arn:aws:ec2:us-east-1:111122223333:reserved-instances/abcd":
                                                 "1994.54"},
    "STO001-checkpoint_bucket_growing_fails": {"nlp-training-checkpoints": "169.74"},
    "GPU007-owned_parked_vm_with_disks_still_billing_fails": {
        "/subscriptions/0000/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm-parked": "122.86"},
    "GPU007-stopped_but_compute_billed_to_the_end_fails": {"vm-stopped": "383.98", "vm-stopped-unowned": "383.98"},
    "GPU007-stopped_days_threshold": {"vm-week": "13.22"},
}


@pytest.mark.parametrize("case_id", sorted(EXPECTED))
def test_expected_monthly_savings(case_id):
    case = next(c for c in CASES if c.id == case_id)
    got = {f.resource: str(money(f.monthly_savings)) for f in run_case(case) if f.resource in EXPECTED[case_id]}
    assert got == EXPECTED[case_id]


def test_spot002_per_run_estimate_has_no_monthly_saving():
    case = next(c for c in CASES if c.id == "SPOT002-manifest_without_cost_uses_catalog_price_per_run_fails")
    (f,) = run_case(case)
    assert f.monthly_savings is None and f.cost is None
    assert f.evidence["saving_per"] == "a run" and "estimate" in f.evidence["savings_basis"]


def test_bud001_cost_is_the_overrun():
    case = next(c for c in CASES if c.id == "BUD001-over_budget_fails")
    (f,) = run_case(case)
    assert f.cost == D("4078.74") and f.evidence["state"] == "over"
    case = next(c for c in CASES if c.id == "BUD001-forecast_over_budget_fails")
    (f,) = run_case(case)
    assert f.cost == D("5000") and f.evidence["state"] == "forecast over"


# ---- the entities, built by SQL from real billing ----------------------------------------------------------


@pytest.fixture(scope="module")
def demo_store() -> Store:
    store = Store(load_catalog())
    store.load_billing([DEMO / "billing"])
    store.load_snapshot(load_snapshot(DEMO / "inventory.json"))
    return store


@pytest.fixture(scope="module")
def demo_policy():
    return load_policy(DEMO / "policy.yml")


def demo_rows():
    """Every demo billing line as (team tag, project tag, resource id, cost, hours, instance type, usage type)."""
    for path in sorted((DEMO / "billing").iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", newline="") as fh:
            for r in csv.DictReader(fh):
                if "BilledCost" in r:
                    tags = json.loads(r["Tags"] or "{}")
                    itype = json.loads(r["x_SkuDetails"]).get("ServiceType") if r["x_SkuDetails"] else None
                    hours = D(r["ConsumedQuantity"]) if r["ConsumedUnit"] == "Hours" and r["ConsumedQuantity"] else None
                    yield (tags.get("team"), tags.get("project"), r["ResourceId"], D(r["BilledCost"]), hours, itype,
                           r["ChargeCategory"])
                    continue
                get = lambda *names, r=r: next((r[n] for n in names if n in r), "")  # noqa: E731
                usage = get("lineItem/UsageType", "line_item_usage_type")
                itype = get("product/instanceType", "product_instance_type")
                hours = D(get("lineItem/UsageAmount", "line_item_usage_amount") or 0) \
                    if get("pricing/unit", "pricing_unit") == "Hrs" else None
                m = re.search(r"(?:Usage:|-)(ml\.)?([a-z0-9]+\.[0-9a-z]+)(?:-Training)?$", usage)
                yield (get("resourceTags/user:team", "resource_tags_user_team") or None,
                       get("resourceTags/user:project", "resource_tags_user_project") or None,
                       get("lineItem/ResourceId", "line_item_resource_id"),
                       D(get("lineItem/UnblendedCost", "line_item_unblended_cost")), hours,
                       itype.removeprefix("ml.") or (m.group(2) if m else None),
                       get("lineItem/LineItemType", "line_item_line_item_type"))


def independent_team_totals(policy) -> dict[str, tuple[Decimal, Decimal]]:
    """(dollars, GPU-hours) per team, attributed as the policy says: team tag, else the project's team."""
    catalog = load_catalog()
    projects = {p: t.name for t in policy.teams.values() for p in t.projects}
    out: dict[str, tuple[Decimal, Decimal]] = {}
    for team, project, _, cost, hours, itype, category in demo_rows():
        team = team or projects.get(project)
        if team is None:
            continue
        provider = "azure" if itype and itype.startswith("Standard_") else "aws"
        t = catalog.instance(provider, itype)
        gpu_hours = hours * t.gpu_count if hours and t and category == "Usage" else D(0)
        dollars, gh = out.get(team, (D(0), D(0)))
        out[team] = (dollars + cost, gh + gpu_hours)
    return out


@pytest.mark.heavy
def test_team_spend_matches_the_csvs(demo_store, demo_policy):
    teams = {t.team: t for t in entities.team_spend(demo_store, Q3, demo_policy)}
    expected = independent_team_totals(demo_policy)
    assert set(teams) == {"vision", "nlp", "platform"}
    for name, (dollars, gpu_hours) in expected.items():
        t = teams[name]
        assert t.spent == dollars, name
        assert t.gpu_hours == gpu_hours, name
        assert t.budget == demo_policy.teams[name].budget_per_quarter
        assert (t.quarter, t.quarter_start, t.quarter_end, t.data_end) == \
            ("2026-Q3", Q3.start, Q3.end, datetime(2026, 10, 1))
    assert teams["nlp"].spent > D(100000) and teams["vision"].gpu_hours > D(30000)  # the planted overruns
    assert teams["vision"].tags == {"team": "vision", "owner": "lead-vision@example.com"}


@pytest.mark.heavy
def test_team_spend_of_a_partial_quarter_forecasts_linearly(demo_store, demo_policy):
    from auditor.window import Window

    july = Window(datetime(2026, 7, 1), datetime(2026, 8, 1), "July")
    teams = {t.team: t for t in entities.team_spend(demo_store, july, demo_policy)}
    assert {t.data_end for t in teams.values()} == {datetime(2026, 8, 1)}
    rule = get_rule("BUD001")()
    flagged = {}
    for t in teams.values():
        flagged.update({f.resource: f for f in rule.check(t, context())})
    expected = set()
    for name, t in teams.items():
        forecast, forecast_h = t.spent * D(2208) / D(744), t.gpu_hours * D(2208) / D(744)  # 744 of 2,208 hours
        if forecast >= t.budget or (t.gpu_hours_budget and forecast_h >= t.gpu_hours_budget):
            expected.add(name)
        if name in flagged:
            assert D(flagged[name].evidence["forecast"]) == round(forecast, 2)
    assert set(flagged) == expected and expected  # July's run rate already overruns a budget


@pytest.mark.heavy
def test_unattributed_spend_agrees_with_the_report_attribution(demo_store, demo_policy):
    from auditor.tables.sql import TAX, spend_team_sql, tag_sql

    by = {(u.scope, u.currency): u for u in entities.unattributed_spend(demo_store, Q3, demo_policy)}
    figures = stats.window_stats(demo_store.con, Q3)
    spend = breakdown.spend_by_team(demo_store, Q3, spend_team_sql(demo_policy), tag_sql(demo_policy.project_tags))
    tax = figures["by_category"]["tax"]["USD"]
    assert tax > 0 and spend[TAX]["USD"] == tax  # tax is no team's, and not spend that lacks a team
    assert by[("all", "USD")].total == figures["billed_cost"]["USD"] - tax
    assert by[("all", "USD")].unattributed == spend["(unattributed)"]["USD"]
    assert by[("gpu", "USD")].total == figures["gpu_cost"]["USD"]
    top = dict(by[("gpu", "USD")].top_resources)
    assert top[RESERVATION] == D("1581.98") * 3  # three monthly purchases, with no tags
    assert set(top) == {RESERVATION, UNTAGGED_T4, "i-0f6b8d0a2c4e68035"}
    independent = sum((cost for team, project, rid, cost, *_ in demo_rows()
                       if rid in top and not team and not project), D(0))
    assert by[("gpu", "USD")].unattributed == independent


def test_commitments_from_the_aws_cur(tmp_path):
    store = Store(load_catalog())
    store.load_billing([REPO / "fixtures" / "billing" / "cur-gpu-spot.csv"])
    by_id = {c.id: c for c in entities.commitments(store, store.data_window(), None)}
    ri = by_id["arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-1"]
    # DiscountedUsage: reservation/EffectiveCost 0.75; RIFee: unused upfront 12.50 + unused recurring 7.25
    assert (ri.kind, ri.instance_type, ri.gpu_model, ri.used, ri.unused) == \
        ("Reservation", "g5.2xlarge", "A10G", D("0.75"), D("19.75"))
    assert (ri.first_seen, ri.last_seen) == (datetime(2026, 7, 1), datetime(2026, 8, 1))
    sp = by_id["arn:aws:savingsplans::111111111111:savingsplan/sp-1"]
    assert (sp.kind, sp.used, sp.unused) == ("Savings Plan", D("21.45"), D(0))
    assert set(by_id) == {ri.id, sp.id}


@pytest.mark.heavy
def test_commitments_from_an_azure_amortised_export(tmp_path):
    src = REPO / "fixtures" / "billing" / "azure" / "ea-cost-details.csv"
    with open(src, encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    used = next(r for r in rows if r["ChargeType"] == "Usage" and r["PricingModel"] == "Reservation")
    used = dict(used, CostInBillingCurrency="52.8")  # amortised: the reservation's hourly price x 24 h
    unused = dict(used, ChargeType="UnusedReservation", CostInBillingCurrency="60", Quantity="12", ResourceId="")
    other = next(r for r in rows if r["PricingModel"] == "OnDemand")
    path = tmp_path / "azure-amortised.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, header)
        w.writeheader()
        w.writerows([used, unused, other])
    store = Store(load_catalog())
    store.load_billing([path])
    (c,) = entities.commitments(store, store.data_window(), None)
    assert c.id == used["ReservationId"].lower()
    assert (c.provider, c.kind, c.instance_type, c.used, c.unused) == \
        ("azure", "Reservation", "Standard_NC24ads_A100_v4", D("52.8"), D("60"))
    (f,) = get_rule("COM001")().check(c, context())
    assert "53% unused" in f.message and f.cost == D("60")


def test_commitments_from_the_demo_focus(demo_store):
    (c,) = entities.commitments(demo_store, Q3, None)
    assert c.id == RESERVATION and c.kind == "Reservation" and c.gpu_model == "A100-80GB"
    assert c.used == 0 and money(c.unused) == D("1581.98") * 3  # each month's fee, amortised over its days


def test_storage_growth_of_the_demo(demo_store):
    by_id = {s.id: s for s in entities.storage_growth(demo_store, Q3, None)}
    ckpt = by_id["nlp-training-checkpoints"]
    # 9,000 GB on 1 July plus 120 GB a day: the mean of each month's days
    assert [(m, gb) for m, gb, _ in ckpt.months] == [("2026-07", D(9000 + 120 * 15)), ("2026-08", D(9000 + 120 * 46)),
                                                     ("2026-09", D(9000 + 120 * 76.5))]
    assert [round(cost, 2) for _, _, cost in ckpt.months] == [round(gb * D("0.023"), 2) for _, gb, _ in ckpt.months]
    assert ckpt.tiered is False and ckpt.checkpoint_jobs == ["nlp-distill-spot-0903", "nlp-summarizer-v4-spot-0721"]
    artifacts = by_id["platform-artifacts"]
    assert artifacts.tiered is True
    assert any("SIA" in c for c in artifacts.storage_classes)
    # disks billed per disk, not per GB, have no GB series
    assert not any(s.id.endswith("-data") for s in by_id.values())


def test_gpu_capacity_of_the_demo(demo_store):
    by_id = {a.id: a for a in gpu_machines.gpu_capacity(demo_store, Q3, None)}
    sandbox = by_id[SANDBOX_L4]
    assert sandbox.last_usage_at is None and sandbox.usage_hours is None
    assert (sandbox.first_billed_at, sandbox.last_billed_at) == (datetime(2026, 7, 1), datetime(2026, 10, 1))
    parked = by_id[PARKED_AZ_A100]
    assert parked.state == "deallocated" and parked.cost == {} and parked.last_billed_at is None
    assert money(parked.storage_cost["USD"]) == D("122.88") * 3  # a P30 disk, three whole months
    assert parked.storage_resources == [f"{AZ}/rg-nlp-train/providers/microsoft.compute/disks/nlp-a100-train-02-data"]
    healthy = by_id["i-0d4f6a8c0e2b46813"]
    assert healthy.last_usage_at == datetime(2026, 10, 1) and healthy.data_end == datetime(2026, 10, 1)
    # three SageMaker jobs ran on ml.p4d.24xlarge in the ML account's us-east-1, none on a g6.xlarge
    assert by_id["i-0c2e4a6b8d0f13579"].jobs_seen == 3 and sandbox.jobs_seen == 0


def test_remote_data_flows_of_the_demo(demo_store):
    (flow,) = [f for f in entities.remote_data_flows(demo_store, Q3, None) if f.id == FLOW]
    assert (flow.source, flow.destination) == ("us-east-1", "us-west-2")
    gpus = {"i-0d4f6a8c0e2b46813", "i-0b8d0f2a4c6e8a257"}  # the GPU machines in us-west-2
    assert set(flow.destination_gpu_resources) == gpus
    independent = sum((cost for _, _, rid, cost, *_ in demo_rows() if rid in gpus), D(0))
    assert flow.destination_gpu_cost == {"USD": independent}
    assert flow.source_gpu_cost["USD"] > independent  # us-east-1 runs GPUs too


# ---- the demo audit ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_audit(demo_audit_result):
    return demo_audit_result  # run_audit of the demo, 2026-Q3, today 2026-10-15, with the inventory (conftest)


# GPU005: the sandbox L4 without metrics is tagged team, owner and project, and the untagged T4 is 30 % busy:
# owned or in use, neither is forgotten (issue 26). The parked Azure A100, owned, still pays for its disk: GPU007.
PLANTED = {
    "GPU002": {BATCH_G5X8}, "GPU005": set(), "GPU007": {PARKED_AZ_A100}, "COM001": {RESERVATION},
    "SPOT002": {JOB + "vision-detector-v3-train-0805"},
    "SPOT003": {JOB + "nlp-distill-spot-0903", JOB + "vision-sam-ft-spot-0909"},
    "BUD001": {"nlp", "vision"}, "TAG003": {"org:gpu:USD"}, "REG002": {FLOW}, "STO001": {"nlp-training-checkpoints"},
    "POL001": {f"waiver:GPU001:{IDLE_H100}"},
}
# the jobs completed before the window's last day: their waste is spent, nothing left to save (running.py)
STOPPED = {JOB + "vision-detector-v3-train-0805"}
NO_SAVING = {"BUD001", "TAG003", "POL001", "SPOT003"}  # a cost, or dollars in the message, but no monthly saving


@pytest.mark.heavy
@pytest.mark.parametrize("rule", sorted(PLANTED))
def test_demo_finds_what_was_planted_with_dollars(demo_audit, rule):
    found = {f.resource: f for f in demo_audit.findings if f.rule == rule}
    assert PLANTED[rule] <= set(found), sorted(found)
    if rule != "GPU002":
        assert set(found) == PLANTED[rule]
    for resource in PLANTED[rule]:
        f = found[resource]
        assert not f.waived and f.currency == "USD"
        assert re.search(r"\$[0-9,]+\.[0-9]{2}", f.message), f.message
        if rule not in NO_SAVING:  # a saving going forward where it still runs; the window's waste either way
            assert f.wasted and f.wasted > 0, f
            if resource in STOPPED:
                assert f.still_running is False and f.monthly_savings is None, f
            else:
                assert f.still_running and f.monthly_savings and f.monthly_savings > 0, f
        if rule not in ("POL001",):
            assert f.cost is not None or f.monthly_savings is not None


def test_demo_pack_stays_quiet_on_healthy_resources(demo_audit):
    flagged = {(f.rule, f.resource) for f in demo_audit.findings if f.rule in PLANTED}
    for rule, resource in flagged:
        assert resource not in HEALTHY, (rule, resource)
    assert ("SPOT003", JOB + "nlp-llama-ft-spot-0814") not in flagged
    assert ("GPU002", BATCH_G5X8) in flagged


def test_demo_fewer_gpus_recommendation(demo_audit):
    (f,) = [f for f in demo_audit.findings if f.rule == "GPU002" and f.resource == BATCH_G5X8]
    assert "g5.12xlarge (4x A10G) fits" in f.message and "its load fits 4 of its 8 GPUs" in f.message
    assert f.evidence["recommended_gpu_count"] == 4 and f.evidence["current_gpu_count"] == 8
    assert money(f.monthly_savings) == D("7749.68")  # billed all quarter at the catalog rate: (16.288 - 5.672) x 730


def test_demo_expired_waiver_is_a_finding_pointing_at_its_line(demo_audit, demo_policy):
    (f,) = [f for f in demo_audit.findings if f.rule == "POL001"]
    waiver = next(w for w in demo_policy.waivers if w.rule == "GPU001")
    assert f.file == demo_policy.path and f.line == waiver.line
    assert f.owner == "lead-vision@example.com" and f.evidence["days_expired"] == 45
    idle = next(g for g in demo_audit.findings if g.rule == "GPU001" and g.resource == IDLE_H100)
    assert f.evidence["matched_cost"] == str(money(idle.cost))
    assert f.cost is None and f"${idle.cost:,.2f} billed in 2026-Q3" in f.message


def test_waiver_statuses_carry_what_each_waiver_named(demo_audit, demo_policy):
    statuses = {w.rule: w for w in waiver_statuses(demo_policy, demo_audit.waivers, demo_audit.findings,
                                                   date(2026, 10, 15))}
    assert statuses["GPU002"].status == "active" and statuses["GPU001"].status == "expired"
    bench = next(f for f in demo_audit.findings if f.resource == "i-0bench4f1a2b3c4d5")
    assert statuses["GPU002"].matched_cost == {"USD": bench.cost}
    assert statuses["GPU001"].tags == {"owner": "lead-vision@example.com"}


def test_demo_budget_findings(demo_audit):
    by = {f.resource: f for f in demo_audit.findings if f.rule == "BUD001"}
    assert "team nlp is over its budget: $" in by["nlp"].message
    assert money(by["nlp"].cost) == D(by["nlp"].evidence["spent"]) - 100000
    assert "GPU-hours used of 30,000" in by["vision"].message and by["vision"].cost > 0
    assert by["nlp"].team == "nlp" and by["nlp"].owner == "lead-nlp@example.com"


@pytest.mark.heavy
def test_only_the_rules_asked_for_build_their_entities(demo_policy, monkeypatch):
    built = []
    original = entities.BUILDERS[StorageGrowth]

    def spy(store, window, policy):
        built.append(window)
        return original(store, window, policy)

    monkeypatch.setitem(entities.BUILDERS, StorageGrowth, spy)
    audit = run_audit(demo_policy, [DEMO / "billing"], DEMO / "inventory.json", Q3, date(2026, 10, 15),
                      select=["GPU001"])
    assert built == [] and {f.rule for f in audit.findings} == {"GPU001"}


# ---- the written policy -----------------------------------------------------------------------------------


def test_policy_render_of_the_demo():
    result = cli_run("policy", "render", DEMO / "policy.yml", "--as-of", "2026-10-15")
    assert result.exit_code == 0, result.output
    md = result.stdout
    policy = load_policy(DEMO / "policy.yml")
    assert md.startswith("# Example ML GPU policy\n")
    assert "Version 2026.3 · owner finops@example.com · amounts in USD" in md
    assert "| nlp | lead-nlp@example.com | 100,000.00 USD | – | llm-finetune, llm-eval, summarizer |" in md
    assert "| vision | lead-vision@example.com | 250,000.00 USD | 30,000 | detector, segmentation |" in md
    for name, clause in policy.clauses.items():
        assert f"### {name}\n" in md
        assert " ".join(clause.text.split()).replace("(", "\\(").replace(")", "\\)") in md, name
    assert "| `max_mean_util_pct` | `10` (default) | mean GPU utilisation below which a machine is idle |" in md
    assert "| `min_monthly_savings` | `100` | smallest monthly saving worth a finding |" in md
    assert "| `suggest_memory_reduction` | no (default) |" in md
    assert "| `name_patterns` | `*checkpoint*`, `*ckpt*`, `*artifact*` (default) |" in md
    assert "| GPU001 | `i-0a1f3c5e7b9d24680` |" in md and "| 2026-08-31 | **expired** (45 days ago) |" in md
    assert "| 2027-03-31 | active (167 days left) |" in md
    assert "Checked by GPU001 idle-gpu · severity high" in md


def test_policy_render_names_rules_without_a_clause_and_escapes_text():
    text = ("policy: \"P <script>alert(1)</script>\"\nowner: o@example.com\nclauses:\n"
            "  idle: {text: \"Shut | it [down](http://x)\", enabled: false, severity: low}\n")
    md = render_markdown(parse_policy(text), date(2026, 10, 15))
    assert "<script>" not in md and "\\<script\\>" in md
    assert "Shut \\| it \\[down\\]\\(http://x\\)" in md
    assert "Checked by GPU001 idle-gpu · severity low · **disabled**" in md
    assert "### Rules without a clause of their own" in md
    assert "- `rightsizing`: GPU002 oversized-gpu:" in md
    assert "No teams are named" in md and "No waivers." in md


def test_policy_render_errors_are_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["policy", "render", str(tmp_path / "none.yml")])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "not found" in result.stderr


# ---- rules list and explain: options and policy keys --------------------------------------------------------


def test_rules_list_json_has_options_and_policy_keys_for_every_rule():
    items = {r["id"]: r for r in json.loads(cli_run("rules", "list", "--json").stdout)}
    assert set(items) == {r.id for r in all_rules()}
    for rule in all_rules():
        item = items[rule.id]
        assert item["options"] == {k: f.default for k, f in rule.options.items()}
        assert item["option_docs"] == {k: f.doc for k, f in rule.options.items()}
        keys = item["policy_keys"]
        assert keys == policy_keys(rule)
        assert {f"clauses.{rule.clause}.{k}" for k in rule.options} <= set(keys)
        assert f"clauses.{rule.clause}.severity" in keys and f"clauses.{rule.clause}.enabled" in keys
    assert "teams.<team>.budget_per_quarter" in items["BUD001"]["policy_keys"]
    assert "waivers[].expires" in items["POL001"]["policy_keys"]


def rule_blocks(text: str) -> dict[str, str]:
    """`rules list` as {rule ID: its block, wrapped lines joined by one space}."""
    blocks: dict[str, str] = {}
    for ln in text.strip().splitlines():
        if not ln.startswith(" "):
            rid = ln.split()[0]
            blocks[rid] = ln
        else:
            blocks[rid] += " " + ln.strip()
    return blocks


def test_rules_list_table_shows_the_clause_and_its_options():
    by_id = rule_blocks(cli_run("rules", "list").stdout)
    assert set(by_id) == {r.id for r in all_rules()}
    for rule in all_rules():
        line = by_id[rule.id]
        assert f"[clauses.{rule.clause}: " in line
        for key in rule.options:
            assert f"{key}=" in line, (rule.id, key)
    assert "[clauses.idle: max_mean_util_pct=10, min_hours=24]" in by_id["GPU001"]
    assert "also teams.<team>.budget_per_quarter" in by_id["BUD001"]


@pytest.mark.parametrize("columns", [80, 120, 250])
def test_rules_list_wraps_to_the_terminal_width(columns, monkeypatch):
    """The table fits a terminal of 80 columns or more (COLUMNS, as shutil reads it): no line wider, and every
    rule's summary whole."""
    monkeypatch.setenv("COLUMNS", str(columns))
    text = cli_run("rules", "list").stdout
    assert max(len(ln) for ln in text.splitlines()) <= columns
    by_id = rule_blocks(text)
    for rule in all_rules():
        assert rule.summary() in by_id[rule.id]
        assert by_id[rule.id].startswith(f"{rule.id} ") and f"clause: {rule.clause}" in by_id[rule.id]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_rules_explain_shows_options_and_policy_keys(rule):
    out = cli_run("rules", "explain", rule.id).stdout
    assert "\nOptions (set in the policy clause)\n" in out and "\nPolicy keys\n-----------\n" in out
    for key in rule.options:
        assert f"  {key} (default " in out
    for key in policy_keys(rule):
        assert f"\n  {key}\n" in out + "\n"


def test_an_older_forgotten_capacity_clause_still_loads():
    """Before GPU007, `forgotten_capacity` held the stopped machines too (`require_owner: false`: only those). Such
    a policy loads as it was written; its stopped machine that still pays is GPU007's, at GPU007's defaults, and
    GPU005 then judges no ownership, so flags nothing."""
    policy = parse_policy("policy: older\nowner: owner@example.com\nclauses:\n  forgotten_capacity:\n"
                          "    text: Every GPU machine has an owner; a stopped one gives up its disks.\n"
                          "    min_days: 7\n    require_owner: false\n", "<older policy>")
    rules = {r.id: r for r in configured_rules(policy, ["GPU005", "GPU007"])}
    assert rules["GPU007"].opt("min_stopped_days") == 7 and rules["GPU005"].opt("require_owner") is False
    ctx = context()
    ctx.policy = policy
    machines = [make_entity(GpuCapacity, e) for c in CASES for e in c.entities
                if c.id in ("GPU007-owned_parked_vm_with_disks_still_billing_fails",
                            "GPU005-nobody_behind_it_and_measured_idle_fails")]
    assert len(machines) == 2
    assert [f.rule for m in machines for r in rules.values() for f in r.check(m, ctx)] == ["GPU007"]

"""Cost per job (tables/jobcost.py) and its views: the demo's SageMaker jobs against the export read independently,
and a small FOCUS export for the other ways a job's cost is found (job labels, node share, a sweep's trials)."""

from __future__ import annotations

import csv
import gzip
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from auditor.core import run_audit
from auditor.model import money
from auditor.outputs.report import render_html, render_md, write_outputs
from auditor.policy import load_policy
from auditor.window import Window

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"


def export_cost_by_resource(folder: Path, marker: str) -> dict[str, Decimal]:
    """Billed cost per resource id whose id holds `marker`, read from the CUR files with the csv module."""
    out: dict[str, Decimal] = {}
    for path in sorted(folder.glob("aws-cur-*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                rid = row.get("lineItem/ResourceId") or row.get("line_item_resource_id") or ""
                cost = row.get("lineItem/UnblendedCost") or row.get("line_item_unblended_cost")
                if marker in rid:
                    out[rid] = out.get(rid, Decimal(0)) + Decimal(cost)
    return out


@pytest.fixture(scope="module")
def demo(demo_audit_result, tmp_path_factory):
    audit = demo_audit_result  # the demo, 2026-Q3, today 2026-10-15, with the inventory (conftest)
    out = tmp_path_factory.mktemp("demo")
    write_outputs(audit, out)
    with open(out / "jobs.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return audit, json.loads((out / "audit.json").read_text(encoding="utf-8")), rows


@pytest.mark.heavy
def test_demo_jobs_cost_what_the_export_bills_them(demo):
    _, doc, rows = demo
    billed = export_cost_by_resource(DEMO / "billing", ":training-job/")
    assert len(billed) == 6
    assert {r["id"]: r["cost"] for r in rows} == {rid: str(money(c)) for rid, c in billed.items()}
    assert {r["cost_basis"] for r in rows} == {"resource"}
    # the total is summed exactly, then rounded once: equal to the export's to the cent
    assert doc["summary"]["jobs"]["cost"] == {"USD": str(money(sum(billed.values())))}
    assert doc["summary"]["jobs"]["count"] == 6 and doc["summary"]["jobs"]["unpriced"] == 0
    assert [j["id"] for j in doc["jobs"]] == [r["id"] for r in rows]  # audit.json carries the same jobs


def test_demo_jobs_hours_waste_and_findings(demo):
    audit, doc, rows = demo
    by_name = {r["name"]: r for r in rows}
    detector = by_name["vision-detector-v3-train-0805"]
    # 60 hours of ml.p4d.24xlarge (8 GPUs) at $21.96 an hour
    assert (detector["gpu_hours"], detector["cost"], detector["spot"]) == ("480.0", "1317.60", "False")
    sam = by_name["vision-sam-ft-spot-0909"]
    # 3 interruptions x half its 240-minute checkpoint interval x 8 GPUs = 48 GPU-hours of 240 redone
    assert (sam["gpu_hours"], sam["lost_gpu_hours"], sam["interruptions"]) == ("240.0", "48.0", "3")
    assert sam["waste"] == str(money(Decimal(sam["cost"]) * 48 / 240))
    assert sam["efficiency_pct"] == ""  # no utilisation measured: no efficiency claimed
    # interrupted without a checkpoint: what was lost is not known, so not counted
    assert by_name["nlp-llama-ft-spot-0814"]["lost_gpu_hours"] == ""
    spot001 = {f.fingerprint for f in audit.findings if f.rule == "SPOT001"}
    linked = {fp for r in rows for fp in json.loads(r["findings"])}
    assert spot001 <= linked
    assert sam["team"] == "vision" and sam["owner"] == "priya@example.com"


def test_demo_jobs_section_in_both_reports(demo):
    _, doc, rows = demo
    total = money(sum(export_cost_by_resource(DEMO / "billing", ":training-job/").values()))
    md, html = render_md(doc), render_html(doc)
    assert f"6 training jobs and sweeps in the window cost ${total:,}" in md
    assert "| vision-detector-v3-train-0805 | vision | 480.0 | – | $1,317.60 | $0.00 | SPOT002 |" in md
    assert "- **vision**: vision-sam-ft-spot-0909 $46.12 (48.0 GPU-hours lost)" in md
    assert '<h2 style="font-size:19px;margin:0 0 12px 0;padding-bottom:6px;border-bottom:2px solid #0d1117;' \
           'color:#0d1117;">Jobs</h2>' in html
    assert "$1,317.60" in html
    nlp = render_md(doc, team="nlp")
    assert "3 training jobs and sweeps" in nlp and "vision-detector" not in nlp.split("## Jobs")[1].split("##")[0]


# ---- the other ways: job labels, node share, a sweep's trials -------------------------------------------------

SUB = "/subscriptions/0000"
CLUSTER = f"{SUB}/resourcegroups/ml/providers/microsoft.machinelearningservices/workspaces/ws/computes/gpu"
NODE = f"{SUB}/resourcegroups/mc_aks/providers/microsoft.compute/virtualmachinescalesets/aks-gpu/virtualmachines/0"
VM = "Standard_NC24ads_A100_v4"


def focus_line(day: int, resource: str, cost: str, hours: str, tags: dict[str, str]) -> dict[str, str]:
    start, end = datetime(2026, 8, day), datetime(2026, 8, day + 1)
    return {"BilledCost": cost, "EffectiveCost": cost, "ListCost": cost, "BillingCurrency": "USD",
            "BillingAccountId": "acct", "ChargeCategory": "Usage", "ChargeDescription": f"NC24ads A100 v4 - {VM}",
            "ChargePeriodStart": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "ChargePeriodEnd": end.strftime("%Y-%m-%dT%H:%M:%SZ"), "ConsumedQuantity": hours,
            "ConsumedUnit": "Hours", "PricingCategory": "Standard", "ProviderName": "Microsoft",
            "RegionId": "eastus", "ResourceId": resource, "ServiceCategory": "Compute",
            "ServiceName": "Virtual Machines", "SubAccountId": SUB, "Tags": json.dumps(tags),
            "x_SkuDetails": json.dumps({"ServiceType": VM})}


def write_focus(path: Path, lines: list[dict[str, str]]) -> Path:
    """The lines as a FOCUS CSV with the demo export's header."""
    header = (DEMO / "billing" / "focus-azure-2026-q3.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, header)
        w.writeheader()
        w.writerows(lines)
    return path


@pytest.mark.heavy
def test_labels_node_share_and_sweeps(tmp_path):
    lines = [focus_line(1, CLUSTER, "100.00", "27.2257", {"team": "nlp", "job": "train-bert"}),
             focus_line(2, CLUSTER, "50.25", "13.6809", {"team": "nlp", "Job": "train-bert"}),
             focus_line(3, CLUSTER, "40.00", "10.89", {"job": "trial-1"}),
             focus_line(4, CLUSTER, "10.00", "2.7226", {"job": "trial-2"}),
             focus_line(5, CLUSTER, "30.00", "8.1677", {"job": "trial-3"}),
             focus_line(6, NODE, "88.152", "24", {"team": "platform"})]
    billing = write_focus(tmp_path / "focus.csv", lines)
    job = {"platform": "azureml", "provider": "azure", "account": SUB, "region": "eastus", "instance_type": VM}
    trial = {**job, "sweep_id": f"{SUB}/jobs/hp-sweep", "tags": {"team": "vision"}}
    inventory = {"version": 1, "assets": [], "gpu_usage": [], "jobs": [
        {**job, "id": f"{SUB}/jobs/train-bert", "name": "train-bert", "state": "completed", "tags": {"team": "nlp"}},
        {**job, "id": f"{SUB}/jobs/hp-sweep", "name": "hp-sweep", "kind": "sweep", "sweep_max_trials": 3,
         "tags": {"team": "vision"}},
        {**trial, "id": f"{SUB}/jobs/trial-1", "name": "trial-1", "state": "completed"},
        {**trial, "id": f"{SUB}/jobs/trial-2", "name": "trial-2", "state": "stopped"},
        {**trial, "id": f"{SUB}/jobs/trial-3", "name": "trial-3", "state": "completed"},
        {"id": "k8s:platform/Job/eval", "name": "eval", "platform": "kubernetes", "provider": "azure",
         "region": "eastus", "instance_type": VM, "start_time": "2026-08-06T02:00:00Z",
         "end_time": "2026-08-06T08:00:00Z", "mean_util_pct": 50, "tags": {"team": "platform"}},
        {"id": "k8s:platform/Job/unbilled", "platform": "kubernetes", "provider": "azure", "region": "westus",
         "instance_type": VM, "start_time": "2026-08-06T02:00:00Z", "end_time": "2026-08-06T08:00:00Z"}]}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory), encoding="utf-8")
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: t\nowner: o@example.com\n", encoding="utf-8")
    audit = run_audit(load_policy(policy), [billing], tmp_path / "inventory.json",
                      Window(datetime(2026, 8, 1), datetime(2026, 9, 1), "2026-08"), date(2026, 9, 1))
    jobs = {j["name"] or j["id"]: j for j in audit.jobs}
    assert (jobs["train-bert"]["cost"], jobs["train-bert"]["cost_basis"]) == (Decimal("150.25"), "label")
    assert jobs["train-bert"]["team"] == "nlp"
    sweep = jobs["hp-sweep"]
    assert (sweep["cost"], sweep["trials"], sweep["trials_completed"], sweep["trials_stopped_early"]) == \
        (Decimal("80.00"), 3, 2, 1)
    assert sweep["cost_per_completed_trial"] == Decimal("40")
    assert jobs["trial-2"]["sweep_id"] == sweep["id"] and jobs["trial-2"]["cost"] == Decimal("10.00")
    # the snapshot's sweep reaches HPO001 in the audit (no early stopping), and its finding is linked to the sweep
    hpo = [f for f in audit.findings if f.rule == "HPO001" and f.resource == sweep["id"]]
    assert [f.key for f in hpo] == ["early-stopping"]
    assert hpo[0].fingerprint in [f["fingerprint"] for f in sweep["findings"]]
    # 6 of the node type's 24 billed GPU-hours: a quarter of its 88.152
    evaluation = jobs["eval"]
    assert (evaluation["cost_basis"], money(evaluation["cost"]), evaluation["gpu_hours"]) == \
        ("node_share", Decimal("22.04"), "6.0")
    assert (evaluation["efficiency_pct"], evaluation["useful_gpu_hours"], evaluation["waste"]) == \
        ("50.0", "3.0", Decimal("11.019"))  # half its cost, exact; rounded once where it is written
    assert jobs["k8s:platform/Job/unbilled"]["cost"] is None  # no node of its type billed in its region
    counted = sum(j["cost"] for j in audit.jobs if j["cost"] is not None and not j["sweep_id"])
    assert money(counted) == Decimal("252.29")  # 150.25 + 80.00 + 22.04: each line once
    assert money(audit.summary["jobs"]["cost"]["USD"]) == Decimal("252.29")


@pytest.mark.heavy
def test_a_job_label_names_a_job_by_its_id_or_its_name_and_counts_once(tmp_path):
    """Lines labelled with a job's id, or with its name: each labelled line counts once for the job, also where the
    job has no name of its own (its name is then its id, and both ways find the same lines)."""
    lines = [focus_line(1, CLUSTER, "7.00", "1.9", {"job": "k8s:ml/Job/by-id"}),
             focus_line(2, CLUSTER, "5.00", "1.4", {"job": "k8s:ml/Job/no-name"}),
             focus_line(3, CLUSTER, "3.00", "0.8", {"job": "Nightly Eval"})]
    billing = write_focus(tmp_path / "focus.csv", lines)
    job = {"platform": "kubernetes", "provider": "azure", "region": "eastus", "instance_type": VM}
    inventory = {"version": 1, "assets": [], "gpu_usage": [], "jobs": [
        {**job, "id": "k8s:ml/Job/by-id", "name": "by id run"},
        {**job, "id": "k8s:ml/Job/no-name"},
        {**job, "id": "k8s:ml/Job/nightly", "name": "nightly eval"}]}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory), encoding="utf-8")
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: t\nowner: o@example.com\n", encoding="utf-8")
    audit = run_audit(load_policy(policy), [billing], tmp_path / "inventory.json",
                      Window(datetime(2026, 8, 1), datetime(2026, 9, 1), "2026-08"), date(2026, 9, 1))
    assert {j["id"]: (j["cost"], j["cost_basis"]) for j in audit.jobs} == {
        "k8s:ml/Job/by-id": (Decimal("7.00"), "label"), "k8s:ml/Job/no-name": (Decimal("5.00"), "label"),
        "k8s:ml/Job/nightly": (Decimal("3.00"), "label")}

"""OFF001 end to end (tables/interactive.py, the rule): a week written for the test. An Azure ML compute instance
with an owner, billed 24 h a day at $3.673/h from Monday 2026-07-06 to Sunday 2026-07-12, reports hourly GPU
utilisation: 40% from 08:00 to 19:00 UTC on weekdays, 0% otherwise. The right answer, from the rule's docs: 13
off-hours a weekday x 5 + 48 weekend hours = 113 idle off-hours of 168 measured; a schedule saves
3.673 x 113 x 730 / 168 = $1,803.49 a month. A training VM with the same pattern, and a notebook without an
owner, are not flagged."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from decimal import Decimal

import billing_csv
import pytest
from conftest import REPO

from auditor.core import run_audit
from auditor.policy import load_policy
from auditor.window import parse_quarter

DEMO = REPO / "fixtures" / "demo"
ML = "/subscriptions/s/resourcegroups/rg/providers/microsoft.machinelearningservices/workspaces/w/computes/"
VM = "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/train-1"
MONDAY = datetime(2026, 7, 6)


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("offhours")
    machines = {ML + "ci-ana": {"owner": "ana@example.com"}, VM: {"owner": "ana@example.com"},
                ML + "ci-shared": {"team": "nlp"}}
    charges, assets, usage = [], [], []
    for rid, tags in machines.items():
        for d in range(7):
            day = MONDAY + timedelta(days=d)
            charges.append(billing_csv.charge(rid, day, tags))  # 24 h of the A100 VM at $3.673: $88.152
        assets.append({"id": rid, "provider": "azure", "kind": "vm", "instance_type": "Standard_NC24ads_A100_v4",
                       "tags": tags})
        for h in range(168):
            t = MONDAY + timedelta(hours=h)
            working = t.weekday() < 5 and 8 <= t.hour < 19
            usage.append({"asset_id": rid, "window_start": f"{t:%Y-%m-%dT%H:%M:%SZ}",
                          "window_end": f"{t + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}", "samples": 60,
                          "mean_util_pct": 40.0 if working else 0.0, "source": "test"})
    billing = billing_csv.write(folder / "billing.csv", charges)
    inventory = folder / "inventory.json"
    inventory.write_text(json.dumps({"version": 1, "assets": assets, "gpu_usage": usage, "jobs": []}))
    doc = run_audit(load_policy(DEMO / "policy.yml"), [billing], inventory, parse_quarter("2026-Q3"),
                    date(2026, 10, 15), select=["OFF001"]).to_dict()
    return [f for f in doc["findings"] if f["rule"] == "OFF001"]


@pytest.mark.heavy
def test_the_compute_instance_is_flagged_with_the_stated_saving(findings):
    [f] = findings
    assert f["resource"] == ML + "ci-ana" and f["owner"] == "ana@example.com"
    assert f["evidence"]["platform"] == "azureml-compute-instance"
    assert f["evidence"]["idle_off_hours"] == 113 and f["evidence"]["sampled_hours"] == 168
    assert Decimal(f["monthly_savings"]) == Decimal("1803.49")
    assert Decimal(f["cost"]) == Decimal("617.06")  # 7 x $88.152, billed in the window
    assert "for 113.0 off-hours" in f["message"] and "billed at $3.67/h" in f["message"]


@pytest.fixture(scope="module")
def pod_findings(tmp_path_factory) -> list[dict]:
    """A Kubernetes node (the same VM size, launched Monday 2026-07-06, billed every day to the quarter's end:
    87 x $88.152) whose one GPU a pod labelled `workload: interactive` holds from launch on, so the pod's share is
    the node's whole cost, 2,088 h at $3.673. Its slice reports the same pattern as above for the first week:
    113 idle off-hours of 168 measured, $1,803.49 a month. A second pod, labelled for training, is not flagged."""
    folder = tmp_path_factory.mktemp("offhours-pods")
    node = "/subscriptions/s/resourcegroups/mc/providers/microsoft.compute/virtualmachines/aks-gpu-0"
    nodes = [node, node + "b"]
    charges = []
    for rid in nodes:
        day = MONDAY
        while day < datetime(2026, 10, 1):
            charges.append(billing_csv.charge(rid, day))
            day += timedelta(days=1)
    pods = {"jupyter-ana": {"workload": "interactive", "owner": "ana@example.com"},
            "trainer": {"workload": "training", "owner": "ana@example.com"}}
    usage = []
    for pod in pods:
        for h in range(168):
            t = MONDAY + timedelta(hours=h)
            working = t.weekday() < 5 and 8 <= t.hour < 19
            usage.append({"asset_id": nodes[0] if pod == "jupyter-ana" else nodes[1], "gpu": "0", "uuid": f"GPU-{pod}",
                          "namespace": "nb", "pod": pod, "window_start": f"{t:%Y-%m-%dT%H:%M:%SZ}",
                          "window_end": f"{t + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}", "samples": 60,
                          "mean_active_pct": 40.0 if working else 0.0, "source": "test"})
    inventory = {
        "version": 1, "jobs": [],
        "assets": [{"id": rid, "provider": "azure", "kind": "node", "instance_type": "Standard_NC24ads_A100_v4",
                    "launch_time": f"{MONDAY:%Y-%m-%dT%H:%M:%SZ}", "tags": {}} for rid in nodes],
        "gpu_units": [{"asset_id": rid, "resource": "nvidia.com/gpu", "sharing": "none", "count": 1, "slices": 1,
                       "slices_per_gpu": 1} for rid in nodes],
        "gpu_allocations": [{"id": f"nb/{pod}", "asset_id": nodes[0] if pod == "jupyter-ana" else nodes[1],
                             "resource": "nvidia.com/gpu", "units": 1, "namespace": "nb", "pod": pod,
                             "state": "Running", "start_time": f"{MONDAY:%Y-%m-%dT%H:%M:%SZ}", "tags": tags}
                            for pod, tags in pods.items()],
        "slice_usage": usage,
    }
    billing = billing_csv.write(folder / "billing.csv", charges)
    (folder / "inventory.json").write_text(json.dumps(inventory))
    doc = run_audit(load_policy(DEMO / "policy.yml"), [billing], folder / "inventory.json", parse_quarter("2026-Q3"),
                    date(2026, 10, 15), select=["OFF001"]).to_dict()
    return [f for f in doc["findings"] if f["rule"] == "OFF001"]


@pytest.mark.heavy
def test_an_interactive_pod_is_flagged_with_the_stated_saving(pod_findings):
    [f] = pod_findings
    assert f["resource"] == "nb/jupyter-ana" and f["evidence"]["platform"] == "kubernetes-pod"
    assert f["evidence"]["idle_off_hours"] == 113 and f["evidence"]["sampled_hours"] == 168
    assert Decimal(f["cost"]) == Decimal("7669.22")  # 87 x $88.152
    assert Decimal(f["monthly_savings"]) == Decimal("1803.49")


@pytest.mark.heavy
@pytest.mark.parametrize("option, value, message", [
    ("time_zone", "Mars/Olympus", "clauses.off_hours.time_zone: unknown time zone 'Mars/Olympus'"),
    ("work_end", "7pm", "clauses.off_hours.work_end: '7pm' is not a time of day (HH:MM)"),
])
def test_a_bad_clause_is_one_line_before_anything_is_written(tmp_path, option, value, message):
    from click.testing import CliRunner

    from auditor.cli import cli

    policy = tmp_path / "policy.yml"
    policy.write_text(f"policy: t\nowner: o@example.com\nclauses:\n  off_hours:\n    {option}: {value!r}\n")
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--quarter", "2026-Q3", "-q", "--out",
                                      str(tmp_path / "out"), str(DEMO / "billing")])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()

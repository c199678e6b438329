"""The pull framework on its own: atomic snapshot writes, the manifest, reading snapshots back, and that an
audit on files never imports a cloud SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import InputError
from auditor.providers.live import pull as pull_module
from auditor.providers.live.inputs import audit_inputs, merge_inventories
from auditor.providers.live.pull import PullOptions, Retry, pages, pull_snapshot, usage_summary
from auditor.window import Window

REPO = Path(__file__).resolve().parents[1]
WINDOW = Window(datetime(2026, 7, 1), datetime(2026, 10, 1), "2026-Q3")


def adapter(p):
    p.run("fake:ok", "inventory", lambda: p.assets.append(
        {"id": "i-1", "provider": "aws", "instance_type": "g5.xlarge", "tags": {}}) or {"assets": 1})
    p.run("fake:down", "billing", lambda: (_ for _ in ()).throw(ConnectionError("endpoint down")))
    target = p.billing_path("../../escape/cur.csv")
    target.write_text((REPO / "fixtures" / "billing" / "cur-gpu-spot.csv").read_text())


@pytest.mark.heavy
def test_snapshot_manifest_and_partial_audit(tmp_path):
    manifest = pull_snapshot(PullOptions("aws", WINDOW), tmp_path / "snap", adapter=adapter)
    snap = tmp_path / "snap"
    assert (snap / "billing" / "escape" / "cur.csv").is_file()  # `..` never leaves billing/
    assert manifest["failed"] == [{"name": "fake:down", "reason": "ConnectionError: endpoint down"}]
    assert {f["path"] for f in manifest["files"]} == {"billing/escape/cur.csv", "inventory.json"}
    assert json.loads((snap / "manifest.json").read_text()) == manifest

    inputs = audit_inputs([snap])
    assert inputs.billing == [snap / "billing"] and inputs.missing == [f"{snap}: fake:down"]
    assert inputs.window.start == WINDOW.start and inputs.window.label == "2026-Q3"
    policy = REPO / "fixtures" / "demo" / "policy.yml"
    result = CliRunner().invoke(cli, ["audit", "--policy", str(policy), "--out", str(tmp_path / "r"), str(snap)])
    assert result.exit_code == 3, result.output
    assert "fake:down" in result.stderr

    (snap / "billing" / "escape" / "cur.csv").write_text("tampered")
    assert any("changed since the pull" in w for w in audit_inputs([snap]).warnings)


def test_a_crashing_adapter_leaves_nothing(tmp_path):
    def crash(p):
        p.billing_path("x.csv").write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        pull_snapshot(PullOptions("aws", WINDOW), tmp_path / "snap", adapter=crash)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_sdk_is_an_input_error(tmp_path, monkeypatch):
    monkeypatch.setitem(pull_module.ADAPTERS, "gcp", "no_such_adapter_module")
    with pytest.raises(InputError, match=r"pip install 'gpu-auditor\[gcp\]'"):
        pull_snapshot(PullOptions("gcp", WINDOW), tmp_path / "snap")
    assert list(tmp_path.iterdir()) == []


def test_pages_stop_on_a_repeated_token():
    answers = iter([{"NextToken": "a"}, {"NextToken": "a"}])
    with pytest.raises(RuntimeError, match="twice"):
        list(pages(lambda **kw: next(answers), Retry(), lambda e: False))


def test_usage_summary_and_merge():
    t = [datetime(2026, 7, 1, h) for h in range(20)]
    u = usage_summary("i-1", [[(x, 10.0 * (i % 2)) for i, x in enumerate(t)], [(x, 0.0) for x in t]],
                      [[(t[0], 2048.0)]], 3600, "test")
    assert (u["samples"], u["mean_util_pct"], u["p95_util_pct"], u["peak_mem_gb"]) == (20, 2.5, 5.0, 2.0)
    assert u["window_end"] == "2026-07-01T20:00:00Z"
    a = {"assets": [{"id": "i-1", "provider": "aws", "gpu_model": None, "lifecycle": "spot"}], "gpu_usage": [],
         "jobs": []}
    b = {"assets": [{"id": "i-1", "provider": "aws", "gpu_model": "A10G"}], "gpu_usage": [{"asset_id": "i-1"}],
         "jobs": []}
    merged = merge_inventories([a, b])
    assert merged["assets"] == [{"id": "i-1", "provider": "aws", "gpu_model": "A10G", "lifecycle": "spot"}]
    assert len(merged["gpu_usage"]) == 1


@pytest.mark.parametrize("args, message", [
    (["--policy", "fixtures/demo/policy.yml"], "give billing files"),
    (["--policy", "fixtures/demo/policy.yml", "--provider", "aws", "fixtures/demo/billing"], "--live"),
    (["--policy", "fixtures/demo/policy.yml", "--live"], "--live needs --provider"),
])
def test_audit_usage_errors(args, message, monkeypatch):
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli, ["audit", *args])
    assert result.exit_code == 2 and message in result.output


@pytest.mark.heavy
def test_an_audit_on_files_imports_no_cloud_sdk(tmp_path):
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom auditor.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['audit', '--policy', 'fixtures/demo/policy.yml', '--inventory', "
        f"'fixtures/demo/inventory.json', '--out', {str(tmp_path / 'r')!r}, 'fixtures/demo/billing'])\n"
        "assert r.exit_code == 0, r.output\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'google', 'azure', "
        "'kubernetes'))\nprint(loaded)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

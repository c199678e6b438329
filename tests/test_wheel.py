"""The built wheel, installed in a fresh virtual environment, works on its own: rule pack, templates and
catalog ship inside the package, and the console script runs the demo audit from outside the repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
pytestmark = pytest.mark.slow  # builds the wheel and installs it into a fresh virtual environment
RULE_IDS = ("GPU001", "GPU002", "TAG001", "NET001", "SPOT001")


def clean_env() -> dict[str, str]:
    """The environment without anything that would let the venv see the repository's own checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_REQUIRE"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def sh(*cmd, cwd: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory, built_wheel) -> dict[str, Path]:
    """The wheel (built once a session, conftest.built_wheel) installed with its dependencies into a fresh venv:
    once for the module. The venv is made without pip (its own copy is 4 s of CPU to install), and this run's
    pip installs into it (`--python`)."""
    root = tmp_path_factory.mktemp("wheel")
    env_dir, outside = root / "venv", root / "elsewhere"
    outside.mkdir()
    sh(sys.executable, "-m", "venv", "--without-pip", env_dir, cwd=outside)
    sh(sys.executable, "-m", "pip", "--python", env_dir / "bin" / "python", "install", built_wheel, cwd=outside,
       timeout=300)
    return {"root": root, "wheel": built_wheel, "bin": env_dir / "bin", "venv": env_dir, "outside": outside}


def test_wheel_contents(venv):
    import zipfile

    names = set(zipfile.ZipFile(venv["wheel"]).namelist())
    for name in ("auditor/cli/__init__.py", "auditor/reports/report.html.j2", "auditor/reports/report.md.j2",
                 "auditor/data/catalog.yaml", "auditor/rules/__init__.py", "auditor/rules/GPU001_idle_gpu.py",
                 "auditor/rules/SPOT001_spot_without_checkpoint.py"):
        assert name in names, name
    assert not any(n.startswith(("tests/", "fixtures/", "rules/", "reports/")) for n in names)


def test_rules_list_from_the_installed_script(venv):
    proc = sh(venv["bin"] / "gpu-auditor", "rules", "list", cwd=venv["outside"])
    ids = [line.split()[0] for line in proc.stdout.strip().splitlines()]
    assert set(RULE_IDS) <= set(ids)
    proc = sh(venv["bin"] / "gpu-auditor", "--version", cwd=venv["outside"])
    assert "gpu-auditor, version" in proc.stdout


def test_demo_audit_from_the_installed_script(venv):
    out = venv["root"] / "r"
    proc = subprocess.run(
        [str(venv["bin"] / "gpu-auditor"), "audit", "--policy", str(DEMO / "policy.yml"), "--inventory",
         str(DEMO / "inventory.json"), "--quarter", "2026-Q3", "--out", str(out), str(DEMO / "billing")],
        cwd=venv["outside"], env=clean_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (out / "report.html").is_file()
    assert (out / "report.html").read_text(encoding="utf-8").lstrip().startswith("<!DOCTYPE html>")
    for name in ("audit.json", "report.md", "findings.csv"):
        assert (out / name).is_file(), name
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert doc["summary"]["billed_cost"]["USD"] == "341964.32"
    assert {f["rule"] for f in doc["findings"]} >= {"GPU001", "GPU002", "TAG001", "NET001"}


def test_package_data_is_inside_the_installed_package(venv):
    code = """
import json, auditor, auditor.rules, auditor.reports, auditor.data
from importlib import resources
from auditor.registry import all_rules
from auditor.providers.catalog import load_catalog
print(json.dumps({
    "auditor": auditor.__file__, "rules": list(auditor.rules.__path__), "reports": list(auditor.reports.__path__),
    "html": str(resources.files("auditor.reports").joinpath("report.html.j2")),
    "md": str(resources.files("auditor.reports").joinpath("report.md.j2")),
    "catalog": str(resources.files("auditor.data").joinpath("catalog.yaml")),
    "rule_ids": [r.id for r in all_rules()], "rule_files": [__import__("sys").modules[r.__module__].__file__
                                                          for r in all_rules()],
    "gpus": len(load_catalog().gpus),
}))
"""
    sh(venv["bin"] / "python", "-c", "import auditor.rules, auditor.reports", cwd=venv["outside"])
    proc = sh(venv["bin"] / "python", "-c", code, cwd=venv["outside"])
    info = json.loads(proc.stdout)
    venv_dir = venv["venv"].resolve()
    paths = [info["auditor"], *info["rules"], *info["reports"], info["html"], info["md"], info["catalog"],
             *info["rule_files"]]
    for p in paths:
        resolved = Path(p).resolve()
        assert resolved.is_relative_to(venv_dir), p
        assert not resolved.is_relative_to(REPO.resolve()), p
    for p in (info["html"], info["md"], info["catalog"]):
        assert Path(p).is_file(), p
    assert set(RULE_IDS) <= set(info["rule_ids"])
    assert info["gpus"] > 0

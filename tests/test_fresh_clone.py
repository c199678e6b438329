"""The README's promise to a newcomer: on a plain clone with nothing beside it (no ../shared, no GPU_AUDITOR_*
variables), the fast loop passes, and what it cannot run for want of a file from outside the repository is
skipped with its reason, never crashed on. The clone is made from this checkout's last commit into an empty
folder; it runs with this test run's interpreter and packages, its own code first on the path (no install, to
keep it cheap)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_fast_loop_passes_on_a_plain_clone(tmp_path):
    if not (REPO / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout, or git is not installed: there is nothing to clone")
    clone = tmp_path / "empty" / "gpu-auditor"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    assert sorted(p.name for p in clone.parent.iterdir()) == ["gpu-auditor"]  # nothing beside it
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDITOR_")}
    env["PYTHONPATH"] = str(clone)
    r = subprocess.run([sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider"],
                       cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
    tail = r.stdout[-4000:]
    assert r.returncode == 0, tail
    assert " failed" not in tail and " error" not in tail, tail
    # the public samples' tests were skipped, and the skip says what is missing and where it is read from
    assert "not found: the public samples" in r.stdout and "../shared/samples beside the repository" in r.stdout

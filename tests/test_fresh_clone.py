"""The README's promise to a newcomer: on a plain clone with nothing beside it (no ../shared, no GPU_AUDITOR_*
variables), the fast loop passes, and what it cannot run for want of a file from outside the repository is
skipped with its reason, never crashed on.

The clone collects every test of the fast loop (nothing a test module imports is missing from the repository) and
runs the tests that read from outside it (GPU_AUDITOR_ONLY_OUTSIDE, tests/conftest.py): those are the tests a
clone runs differently. The others need only the repository, and CI runs them on its own clean checkout, so the
clone does not run them a second time (they were 11 of this check's 12 minutes of CPU).

The clone is made from this checkout's last commit into an empty folder and installed into a virtual
environment of its own (`pip install -e`, as the README says), which reuses this run's dependencies through a
.pth file instead of downloading them again: cheap (the build backend is all it fetches), and the clone's own
code, templates and rules are what run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_fast_loop_passes_on_a_plain_clone():
    if not (REPO / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout, or git is not installed: there is nothing to clone")
    # Not under pytest's tmp_path: its folders are the running user's alone (0700), and the clone's own tests run
    # some commands as an unprivileged user (tests/unprivileged.py), who must be able to read the clone.
    root = Path(tempfile.mkdtemp(prefix="gpu-auditor-fresh-clone-"))
    root.chmod(0o755)
    try:
        _fast_loop_on_a_clone(root / "empty" / "gpu-auditor")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _fast_loop_on_a_clone(clone: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    assert sorted(p.name for p in clone.parent.iterdir()) == ["gpu-auditor"]  # nothing beside it
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # not its .pth files
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_AUDITOR_", "PYTHON"))}
    # only the build backend (setuptools, as pyproject.toml asks) is fetched from the package index
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "-e", "."],
                   cwd=clone, env=env, check=True, timeout=300)
    where = subprocess.run([python, "-c", "import auditor.reports, auditor.rules; print(auditor.reports.__path__[0])"],
                           cwd="/", env=env, check=True, capture_output=True, text=True).stdout.strip()
    assert Path(where).resolve() == (clone / "reports").resolve()  # the clone's templates, not this checkout's
    # In one process (-n 0): the clone runs a few hundred tests while this suite's other worker runs on; two
    # workers of its own would each collect the whole suite again and take that worker's core (10 s of CPU more).
    r = subprocess.run([python, "-m", "pytest", "-m", "not slow or heavy", "-q", "-p", "no:cacheprovider", "-n", "0"],
                       cwd=clone, env={**env, "GPU_AUDITOR_ONLY_OUTSIDE": "1"}, capture_output=True, text=True,
                       timeout=3600)
    tail = r.stdout[-4000:]
    assert r.returncode == 0, tail
    assert " failed" not in tail and " error" not in tail, tail
    # every module was collected (an error importing one fails the run); those that read from outside ran
    assert re.search(r"\d+ passed, \d+ skipped", tail), tail
    # the public samples' tests were skipped, and the skip says what is missing and where it is read from
    assert "not found: the public samples" in r.stdout and "../shared/samples beside the repository" in r.stdout

"""The gate where CI runs it, run for real on a passing and a failing manifest:

* the pre-commit hook this repository ships (.pre-commit-hooks.yaml), run by `pre-commit` (PyPI, a test
  dependency) in a temporary git repository. The hook is taken from the file as it is and run as a `repo: local`
  hook with `language: system` (the gpu-auditor of this checkout on PATH), so pre-commit installs nothing and
  needs no network;
* the composite GitHub Action (action.yml): each `run:` step executed by bash the way the runner executes it
  (`bash --noprofile --norc -eo pipefail`, the step's `env:` with its expressions evaluated, GITHUB_OUTPUT,
  GITHUB_STEP_SUMMARY and GITHUB_PATH files read back between steps); `uses:` steps are checked, not run;
* the GitLab CI example (docs/ci/gitlab-ci.yml): its script lines run by bash with its variables, as the runner
  runs a job, in a fresh virtual environment standing in for the job's image.

The action's and the GitLab job's own `pip install` of this checkout makes those tests slow."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "fixtures" / "manifests"
SUMMARY = re.compile(r"^gpu-auditor gate: .*; fail on high: (PASS|FAIL)")


def workspace(root: Path, manifest: str) -> Path:
    """A checkout of an ML repository: the policy and one training job in k8s/."""
    root.mkdir(parents=True)
    shutil.copy(MANIFESTS / "policy.yml", root / "gpu-policy.yml")
    (root / "k8s").mkdir()
    shutil.copy(MANIFESTS / "kubernetes" / manifest, root / "k8s" / "train.yaml")
    return root


# --- pre-commit ------------------------------------------------------------------------------------------------


def git(repo: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def hook_repo(tmp_path: Path) -> tuple[Path, dict]:
    """A git repository whose .pre-commit-config.yaml runs the shipped hook as it is shipped (no args: the policy
    is gpu-policy.yml at the root, where `policy init` writes it; its own `files` pattern)."""
    [hook] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    local = {**hook, "language": "system"}
    repo = tmp_path / "ml-repo"
    repo.mkdir()
    shutil.copy(MANIFESTS / "policy.yml", repo / "gpu-policy.yml")
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "GIT_AUTHOR_NAME": "t", "GIT_COMMITTER_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_EMAIL": "t@example.com"}
    assert git(repo, "init", "-q", "-b", "main", env=env).returncode == 0
    r = subprocess.run([sys.executable, "-m", "pre_commit", "install"], cwd=repo, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return repo, env


def test_the_shipped_hook_runs_the_gate_on_manifests() -> None:
    [hook] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gpu-auditor-gate" and hook["entry"].startswith("gpu-auditor gate")
    assert hook["language"] == "python"
    assert re.search(hook["files"], "k8s/train.yaml") and re.search(hook["files"], "sm/job.json")
    assert not re.search(hook["files"], "README.md")


@pytest.mark.heavy
def test_pre_commit_hook_blocks_a_failing_manifest_and_lets_a_passing_one_through(hook_repo) -> None:
    repo, env = hook_repo
    (repo / "k8s").mkdir()
    shutil.copy(MANIFESTS / "kubernetes" / "job-bad.yaml", repo / "k8s" / "train.yaml")
    git(repo, "add", "-A", env=env)
    blocked = git(repo, "commit", "-q", "-m", "train on spot", env=env)
    out = blocked.stdout + blocked.stderr
    assert blocked.returncode == 1, out
    assert "gpu-auditor gate" in out and "Failed" in out and "k8s/train.yaml:2: error: SPOT001" in out, out
    assert "fail on high: FAIL" in out
    assert git(repo, "rev-parse", "--verify", "HEAD", env=env).returncode != 0, "the commit must not exist"

    shutil.copy(MANIFESTS / "kubernetes" / "job-good.yaml", repo / "k8s" / "train.yaml")
    git(repo, "add", "-A", env=env)
    passed = git(repo, "commit", "-q", "-m", "train on spot, with checkpoints", env=env)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert git(repo, "rev-parse", "--verify", "HEAD", env=env).returncode == 0


@pytest.mark.heavy
def test_pre_commit_hook_warns_about_yaml_that_is_no_manifest(hook_repo) -> None:
    """The shipped hook sees every YAML file it is given; --skip-unknown (in its entry) warns and passes."""
    repo, env = hook_repo
    (repo / "k8s").mkdir()
    (repo / "k8s" / "values.yaml").write_text("replicas: 2\nimage: trainer:1.0\n")
    shutil.copy(MANIFESTS / "kubernetes" / "job-good.yaml", repo / "k8s" / "train.yaml")
    git(repo, "add", "-A", env=env)
    r = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout and "values.yaml" in r.stdout and "skipped" in r.stdout, r.stdout


@pytest.mark.slow
def test_pre_commit_try_repo_runs_the_hook_as_shipped(tmp_path) -> None:
    """`pre-commit try-repo` on this checkout, as a user tries the hook: pre-commit builds the hook's own
    environment (pip installs this repository) and runs it in a scratch repository whose policy is where
    `policy init` writes it. Only the manifests are given to it: not the workflow, the docs' YAML or the policy."""
    repo = tmp_path / "ml-repo"
    (repo / "k8s").mkdir(parents=True)
    (repo / ".github" / "workflows").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_AUDITOR", "VIRTUAL_ENV"))}
    env.update({"PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "GIT_AUTHOR_NAME": "t",
                "GIT_COMMITTER_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_EMAIL": "t@example.com"})
    assert git(repo, "init", "-q", "-b", "main", env=env).returncode == 0
    init = subprocess.run([Path(sys.executable).parent / "gpu-auditor", "policy", "init"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)
    assert init.returncode == 0 and (repo / "gpu-policy.yml").is_file(), init.stderr
    shutil.copy(MANIFESTS / "policy.yml", repo / "gpu-policy.yml")  # the fixtures' clauses, at the same place
    shutil.copy(MANIFESTS / "kubernetes" / "job-bad.yaml", repo / "k8s" / "train.yaml")
    (repo / "mkdocs.yml").write_text("site_name: ml\n")
    (repo / ".github" / "workflows" / "ci.yml").write_text("on: push\njobs: {}\n")

    def try_repo() -> subprocess.CompletedProcess:
        git(repo, "add", "-A", env=env)
        return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "gpu-auditor-gate",
                               "--all-files", "--verbose"], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=900)

    r = try_repo()
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "k8s/train.yaml:2: error: SPOT001" in out and "1 job(s) in 1 file(s)" in out, out
    assert "Missing option" not in out and "mkdocs.yml" not in out and "ci.yml" not in out, out
    shutil.copy(MANIFESTS / "kubernetes" / "job-good.yaml", repo / "k8s" / "train.yaml")
    r = try_repo()
    assert r.returncode == 0 and "Passed" in r.stdout, r.stdout + r.stderr


# --- the GitHub Action, step by step as the runner runs it -----------------------------------------------------

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def evaluate(expr: str, ctx: dict) -> str | bool:
    """The few GitHub expressions action.yml uses: a context path, or one compared with a string literal."""
    compare = re.fullmatch(r"([\w.-]+)\s*(==|!=)\s*'([^']*)'", expr)
    if compare:
        value = evaluate(compare[1], ctx)
        return (value == compare[3]) == (compare[2] == "==")
    value = ctx
    for part in expr.split("."):
        if expr.startswith("github.event.") and isinstance(value, dict) and part not in value:
            return ""  # a property the event does not have is null, which an expression shows as ''
        assert isinstance(value, dict) and part in value, f"action.yml: unknown expression {expr!r}"
        value = value[part]
    return {True: "true", False: "false"}.get(value, value) if isinstance(value, bool) else value


def substitute(text: str, ctx: dict) -> str:
    def shown(value: str | bool) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)  # as GitHub shows true and false
    return EXPRESSION.sub(lambda m: shown(evaluate(m[1], ctx)), str(text))


def read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT: `name=value` lines and `name<<DELIMITER` blocks."""
    out, lines = {}, path.read_text().splitlines()
    while lines:
        line = lines.pop(0)
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            while (item := lines.pop(0)) != delimiter:
                block.append(item)
            out[name] = "\n".join(block)
        elif line:
            name, value = line.split("=", 1)
            out[name] = value
    return out


PUBLIC_PUSH = {"repository": {"private": False, "full_name": "acme/ml"}}


def run_action(ws: Path, temp: Path, inputs: dict[str, str], event: dict | None = None,
               uses_outcome: str = "success") -> dict:
    """Run action.yml's steps in `ws` as the runner would; return what the runner would show and keep. `event`
    is the workflow's event payload (default a push to a public repository); a `uses:` step is not run but
    ends with `uses_outcome`, its `continue-on-error` honoured as the runner honours it."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    built = sorted((temp / "wheel").glob("*.whl"))  # the checkout as a wheel (action_temp), unless told what
    inputs = {"install": str(built[0])} | inputs if built else inputs
    given = {name: inputs.get(name, spec.get("default", "")) for name, spec in action["inputs"].items()}
    missing = [n for n, spec in action["inputs"].items() if spec.get("required") and n not in inputs]
    assert not missing, f"required inputs not given: {missing}"
    event = PUBLIC_PUSH if event is None else event
    ctx = {"inputs": given, "steps": {}, "runner": {"temp": str(temp)},
           "github": {"action_path": str(REPO), "repository": "acme/ml", "event": event}}
    summary, path_file = temp / "step_summary.md", temp / "path"
    summary.touch()
    path_file.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_AUDITOR", "VIRTUAL_ENV"))}
    env.update({"GITHUB_ACTIONS": "true", "CI": "true", "RUNNER_TEMP": str(temp), "GITHUB_WORKSPACE": str(ws),
                "GITHUB_ACTION_PATH": str(REPO), "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_PATH": str(path_file)})
    base_path = env["PATH"]
    result: dict = {"steps": [], "uses": []}
    for i, step in enumerate(action["runs"]["steps"]):
        if "if" in step and not evaluate(step["if"], ctx):
            if "id" in step:
                ctx["steps"][step["id"]] = {"outputs": {}, "outcome": "skipped"}
            continue
        if "uses" in step:
            result["uses"].append((step["uses"], {k: substitute(v, ctx) for k, v in step.get("with", {}).items()}))
            if "id" in step:
                ctx["steps"][step["id"]] = {"outputs": {}, "outcome": uses_outcome}
            if uses_outcome == "failure" and substitute(step.get("continue-on-error", "false"), ctx) != "true":
                result["failed_uses"] = step["uses"]  # the runner stops here: the job fails
                break
            continue
        assert step["shell"] == "bash" and not EXPRESSION.search(step["run"]), "expressions belong in env:"
        script, outputs = temp / f"step-{i}.sh", temp / f"output-{i}"
        script.write_text(step["run"])
        outputs.touch()
        added = [p for p in path_file.read_text().splitlines() if p]
        step_env = {**env, "PATH": os.pathsep.join([*reversed(added), base_path]), "GITHUB_OUTPUT": str(outputs),
                    **{k: substitute(v, ctx) for k, v in step.get("env", {}).items()}}
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=ws, env=step_env,
                           capture_output=True, text=True, timeout=300)
        result["steps"].append((step["name"], r))
        if "id" in step:
            ctx["steps"][step["id"]] = {"outputs": read_outputs(outputs),
                                        "outcome": "success" if r.returncode == 0 else "failure"}
        if r.returncode != 0:  # the runner stops the composite at the first failed step
            break
    result["outputs"] = {name: substitute(spec["value"], ctx) for name, spec in action["outputs"].items()}
    result["summary"] = summary.read_text()
    return result


@pytest.fixture(scope="module")
def action_temp(tmp_path_factory, built_wheel) -> Path:
    """RUNNER_TEMP, shared by the runs below so that the action's virtual environment is built once; in it, this
    checkout built once as a wheel (conftest.built_wheel), which each run installs (`install:`) unless it says what
    to install: pip then finds it installed already, where the action's default, the action's own copy, is built
    again by each run (a test of its own runs that)."""
    temp = tmp_path_factory.mktemp("runner-temp")
    (temp / "wheel").mkdir()
    shutil.copy(built_wheel, temp / "wheel")
    return temp


@pytest.mark.slow
def test_action_fails_a_pull_request_with_a_high_finding(tmp_path: Path, action_temp: Path) -> None:
    ws = workspace(tmp_path / "ws", "job-bad.yaml")
    # The action's default install: its own copy (install empty), built by pip.
    run = run_action(ws, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s/\n", "install": ""})
    names = [name for name, _ in run["steps"]]
    assert names == ["Install gpu-auditor", "Run the gate", "Verdict"], names
    install, gate, verdict = (r for _, r in run["steps"])
    assert install.returncode == 0, install.stderr
    assert gate.returncode == 0, gate.stderr
    # the annotation, on the manifest's line, relative to the workspace as the pull request shows it
    assert re.search(r"^::error file=k8s/train\.yaml,line=2,title=SPOT001 spot-without-checkpoint \(high\)::",
                     gate.stdout, re.M), gate.stdout
    assert run["outputs"]["verdict"] == "fail" and run["outputs"]["exit-code"] == "1"
    assert SUMMARY.match(run["outputs"]["summary"])
    # the job fails, and the failed step's last line says why
    assert verdict.returncode == 1
    assert verdict.stdout.strip().splitlines()[-1].endswith("fail on high: FAIL")
    # the SARIF goes to code scanning (a public repository: 'auto' uploads), and holds the finding
    [(uses, with_)] = run["uses"]
    assert uses == "github/codeql-action/upload-sarif@v4"
    sarif = json.loads((ws / with_["sarif_file"]).read_text())
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "SPOT001"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "k8s/train.yaml"
    # the job summary in Markdown: the verdict as a heading, the finding as a table row
    assert run["summary"].startswith("### gpu-auditor gate: FAIL\n")
    assert re.search(r"^\| blocks \| high \| SPOT001 spot-without-checkpoint \| k8s:vision/Job/resnet-train \| "
                     r"k8s/train\.yaml:2 \|", run["summary"], re.M), run["summary"]


@pytest.mark.slow
@pytest.mark.parametrize("event, uploads", [
    (PUBLIC_PUSH, True),
    ({"repository": {"private": True, "full_name": "acme/ml"}}, False),  # code scanning may be off: not tried
    ({"repository": {"private": False, "full_name": "acme/ml"},  # a fork's pull request: a read-only token
      "pull_request": {"head": {"repo": {"full_name": "someone/ml"}}}}, False),
    ({"repository": {"private": False, "full_name": "acme/ml"},
      "pull_request": {"head": {"repo": {"full_name": "acme/ml"}}}}, True),
], ids=["public-push", "private", "fork-pull-request", "own-pull-request"])
def test_action_uploads_by_default_only_where_code_scanning_can_take_it(tmp_path, action_temp, event, uploads):
    ws = workspace(tmp_path / "ws", "job-good.yaml")
    run = run_action(ws, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s"}, event=event)
    assert [r.returncode for _, r in run["steps"]] == [0, 0, 0], [r.stderr for _, r in run["steps"]]
    assert bool(run["uses"]) == uploads
    run = run_action(ws, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s", "upload-sarif": "true"},
                     event=event)
    assert len(run["uses"]) == 1  # asked for: always tried


@pytest.mark.slow
def test_a_failed_upload_warns_and_leaves_a_passing_gate_passing_unless_asked(tmp_path, action_temp):
    ws = workspace(tmp_path / "ws", "job-good.yaml")
    run = run_action(ws, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s"}, uses_outcome="failure")
    assert [name for name, _ in run["steps"]] == ["Install gpu-auditor", "Run the gate", "Verdict"]
    verdict = run["steps"][-1][1]
    assert verdict.returncode == 0 and "failed_uses" not in run
    assert "::warning title=gpu-auditor::the SARIF upload to code scanning failed" in verdict.stdout
    assert "**Warning:** the SARIF upload to code scanning failed" in run["summary"]
    # asked to: the failed upload fails the job
    run = run_action(ws, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s", "fail-on-upload-error": "true"},
                     uses_outcome="failure")
    assert run["failed_uses"] == "github/codeql-action/upload-sarif@v4"
    assert [name for name, _ in run["steps"]] == ["Install gpu-auditor", "Run the gate"]
    # a failing gate still fails when the upload fails
    bad = workspace(tmp_path / "bad", "job-bad.yaml")
    run = run_action(bad, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s"}, uses_outcome="failure")
    assert run["steps"][-1][0] == "Verdict" and run["steps"][-1][1].returncode == 1
    # each run used the one environment the first made (one per Python version; one Python here)
    assert len(list(action_temp.glob("gpu-auditor-venv-*"))) == 1


@pytest.mark.slow
def test_action_passes_a_clean_manifest_and_can_leave_code_scanning_alone(tmp_path: Path, action_temp: Path) -> None:
    ws = workspace(tmp_path / "ws", "job-good.yaml")
    run = run_action(ws, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s/train.yaml gpu-policy.yml",
                                       "skip-unknown": "true", "upload-sarif": "false", "sarif-file": "out.sarif"})
    assert [r.returncode for _, r in run["steps"]] == [0, 0, 0], [r.stderr for _, r in run["steps"]]
    assert run["uses"] == []
    assert run["outputs"] == {"verdict": "pass", "exit-code": "0", "summary": run["outputs"]["summary"],
                              "sarif-file": "out.sarif"}
    assert SUMMARY.match(run["outputs"]["summary"])[1] == "PASS"
    assert json.loads((ws / "out.sarif").read_text())["runs"][0]["results"] == []
    assert "::error" not in run["steps"][1][1].stdout


@pytest.mark.slow
def test_action_stops_on_a_broken_manifest_naming_it(tmp_path: Path, action_temp: Path) -> None:
    ws = workspace(tmp_path / "ws", "job-good.yaml")
    (ws / "k8s" / "train.yaml").write_text("kind: Job\nspec: [unclosed\n")
    run = run_action(ws, action_temp, {"policy": "gpu-policy.yml", "paths": "k8s"})
    (_, gate) = run["steps"][-1]
    assert run["steps"][-1][0] == "Run the gate" and gate.returncode == 2
    # The broken file is named with its line, as an annotation on the pull request; the run fails (exit 2).
    assert "::error file=k8s/train.yaml,line=2,title=gpu-auditor: manifest not read::" in gate.stdout + gate.stderr


# --- the GitLab CI example ---------------------------------------------------------------------------------------


def run_gitlab_job(ws: Path, image: Path, wheel: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """The job's script lines in one bash, as the runner runs them, with its variables and the checkout's
    gpu-auditor, built as a wheel, as what pip installs (a CI/CD variable would set GPU_AUDITOR the same way)."""
    job = yaml.safe_load((REPO / "docs" / "ci" / "gitlab-ci.yml").read_text())["gpu-gate"]
    variables = {**job["variables"], "GPU_AUDITOR": str(wheel)}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_AUDITOR", "VIRTUAL_ENV"))}
    env.update(variables, PATH=f"{image / 'bin'}{os.pathsep}{env['PATH']}", CI="true", GITLAB_CI="true")
    script = "\n".join(job["script"])
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=ws, env=env,
                       capture_output=True, text=True, timeout=300)
    return r, job


@pytest.fixture(scope="module")
def gitlab_image(tmp_path_factory) -> Path:
    """A fresh Python, as the job's `python:3.12-slim` image gives it."""
    image = tmp_path_factory.mktemp("image") / "python"
    subprocess.run([sys.executable, "-m", "venv", str(image)], check=True, timeout=120)
    return image


@pytest.mark.slow
def test_gitlab_job_fails_and_publishes_a_junit_report(tmp_path: Path, gitlab_image: Path, built_wheel: Path) -> None:
    ws = workspace(tmp_path / "ws", "job-bad.yaml")
    (ws / "training").mkdir()  # the example's second path
    r, job = run_gitlab_job(ws, gitlab_image, built_wheel)
    assert r.returncode == 1, r.stdout + r.stderr
    assert SUMMARY.match(r.stderr.strip().splitlines()[-1])[1] == "FAIL", r.stderr
    assert job["artifacts"]["when"] == "always"  # the report is kept when the job fails
    root = ET.parse(ws / job["artifacts"]["reports"]["junit"]).getroot()
    [failure] = root.findall(".//testcase/failure")
    assert "SPOT001" in ET.tostring(root, encoding="unicode") and failure.get("message")
    assert all(case.get("name") and case.get("classname") for case in root.findall(".//testcase"))

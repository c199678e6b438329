"""The deploy gate end to end: fixtures of every manifest kind give the expected findings and exit codes,
waivers (policy and inline, live and expired), the CLI's options, and the gate as a pre-commit hook."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.gate import job_rules, run_gate
from auditor.model import Job, Severity
from auditor.policy import load_policy, parse_policy

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "manifests"
POLICY = FIXTURES / "policy.yml"
AS_OF = date(2026, 10, 1)
# The rules the fixtures were written for; other job rules of the pack may add findings of their own.
TESTED = {"SPOT001", "TAG002", "GPU003", "GPU004", "REG001", "BUD002", "SPOT004", "HPO001"}

# file -> (exit code, {(rule, job) open at the end})
EXPECTED: dict[str, tuple[int, set[tuple[str, str]]]] = {
    "kubernetes/job-good.yaml": (0, set()),
    "kubernetes/job-bad.yaml": (1, {("SPOT001", "k8s:vision/Job/resnet-train")}),
    "kubernetes/cronjob-good.yaml": (0, set()),
    "kubernetes/cronjob-bad.yaml": (1, {("SPOT001", "k8s:vision/CronJob/weekly-retrain")}),
    "kubernetes/pod-good.yaml": (0, set()),
    "kubernetes/pod-bad.yaml": (1, {("SPOT001", "k8s:nlp/Pod/llm-sft-debug"), ("GPU003", "k8s:nlp/Pod/llm-sft-debug")}),
    "kubernetes/deployment-good.yaml": (0, set()),
    "kubernetes/deployment-bad.yaml": (1, {("GPU003", "k8s:nlp/Deployment/chat-api")}),
    "kubernetes/statefulset-good.yaml": (0, set()),
    "kubernetes/statefulset-bad.yaml": (1, {("REG001", "k8s:vision/StatefulSet/feature-workers")}),
    "kubernetes/multi-doc.yaml": (1, {("SPOT001", "k8s:vision/Job/segmenter-sweep"),
                                      ("TAG002", "k8s:vision/Job/segmenter-sweep")}),
    "kubernetes/unknown-gpu.yaml": (1, {("GPU004", "k8s:vision/Job/legacy-train")}),
    "kubeflow/pytorchjob-good.yaml": (0, set()),
    "kubeflow/pytorchjob-bad.yaml": (1, {("BUD002", "k8s:nlp/PyTorchJob/llm-pretrain")}),
    "kubeflow/tfjob-good.yaml": (0, set()),
    "kubeflow/tfjob-bad.yaml": (1, {("SPOT001", "k8s:vision/TFJob/ranker-nightly"),
                                    ("TAG002", "k8s:vision/TFJob/ranker-nightly")}),
    "kubeflow/trainjob-good.yaml": (0, set()),
    # p5e.48xlarge is priced (as p5en): 8 spot H200s with no maximum runtime have no cost ceiling (BUD002)
    "kubeflow/trainjob-bad.yaml": (1, {("SPOT001", "k8s:nlp/TrainJob/llama-pretrain"),
                                       ("GPU003", "k8s:nlp/TrainJob/llama-pretrain"),
                                       ("BUD002", "k8s:nlp/TrainJob/llama-pretrain")}),
    "volcano/job-good.yaml": (0, set()),
    "volcano/job-bad.yaml": (1, {("SPOT001", "k8s:vision/VolcanoJob/quick-sweep"),
                                 ("TAG002", "k8s:vision/VolcanoJob/quick-sweep")}),
    "sagemaker/create-training-job-good.json": (0, set()),
    "sagemaker/create-training-job-bad.json": (1, {("SPOT001", "sagemaker:nlp-llama-ft-spot"),
                                                   ("REG001", "sagemaker:nlp-llama-ft-spot")}),
    "vertex/customjob-good.yaml": (0, set()),
    "vertex/customjob-good.json": (0, set()),
    "vertex/customjob-bad.yaml": (1, {(r, "vertex:llm-pretrain-asia") for r in ("SPOT001", "REG001", "TAG002",
                                                                                "GPU003")}),
    "azureml/command-good.yml": (0, set()),
    "azureml/command-bad.yml": (1, {("SPOT001", "azureml:detector-train-spot")}),
    "azureml/sweep-good.yml": (0, set()),
    "azureml/sweep-bad.yml": (1, {(r, "azureml:llm-hparam-sweep") for r in ("BUD002", "GPU003", "HPO001")}),
    "skypilot/task-good.yaml": (0, set()),
    "skypilot/task-bad.yaml": (1, {("SPOT001", "skypilot:nlp-mistral-ft"), ("BUD002", "skypilot:nlp-mistral-ft")}),
    "katib/experiment-good.yaml": (0, set()),
    "katib/experiment-bad.yaml": (1, {("SPOT001", "k8s:nlp/Experiment/llm-lr-search"),
                                      ("HPO001", "k8s:nlp/Experiment/llm-lr-search")}),
    "katib/grid-bad.yaml": (1, {("HPO001", "k8s:nlp/Experiment/bert-grid")}),
    "kubeflow/trainjob-with-runtime.yaml": (1, {("SPOT001", "k8s:vision/TrainJob/whisper-ft"),
                                                ("BUD002", "k8s:vision/TrainJob/whisper-ft")}),
    "kuberay/rayjob-spot.yaml": (1, {("SPOT001", "k8s:nlp/RayJob/llama-lora")}),
    "kuberay/rayservice-spot.yaml": (1, {("SPOT004", "k8s:nlp/RayService/chat-serve")}),
    "operators/jobset-on-demand.yaml": (0, set()),
    "operators/lws-spot.yaml": (1, {("SPOT004", "k8s:nlp/LeaderWorkerSet/vllm-70b"),
                                    ("GPU003", "k8s:nlp/LeaderWorkerSet/vllm-70b")}),
    "operators/argo-workflow.yaml": (1, {("SPOT001", "k8s:vision/Workflow/segmenter-*/train")}),
    "operators/tekton-pipelinerun.yaml": (0, set()),
    "hpo/sagemaker-tuning.json": (1, {("HPO001", "sagemaker:nlp-summarizer-hpo")}),
    "hpo/vertex-tuning.yaml": (0, set()),
    "skypilot/pipeline-bad.yaml": (1, {("SPOT001", "skypilot:mistral-pipeline/train"),
                                       ("BUD002", "skypilot:mistral-pipeline/train")}),
    "kubernetes/server-spot-bad.yaml": (1, {("SPOT004", "k8s:nlp/Deployment/tgi-mistral")}),
    "waivers/inline-active.yaml": (0, set()),
    "waivers/inline-expired.yaml": (1, {("SPOT001", "k8s:vision/Job/cache-warmup-old")}),
    "waivers/sagemaker-tag-waiver.json": (0, set()),
    # issue 29: the last GPU workloads the gate misread
    "kubeflow/pytorchjob-mixed-replicas.yaml": (1, {("BUD002", "k8s:nlp/PyTorchJob/llm-continued-pretrain")}),
    "operators/argo-resource-pytorchjob.yaml": (1, {("SPOT001", "k8s:nlp/PyTorchJob/llama-ft")}),
    "kueue/queued-job-spot.yaml": (1, {("SPOT001", "k8s:vision/Job/detector-train")}),
    "kserve/inferenceservice-spot.yaml": (1, {("SPOT004", "k8s:nlp/InferenceService/llama3-chat")}),
    "azureml/automl-image.yml": (1, {("HPO001", "azureml:fridge-items-detector")}),
    "azureml/finetuning.yml": (0, set()),
    "azureml/pipeline.yml": (1, {("SPOT001", "azureml:detector-pipeline/train")}),
    "skypilot/job-group.yaml": (1, {("SPOT001", "skypilot:rl-post-training/trainer")}),
    "skypilot/candidates.yaml": (1, {("SPOT001", "skypilot:nlp-candidates-ft")}),
    "accelerators/tpu-jobset-spot.yaml": (1, {("SPOT001", "k8s:nlp/JobSet/maxtext-multislice"),
                                              ("GPU003", "k8s:nlp/JobSet/maxtext-multislice")}),
    "accelerators/inferentia-deployment.yaml": (1, {("GPU003", "k8s:nlp/Deployment/bert-neuron")}),
    "katib/experiment-one-trial.yaml": (0, set()),
}


def gate(*paths: str | Path, policy: Path = POLICY, **kw):
    return run_gate(load_policy(policy), [FIXTURES / p if isinstance(p, str) else p for p in paths],
                    today=kw.pop("today", AS_OF), **kw)


def open_pairs(result) -> set[tuple[str, str]]:
    return {(f.rule, f.resource) for f in result.active() if f.rule in TESTED}


def test_every_fixture_has_an_expectation() -> None:
    files = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*")
             if p.suffix in (".yaml", ".yml", ".json") and p.parent != FIXTURES and p.parent.name != "invalid"}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_fixture_gives_expected_findings_and_exit_code(rel: str) -> None:
    code, pairs = EXPECTED[rel]
    result = gate(rel)
    assert open_pairs(result) == pairs, [f.message for f in result.active()]
    assert result.exit_code == code
    for f in result.findings:
        assert f.file == str(FIXTURES / rel) and isinstance(f.line, int) and f.line >= 1


@pytest.mark.parametrize("rel", sorted(r for r, (code, _) in EXPECTED.items() if code == 0))
def test_compliant_fixtures_pass_at_every_threshold_the_rules_under_test_reach(rel: str) -> None:
    result = gate(rel, fail_on=Severity.LOW)
    assert not {f.rule for f in result.active()} & TESTED


def test_budget_findings_state_the_projection() -> None:
    result = gate("kubeflow/pytorchjob-bad.yaml", "azureml/sweep-bad.yml")
    budget = {(f.resource, f.key): f for f in result.findings if f.rule == "BUD002"}
    assert set(budget) == {("k8s:nlp/PyTorchJob/llm-pretrain", "cap"), ("k8s:nlp/PyTorchJob/llm-pretrain",
                                                                         "team-budget"),
                           ("azureml:llm-hparam-sweep", "team-budget")}
    cap = budget[("k8s:nlp/PyTorchJob/llm-pretrain", "cap")]
    assert cap.evidence["projected_cost"] == "158515.20" and "over the per-job cap $50,000.00" in cap.message
    team = budget[("azureml:llm-hparam-sweep", "team-budget")]
    assert team.evidence["projected_cost"] == "21442.56" and team.team == "nlp"
    assert "over 50% of team nlp's quarterly budget $40,000.00" in team.message


def test_gate_runs_only_job_rules_and_respects_disabled_clauses() -> None:
    policy = load_policy(POLICY)
    assert {r.entity for r in job_rules(policy)} == {Job}
    assert TESTED <= {r.id for r in job_rules(policy)}
    text = POLICY.read_text().replace("  regions:\n", "  regions:\n    enabled: false\n")
    assert "REG001" not in {r.id for r in job_rules(parse_policy(text, "p.yml"))}


def test_directory_expands_to_every_manifest() -> None:
    result = gate("kubernetes")
    assert len(result.files) == len(list((FIXTURES / "kubernetes").glob("*.yaml")))
    assert len(result.jobs) == 14  # 13 files, two jobs in multi-doc.yaml
    assert result.exit_code == 1


def test_folder_run_names_every_broken_file_and_still_judges_the_rest(tmp_path: Path) -> None:
    """Two broken files and a good one with a finding: both broken files named with their lines, the good
    file's finding reported, exit 2 in every format."""
    shutil.copy(FIXTURES / "invalid/malformed.yaml", tmp_path / "a-malformed.yaml")
    shutil.copy(FIXTURES / "invalid/bad-gpu-count.yaml", tmp_path / "b-bad-count.yaml")
    shutil.copy(FIXTURES / "kubernetes/job-bad.yaml", tmp_path / "c-job-bad.yaml")
    result = gate(tmp_path)
    assert [(Path(e.path).name, e.line) for e in result.failures] == [("a-malformed.yaml", 10),
                                                                      ("b-bad-count.yaml", 1)]
    assert open_pairs(result) == {("SPOT001", "k8s:vision/Job/resnet-train")}
    assert result.exit_code == 2 and result.verdict == "error"
    code, out, _ = run_cli("--fail-on", "none", str(tmp_path))
    assert code == 2, "a file that could not be read fails the run whatever --fail-on says"
    lines = out.splitlines()
    assert lines[0].endswith("a-malformed.yaml:10: error: not valid YAML: expected ',' or ']', but got "
                             "'<stream end>' (while parsing a flow sequence from line 10)")
    assert "b-bad-count.yaml:1: error: " in lines[1] and "SPOT001" in out
    assert "2 file(s) could not be read" in lines[-1]


@pytest.mark.heavy
@pytest.mark.parametrize("levels", [1000, 100_000])
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_deep_nesting_is_one_clear_line(tmp_path: Path, levels: int, suffix: str) -> None:
    f = tmp_path / f"deep{suffix}"
    f.write_text('{"a": ' + "[" * levels + "]" * levels + "}\n")
    code, out, err = run_cli(str(f))
    assert code == 2 and "Traceback" not in out + err and "RecursionError" not in out + err
    assert f"deep{suffix}" in out.splitlines()[0] and "nested more than 100 levels deep" in out.splitlines()[0]


# --- waivers -------------------------------------------------------------------------------------------------


def test_inline_waiver_is_honoured_until_it_expires() -> None:
    live = gate("waivers/inline-active.yaml")
    [f] = [f for f in live.findings if f.rule == "SPOT001"]
    assert f.waived and f.waiver["source"] == "inline" and f.waiver["expires"] == "2099-12-31"
    assert f.waiver["reason"] == "restarts from the dataset cache in two minutes"
    assert live.exit_code == 0 and live.warnings == []
    # the same waiver, judged the day after it lapses
    lapsed = gate("waivers/inline-active.yaml", today=date(2100, 1, 1))
    assert [f.rule for f in lapsed.active() if f.rule in TESTED] == ["SPOT001"] and lapsed.exit_code == 1
    assert any("expired on 2099-12-31" in w for w in lapsed.warnings)


def test_expired_inline_waiver_by_rule_name_waives_nothing() -> None:
    result = gate("waivers/inline-expired.yaml")
    assert not any(f.waived for f in result.findings)
    [status] = [w for w in result.waivers if w["source"] == "inline"]
    assert (status["rule"], status["status"], status["expires"]) == ("SPOT001", "expired", "2026-01-31")
    assert result.warnings == [f"{FIXTURES / 'waivers/inline-expired.yaml'}:2: inline waiver for SPOT001 on "
                               "k8s:vision/Job/cache-warmup-old expired on 2026-01-31; it no longer waives"]


def test_inline_waiver_in_sagemaker_tags() -> None:
    result = gate("waivers/sagemaker-tag-waiver.json")
    assert [(f.rule, f.waived) for f in result.findings if f.rule in TESTED] == [("SPOT001", True)]


def test_policy_waiver_applies_to_jobs(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY.read_text() + "waivers:\n"
                      "  - {rule: SPOT001, resource: 'k8s:vision/*', reason: ok, owner: a@example.com, "
                      "expires: 2027-01-31}\n"
                      "  - {rule: GPU003, resource: 'k8s:nlp/*', reason: old, owner: a@example.com, "
                      "expires: 2026-01-31}\n")
    result = gate("kubernetes/job-bad.yaml", "kubernetes/deployment-bad.yaml", policy=policy)
    waived = {(f.rule, f.resource) for f in result.findings if f.waived}
    assert waived == {("SPOT001", "k8s:vision/Job/resnet-train")}
    assert {("GPU003", "k8s:nlp/Deployment/chat-api")} <= open_pairs(result)
    states = {(w["source"], w["rule"]): w["status"] for w in result.waivers}
    assert states == {("policy", "SPOT001"): "active", ("policy", "GPU003"): "expired"}
    assert any("policy waiver for GPU003" in w for w in result.warnings)


# --- the command line ----------------------------------------------------------------------------------------


def run_cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["gate", "--policy", str(POLICY), "--as-of", AS_OF.isoformat(), *args])
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit", "github"])
def test_a_folder_with_no_manifest_is_an_input_error(tmp_path: Path, fmt: str) -> None:
    """A CI job pointed at a folder with no manifest files (a wrong path) stops with exit 2 in one line, in every
    format and with nothing written; a folder whose YAML holds no GPU job still passes, with a warning."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("not a manifest\n")
    out = tmp_path / "gate.out"
    for folder in ("empty", "docs"):
        code, stdout, stderr = run_cli("--format", fmt, "--output", str(out), str(tmp_path / folder))
        assert code == 2 and stdout == ""
        assert stderr == (f"gpu-auditor: error: no manifest files (*.yaml, *.yml, *.json) in {tmp_path / folder}: "
                          "nothing to check\n")
        assert not out.exists()
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, stdout, stderr = run_cli("--skip-unknown", str(tmp_path / "cm.yaml"))
    assert code == 0 and "no GPU training jobs in 1 file(s)" in stdout + stderr


def test_cli_exit_codes(tmp_path: Path) -> None:
    good, bad = str(FIXTURES / "kubernetes/job-good.yaml"), str(FIXTURES / "kubernetes/job-bad.yaml")
    assert run_cli(good)[0] == 0
    code, out, _ = run_cli(bad)
    assert code == 1 and "SPOT001" in out and out.rstrip().endswith("fail on high: FAIL")
    code, out, _ = run_cli("--warn-only", bad)
    assert code == 0 and "--warn-only" in out and "SPOT001" in out
    assert run_cli("--fail-on", "critical", bad)[0] == 0
    assert run_cli("--fail-on", "none", bad)[0] == 0
    assert run_cli(good, bad)[0] == 1
    # a medium finding alone (TAG002: no owner label) blocks only from --fail-on medium down
    unlabelled = tmp_path / "unlabelled.yaml"
    unlabelled.write_text((FIXTURES / "kubernetes/job-good.yaml").read_text().replace(", owner: ana", ""))
    assert run_cli(str(unlabelled))[0] == 0
    code, out, _ = run_cli("--fail-on", "medium", str(unlabelled))
    assert code == 1 and "TAG002 job-missing-labels (medium)" in out


@pytest.mark.parametrize("rel, where", [
    ("invalid/malformed.yaml", "malformed.yaml:10: not valid YAML"),
    ("invalid/malformed.json", "malformed.json:3: not valid JSON"),
    ("invalid/unknown-kind.yaml", "unknown-kind.yaml:10: unknown manifest kind SeldonDeployment"),
    ("invalid/bad-waiver.yaml", "bad-waiver.yaml:1: gpu-auditor.dev/waive: 'SPOT001: we never checkpoint' is not a "
                                "waiver"),
    ("nope.yaml", "nope.yaml: no such file or folder"),
])
def test_cli_bad_input_is_one_line_exit_2(rel: str, where: str) -> None:
    code, out, err = run_cli(str(FIXTURES / rel))
    assert code == 2 and err == ""
    lines = out.splitlines()
    assert where.replace(": ", ": error: ", 1) in lines[0] and "Traceback" not in out
    assert "1 file(s) could not be read" in lines[-1] and lines[-1].endswith("fail on high: ERROR")


JOB = (FIXTURES / "kubernetes/job-good.yaml").read_text()
SKY = (FIXTURES / "skypilot/task-good.yaml").read_text()


@pytest.mark.parametrize("text, message", [
    # a control character: YAML text holds none (the loader checks every character before it parses)
    (JOB.replace("owner: ana", "owner: a\0na"), "7: not valid YAML: the character U+0000 is not allowed in YAML text"),
    # a List's items are objects of their own (kubectl get -o yaml, kustomize build)
    ("apiVersion: v1\nkind: List\nitems: [1, 2]\n", "1: items[0]: expected a mapping, got int"),
    ("apiVersion: v1\nkind: List\nitems:\n- {metadata: {name: x}}\n",
     "1: items[0]: expected a Kubernetes object with apiVersion and kind"),
    # numbers past any job: a count, a runtime, a checkpoint interval, a duration
    (JOB.replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 1000000000000000000000000000000"),
     "2: resources nvidia.com/gpu: 1000000000000000000000000000000 is more than any job runs (at most "
     "1,000,000,000)"),
    (JOB.replace("backoffLimit: 10", "parallelism: 1000000001"),
     "2: spec.parallelism: 1000000001 is more than any job runs (at most 1,000,000,000)"),
    (JOB.replace('"30"', '"nan"'), "2: gpu-auditor.dev/checkpoint-interval-min: expected minutes, got 'nan'"),
    (JOB.replace('"30"', '"-5"'), "2: gpu-auditor.dev/checkpoint-interval-min: expected minutes, got '-5'"),
    (SKY.replace("A100:8", "A100:1000000000000"),
     "2: resources.accelerators: 1000000000000 is more than any job runs (at most 1,000,000,000)"),
    (SKY.replace('max-runtime-hours: "24"', 'max-runtime-hours: "inf"'),
     "2: gpu-auditor.dev/max-runtime-hours: expected hours (at most 277,777), got 'inf'"),
    # another encoding: "not UTF-8 text (byte 217)", no line
    (JOB.replace("owner: ana", "owner: an\u00e4").encode("latin-1"),
     "7: the manifest is not UTF-8 text: byte 0xe4, the line's byte 32 (Latin-1 or Windows-1252?); save it as UTF-8"),
])
def test_cli_hostile_manifest_is_one_line_exit_2(tmp_path: Path, text: str | bytes, message: str) -> None:
    """What once stopped the gate with an internal error (a NUL byte, a List of scalars, a count whose cost no
    Decimal holds) is one line naming the file and line, exit 2."""
    f = tmp_path / "m.yaml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    code, out, err = run_cli(str(f))
    assert (code, err) == (2, "")
    assert out.splitlines()[0] == f"{f}:{message.replace(': ', ': error: ', 1)}"
    assert out.splitlines()[-1].endswith("1 file(s) could not be read; 0 finding(s), 0 waived; fail on high: ERROR")


def test_cli_json_manifest_with_a_key_twice_is_one_line(tmp_path: Path) -> None:
    """Python's json keeps the last of two keys without a word: the gate read one count of two."""
    f = tmp_path / "m.json"
    f.write_text('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": '
                 '"c", "resources": {"limits": {"nvidia.com/gpu": 8, "nvidia.com/gpu": 1}}}]}}\n')
    code, out, err = run_cli(str(f))
    assert (code, err) == (2, "")
    assert out.splitlines()[0] == f"{f}: error: not valid JSON: the key 'nvidia.com/gpu' twice in one object"


def test_a_manifest_named_twice_is_one_file(tmp_path: Path) -> None:
    """A CI step that passes the folder and the changed files in it: each job was counted and flagged twice."""
    bad = FIXTURES / "kubernetes/job-bad.yaml"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "job.yaml").write_bytes(bad.read_bytes())
    (tmp_path / "link.yaml").symlink_to(tmp_path / "m" / "job.yaml")
    code, out, _ = run_cli(str(tmp_path / "m"), str(tmp_path / "m" / "job.yaml"), str(tmp_path / "link.yaml"))
    assert code == 1
    assert out.splitlines()[-1] == ("gpu-auditor gate: 1 job(s) in 1 file(s); 1 finding(s) (1 high), 0 waived; "
                                    "fail on high: FAIL")


def test_cli_largest_counts_are_judged(tmp_path: Path) -> None:
    """A count at the limit is read, and its cost stated in full (10^9 GPUs on 10^9 pods for 10^9 s)."""
    f = tmp_path / "m.yaml"
    f.write_text(JOB.replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 1000000000")
                 .replace("activeDeadlineSeconds: 86400", "activeDeadlineSeconds: 1000000000")
                 .replace("backoffLimit: 10", "parallelism: 1000000000"))
    code, out, err = run_cli(str(f))
    assert code == 1 and err == ""
    # 10^18 GPUs x 10^9/3600 hours x $0.40264 a GPU-hour (the catalog's g6.12xlarge, $4.6016 an hour for 4 GPUs,
    # at its typical spot discount of 65%)
    assert "projects $111,844,444,444,444,444,444,444.44 (1000000000000000000x L4 x $0.40/GPU-h spot" in out


def test_cli_unknown_waiver_rule_suggests_the_nearest(tmp_path: Path) -> None:
    f = tmp_path / "j.yaml"
    f.write_text((FIXTURES / "waivers/inline-active.yaml").read_text().replace("SPOT001 until", "SPOT01 until"))
    code, out, _ = run_cli(str(f))
    assert code == 2 and "no rule 'SPOT01'; did you mean 'SPOT001'?" in out


def test_cli_skip_unknown_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "reports" / "gate.json"
    code, stdout, err = run_cli("--skip-unknown", "--format", "json", "--output", str(out),
                                str(FIXTURES / "invalid/unknown-kind.yaml"), str(POLICY))
    assert code == 0 and stdout == ""
    assert "1 job(s) in 2 file(s)" in err
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "pass" and len(doc["jobs"]) == 1
    assert sum("skipped" in w for w in doc["warnings"]) == 2
    assert [p.name for p in out.parent.iterdir()] == ["gate.json"], "no temp file left behind"


def test_cli_usage_errors_exit_2() -> None:
    assert run_cli("--format", "xml", str(POLICY))[0] == 2
    assert CliRunner().invoke(cli, ["gate", str(POLICY)]).exit_code == 2  # --policy is required


# --- starting fast -------------------------------------------------------------------------------------------

HEAVY = ("duckdb", "boto3", "botocore", "google", "azure", "kubernetes", "pyarrow", "pandas", "jinja2")


def test_gate_imports_no_database_and_no_cloud_sdk() -> None:
    """A pre-commit hook runs on every commit: the gate's path must not import DuckDB or any cloud SDK."""
    code = (
        "import sys\n"
        "from auditor.cli import cli\n"
        f"sys.argv = ['gpu-auditor', 'gate', '--policy', {str(POLICY)!r}, '--format', 'sarif', "
        f"{str(FIXTURES / 'kubernetes')!r}]\n"
        "try:\n    cli(prog_name='gpu-auditor')\nexcept SystemExit as e:\n    code = e.code\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "sys.stderr.write(f'exit={code} heavy={heavy}\\n')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stderr.strip().splitlines()[-1] == "exit=1 heavy=[]", r.stderr


def test_gate_imports_no_other_command_and_no_billing_reader() -> None:
    """The CLI imports a command's module when that command runs (auditor/cli/__init__.py, COMMANDS): the gate's
    path imports no other command's module, no billing reader or live source, not the audit's result, and (without
    --output or JUnit) neither the file writer nor the XML library."""
    code = (
        "import sys\n"
        "from auditor.cli import cli\n"
        f"sys.argv = ['gpu-auditor', 'gate', '--policy', {str(POLICY)!r}, {str(FIXTURES / 'kubernetes')!r}]\n"
        "try:\n    cli(prog_name='gpu-auditor')\nexcept SystemExit as e:\n    code = e.code\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('auditor.cli.', 'auditor.providers.billing', "
        "'auditor.providers.live', 'auditor.outputs.mail', 'auditor.audit', 'auditor.trend', 'auditor.atomic', "
        "'auditor.tables', 'xml.')))\n"
        "sys.stderr.write(f'exit={code} loaded={loaded}\\n')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stderr.strip().splitlines()[-1] == "exit=1 loaded=['auditor.cli.base', 'auditor.cli.gate']", r.stderr


# ---- issue 29 ------------------------------------------------------------------------------------------------

def test_each_replica_type_counts_its_own_gpus_in_the_projection() -> None:
    """A Master of 1 GPU and 3 Workers of 8 are 25 GPUs: 25 x $6.88 (p5.48xlarge $55.04 / 8) x 720 h."""
    result = gate("kubeflow/pytorchjob-mixed-replicas.yaml")
    [job] = result.jobs
    assert job.gpus_in_all() == 25
    cap = next(f for f in result.findings if f.rule == "BUD002" and f.key == "cap")
    assert cap.evidence["gpus"] == "25" and cap.evidence["projected_cost"] == "123840.00"


def test_other_accelerators_are_named_by_the_policy_like_gpus(tmp_path: Path) -> None:
    """A TPU or Inferentia job is never an unknown GPU type; a policy that lists TPU (or the TPU's version)
    and Inferentia for their workloads lets them pass GPU003."""
    result = gate("accelerators/tpu-jobset-spot.yaml", "accelerators/inferentia-deployment.yaml")
    assert not [f for f in result.findings if f.rule == "GPU004"]
    assert {f.resource for f in result.findings if f.rule == "GPU003"} == {
        "k8s:nlp/JobSet/maxtext-multislice", "k8s:nlp/Deployment/bert-neuron"}
    for allowed in ("[TPU, Inferentia]", "[tpu-v5p*, inferentia]"):
        text = POLICY.read_text().replace('training: ["A100*", H100, L4, A10G]', f"training: {allowed}") \
            .replace("inference: [T4, L4, A10G]", f"inference: {allowed}")
        policy = tmp_path / "policy.yml"
        policy.write_text(text)
        result = gate("accelerators/tpu-jobset-spot.yaml", "accelerators/inferentia-deployment.yaml", policy=policy)
        assert not [f for f in result.findings if f.rule in ("GPU003", "GPU004")], allowed


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit", "github"])
def test_every_exit_2_says_why_on_stderr_in_every_format(fmt: str) -> None:
    files = [FIXTURES / "invalid/unrendered-count.yaml", FIXTURES / "invalid/malformed.yaml",
             FIXTURES / "kubernetes/job-good.yaml"]
    runner = CliRunner()
    result = runner.invoke(cli, ["gate", "--policy", str(POLICY), "--format", fmt, *map(str, files)])
    assert result.exit_code == 2
    if fmt == "text":  # the report itself is the log's text
        lines = [x for x in result.stdout.splitlines() if ": error: " in x]
    else:
        lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert "unrendered-count.yaml:1" in lines[0] or "unrendered-count.yaml:1" in lines[1]
    assert all("malformed.yaml" in x or "unrendered template placeholder" in x for x in lines)

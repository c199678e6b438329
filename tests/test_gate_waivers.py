"""The gate's own logic, directly: inline waivers read from a job's annotations, tags or labels (which keys, one a
line, every refusal in whole), how they mark findings and what status each gets, the result's verdict and exit
code at each --fail-on threshold, and run_gate's warnings and order, stated for hand-made jobs and findings."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from auditor.errors import InputError
from auditor.gate import GateResult, InlineWaiver, apply_inline_waivers, inline_waivers, run_gate
from auditor.model import Finding, Job, Severity
from auditor.policy import load_policy, parse_policy

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "manifests"
POLICY = FIXTURES / "policy.yml"
KEY = "gpu-auditor.dev/waive"


def job(annotations: dict[str, str] | None = None, tags: dict[str, str] | None = None, jid: str = "k8s:a/Job/x"):
    return Job(id=jid, platform="kubernetes", annotations=annotations or {}, tags=tags or {},
               source_file="m.yaml", source_line=7)


def finding(rule: str = "SPOT001", resource: str = "k8s:a/Job/x", severity: Severity = Severity.HIGH,
            **kw) -> Finding:
    return Finding(rule=rule, name=rule.lower(), severity=severity, resource=resource, message="m",
                   entity_type="job", **kw)


# ---- reading inline waivers ------------------------------------------------------------------------------------


def test_a_waiver_read_with_its_rule_id_date_reason_and_place():
    assert inline_waivers(job({KEY: "  spot-without-checkpoint   until 2027-01-31 :  cache restarts fast  "})) == [
        InlineWaiver("SPOT001", date(2027, 1, 31), "cache restarts fast", "k8s:a/Job/x", "m.yaml", 7)]


def test_waivers_from_every_waive_key_one_a_line_in_key_order():
    j = job(annotations={"app.kubernetes.io/name": "x",  # sorts before the waivers: read past, not stopped at
                         f"{KEY}.gpu": "GPU003 until 2027-02-01: approved by the lead",
                         "gpu-auditor.dev/waiver": "not read: another key",
                         "other/waive": "not read",
                         KEY: "SPOT001 until 2027-01-31: one\n\n   \nTAG002 until 2027-03-01: two"},
            tags={f"{KEY}-budget": "BUD002 until 2027-04-01: a one-off run"})
    assert [(w.rule, w.expires, w.reason) for w in inline_waivers(j)] == [
        ("SPOT001", date(2027, 1, 31), "one"),
        ("TAG002", date(2027, 3, 1), "two"),
        ("BUD002", date(2027, 4, 1), "a one-off run"),
        ("GPU003", date(2027, 2, 1), "approved by the lead"),
    ]


def test_a_job_without_waivers_has_none():
    assert inline_waivers(job({"team": "a"}, {"gpu-auditor.dev/waived": "x"})) == []


def refusal(text: str, key: str = KEY) -> str:
    with pytest.raises(InputError) as exc:
        inline_waivers(job({key: text}))
    return str(exc.value)


@pytest.mark.parametrize(("text", "message"), [
    ("SPOT001: we never checkpoint",
     "'SPOT001: we never checkpoint' is not a waiver; write 'RULE until YYYY-MM-DD: reason'"),
    ("SPOT001 until 2027-01-31:  ",
     "'SPOT001 until 2027-01-31:' is not a waiver; write 'RULE until YYYY-MM-DD: reason'"),
    ("SPOT001 until 2027-1-31: r",
     "'SPOT001 until 2027-1-31: r' is not a waiver; write 'RULE until YYYY-MM-DD: reason'"),
    ("SPOT001 till 2027-01-31: r",
     "'SPOT001 till 2027-01-31: r' is not a waiver; write 'RULE until YYYY-MM-DD: reason'"),
    ("x SPOT001 until 2027-01-31: r",
     "'x SPOT001 until 2027-01-31: r' is not a waiver; write 'RULE until YYYY-MM-DD: reason'"),
    ("SPOT01 until 2027-01-31: r", "no rule 'SPOT01'; did you mean 'SPOT001'?"),
    ("SPOT001 until 2027-02-30: r", "'2027-02-30' is not a date like 2027-01-31"),
])
def test_a_bad_waiver_refused_whole_at_the_jobs_line(text, message):
    assert refusal(text) == f"m.yaml:7: {KEY}: {message}"
    assert refusal(text, KEY + "-x") == f"m.yaml:7: {KEY}-x: {message}"


def test_inline_waiver_expires_after_its_day():
    w = InlineWaiver("SPOT001", date(2027, 1, 31), "r", "j", None, None)
    assert not w.expired(date(2027, 1, 31)) and w.expired(date(2027, 2, 1))


# ---- applying them ---------------------------------------------------------------------------------------------


def test_active_expired_and_unused_waivers():
    findings = [finding("SPOT001"), finding("SPOT001", key="second"), finding("TAG002"),
                finding("SPOT001", resource="k8s:a/Job/other")]
    j = job({KEY: "SPOT001 until 2027-01-31: active\nTAG002 until 2026-12-31: lapsed\nGPU003 until 2027-01-31: idle"})
    status = apply_inline_waivers(findings, [j], date(2027, 1, 1))
    common = {"source": "inline", "resource": "k8s:a/Job/x", "owner": None, "file": "m.yaml", "line": 7}
    assert status == [
        {**common, "rule": "SPOT001", "reason": "active", "expires": "2027-01-31", "status": "active", "matched": 2},
        {**common, "rule": "TAG002", "reason": "lapsed", "expires": "2026-12-31", "status": "expired", "matched": 1},
        {**common, "rule": "GPU003", "reason": "idle", "expires": "2027-01-31", "status": "unused", "matched": 0},
    ]
    waiver = {"reason": "active", "owner": None, "expires": "2027-01-31", "source": "inline", "file": "m.yaml",
              "line": 7}
    assert [f.waiver for f in findings] == [waiver, waiver, None, None]


def test_a_waiver_on_its_last_day_still_waives():
    [f] = findings = [finding()]
    [status] = apply_inline_waivers(findings, [job({KEY: "SPOT001 until 2027-01-31: r"})], date(2027, 1, 31))
    assert status["status"] == "active" and f.waived


def test_a_finding_already_waived_keeps_its_first_waiver():
    policy_waiver = {"reason": "policy", "source": "policy"}
    [f] = findings = [finding(waiver=policy_waiver)]
    [status] = apply_inline_waivers(findings, [job({KEY: "SPOT001 until 2027-01-31: r"})], date(2027, 1, 1))
    assert f.waiver is policy_waiver and status["status"] == "active" and status["matched"] == 1


def test_a_malformed_waiver_is_raised_or_recorded_and_the_other_jobs_still_apply():
    bad, good = job({KEY: "nonsense"}, jid="k8s:a/Job/bad"), job({KEY: "SPOT001 until 2027-01-31: r"})
    findings = [finding()]
    with pytest.raises(InputError):
        apply_inline_waivers(findings, [bad, good], date(2027, 1, 1))
    failures: list[InputError] = []
    status = apply_inline_waivers(findings, [bad, good], date(2027, 1, 1), failures)
    assert [str(e) for e in failures] == [f"m.yaml:7: {KEY}: 'nonsense' is not a waiver; write 'RULE until "
                                          "YYYY-MM-DD: reason'"]
    assert [s["resource"] for s in status] == ["k8s:a/Job/x"] and findings[0].waived


# ---- the verdict -----------------------------------------------------------------------------------------------


def result(findings: list[Finding], fail_on: Severity | None = Severity.HIGH, warn_only: bool = False,
           failures: list[InputError] | None = None) -> GateResult:
    return GateResult(parse_policy("policy: P\nowner: o@example.com\n"), [], [], [], findings, [], [], fail_on,
                      warn_only, date(2027, 1, 1), failures or [])


@pytest.mark.parametrize(("severity", "fail_on", "blocks"), [
    (Severity.HIGH, Severity.HIGH, True),
    (Severity.CRITICAL, Severity.HIGH, True),
    (Severity.MEDIUM, Severity.HIGH, False),
    (Severity.INFO, Severity.INFO, True),
    (Severity.CRITICAL, None, False),
])
def test_a_finding_blocks_at_or_above_fail_on(severity, fail_on, blocks):
    f = finding(severity=severity)
    r = result([f], fail_on)
    assert r.blocks(f) is blocks
    assert r.blocking() == ([f] if blocks else [])
    assert (r.exit_code, r.verdict) == ((1, "fail") if blocks else (0, "pass"))
    assert (result([f], fail_on, warn_only=True).exit_code, result([f], fail_on, warn_only=True).verdict) == \
        ((0, "warn") if blocks else (0, "pass"))


def test_a_waived_finding_neither_blocks_nor_is_active():
    waived, open_ = finding(waiver={"reason": "r"}), finding(severity=Severity.LOW)
    r = result([waived, open_])
    assert r.active() == [open_]
    assert not r.blocks(waived) and r.blocking() == [] and (r.exit_code, r.verdict) == (0, "pass")


def test_a_file_that_could_not_be_read_is_an_error_whatever_the_findings():
    failure = InputError("not valid YAML: x", path="bad.yaml", line=3)
    for r in (result([], failures=[failure]), result([finding()], warn_only=True, failures=[failure]),
              result([finding()], fail_on=None, failures=[failure])):
        assert (r.exit_code, r.verdict) == (2, "error")
        assert r.failed_files() == [{"file": "bad.yaml", "line": 3, "message": "not valid YAML: x"}]
    assert result([]).failed_files() == []


# ---- run_gate ----------------------------------------------------------------------------------------------------


def test_run_gate_of_no_path_says_so():
    with pytest.raises(InputError) as exc:
        run_gate(load_policy(POLICY), [], today=date(2026, 10, 1))
    assert str(exc.value) == "no manifest files (*.yaml, *.yml, *.json) in no path given: nothing to check"


def test_run_gate_names_every_path_that_holds_no_manifest(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(InputError) as exc:
        run_gate(load_policy(POLICY), [tmp_path / "a", tmp_path / "b"], today=date(2026, 10, 1))
    assert str(exc.value) == (f"no manifest files (*.yaml, *.yml, *.json) in {tmp_path / 'a'}, {tmp_path / 'b'}: "
                              "nothing to check")


def test_run_gate_fails_on_a_kind_it_does_not_read_unless_told_to_skip():
    path = FIXTURES / "invalid/unknown-kind.yaml"
    r = run_gate(load_policy(POLICY), [path], today=date(2026, 10, 1))
    assert [(Path(e.path).name, e.line) for e in r.failures] == [("unknown-kind.yaml", 10)]
    assert (r.exit_code, r.verdict) == (2, "error")
    skipped = run_gate(load_policy(POLICY), [path], today=date(2026, 10, 1), skip_unknown=True)
    assert skipped.failures == [] and skipped.exit_code == 0


def test_run_gate_warns_of_expired_waivers_of_both_kinds_and_sorts(tmp_path):
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY.read_text() + "waivers:\n"
                      "  - {rule: GPU003, resource: 'k8s:nlp/*', reason: old, owner: a@example.com, "
                      "expires: 2026-01-31}\n")
    line = len(POLICY.read_text().splitlines()) + 2
    files = [FIXTURES / "waivers/inline-expired.yaml", FIXTURES / "kubernetes/deployment-bad.yaml",
             FIXTURES / "kubernetes/job-bad.yaml"]
    r = run_gate(load_policy(policy), files, today=date(2026, 10, 1))
    assert r.warnings == [
        f"{policy}:{line}: policy waiver for GPU003 on k8s:nlp/* expired on 2026-01-31; it no longer waives",
        f"{files[0]}:2: inline waiver for SPOT001 on k8s:vision/Job/cache-warmup-old expired on 2026-01-31; it no "
        "longer waives",
    ]
    assert r.as_of == date(2026, 10, 1) and (r.fail_on, r.warn_only) == (Severity.HIGH, False)
    keys = [(f.file, f.line, -f.severity, f.rule, f.resource, f.key) for f in r.findings]
    assert keys == sorted(keys) and len({k[0] for k in keys}) == 3


def test_run_gate_warns_when_no_file_holds_a_gpu_job(tmp_path):
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    (tmp_path / "cpu.yaml").write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: cpu}\nspec:\n  template:\n"
                                       "    spec:\n      containers: [{name: c, image: busybox}]\n")
    r = run_gate(load_policy(POLICY), [tmp_path], today=date(2026, 10, 1), skip_unknown=True)
    assert r.warnings[-1] == "no GPU training jobs in 2 file(s): nothing to check"
    assert (r.exit_code, r.verdict, r.jobs, r.findings) == (0, "pass", [], [])


def test_run_gate_orders_failures_by_file_and_line(tmp_path):
    for name in ("b.yaml", "a.yaml"):
        (tmp_path / name).write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: [x\n")
    r = run_gate(load_policy(POLICY), [tmp_path / "b.yaml", tmp_path / "a.yaml"], today=date(2026, 10, 1))
    assert [Path(e.path).name for e in r.failures] == ["a.yaml", "b.yaml"]
    assert (r.exit_code, r.verdict) == (2, "error")


def test_run_gate_orders_findings_by_line_then_severity(tmp_path):
    """Two jobs in one file: the first (line 2) lacks its owner label (TAG002, medium); the second also runs on spot
    without a checkpoint (SPOT001, high, before TAG002 on the same line)."""
    good = (FIXTURES / "kubernetes/job-good.yaml").read_text().replace(", owner: ana", "")
    bad = (FIXTURES / "kubernetes/job-bad.yaml").read_text()
    assert "owner: " in bad
    bad = bad.replace("owner: ", "former-owner: ")
    path = tmp_path / "jobs.yaml"
    path.write_text(good + "---\n" + bad)
    r = run_gate(load_policy(POLICY), [path], today=date(2026, 10, 1))
    found = [(f.line, f.rule) for f in r.findings if f.rule in ("TAG002", "SPOT001")]
    second = found[1][0]
    assert second > len(good.splitlines())
    assert found == [(2, "TAG002"), (second, "SPOT001"), (second, "TAG002")]

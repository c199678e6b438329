"""The gate's CI formats: SARIF 2.1.0 validated against the official schema, JUnit XML, GitHub workflow
annotations, JSON and text, each checked against the findings it shows."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path

import jsonschema
import pytest

from auditor.gate import run_gate
from auditor.outputs.ci_formats import _data, _prop, as_json, github, junit, render, sarif, text
from auditor.policy import load_policy
from auditor.registry import get_rule

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "manifests"
DIRS = ["kubernetes", "kubeflow", "volcano", "sagemaker", "vertex", "azureml", "skypilot", "waivers", "katib",
        "kuberay", "operators", "hpo"]


@pytest.fixture(scope="module")
def result():
    """Every valid fixture at once: findings of every rule, waived ones (inline) and an expired inline waiver."""
    return run_gate(load_policy(FIXTURES / "policy.yml"), [FIXTURES / d for d in DIRS], today=date(2026, 10, 1))


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(REPO)  # SARIF paths are relative to the checkout the gate runs in
    return REPO


def rel(path: str) -> str:
    return Path(path).relative_to(REPO).as_posix()


def test_the_fixture_run_has_something_of_everything(result) -> None:
    assert result.blocking() and any(f.waived for f in result.findings)
    assert any(not result.blocks(f) and not f.waived for f in result.findings), "a finding below --fail-on"
    assert any("expired" in w for w in result.warnings)


# --- SARIF ---------------------------------------------------------------------------------------------------


def test_sarif_validates_against_the_official_schema(result, in_repo, sarif_schema) -> None:
    schema = json.loads(sarif_schema.read_text())
    doc = json.loads(sarif(result))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    errors = sorted(cls(schema).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1


def test_sarif_rule_metadata_comes_from_the_rule_docs(result, in_repo) -> None:
    run = json.loads(sarif(result))["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(r.id for r in result.rules)
    for r in rules:
        cls = get_rule(r["id"])
        doc = cls.doc()
        assert r["name"] == cls.name
        assert r["shortDescription"]["text"] == cls.summary()
        assert r["fullDescription"]["text"] == " ".join(doc["What it does"].split())
        assert " ".join(doc["How to fix"].split()) in r["help"]["text"]
        assert "## Why it matters" in r["help"]["markdown"] and doc["Example"] in r["help"]["markdown"]
        assert r["defaultConfiguration"]["level"] == {"critical": "error", "high": "error", "medium": "warning"}.get(
            cls.severity.label, "note")


def test_sarif_results_point_at_file_and_line(result, in_repo) -> None:
    run = json.loads(sarif(result))["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert len(run["results"]) == len(result.findings)
    for res, f in zip(run["results"], result.findings, strict=True):
        assert res["ruleId"] == f.rule == rules[res["ruleIndex"]]["id"]
        assert res["message"]["text"] == f.message
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": rel(f.file), "uriBaseId": "%SRCROOT%"}
        assert loc["region"]["startLine"] == f.line
        # the line is the first line of the job's document
        assert (REPO / rel(f.file)).read_text().splitlines()[f.line - 1].strip()
        assert res["partialFingerprints"]["gpuAuditorFingerprint/v1"] == f.fingerprint
        if f.waived:
            [s] = res["suppressions"]
            assert s["kind"] == ("inSource" if f.waiver.get("source") == "inline" else "external")
            assert f.waiver["reason"] in s["justification"]
        else:
            assert "suppressions" not in res
            assert res["level"] == ("error" if result.blocks(f) else "warning")


def test_sarif_for_a_file_outside_the_checkout_uses_a_file_uri(tmp_path: Path, in_repo) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text((FIXTURES / "kubernetes/job-bad.yaml").read_text())
    r = run_gate(load_policy(FIXTURES / "policy.yml"), [manifest], today=date(2026, 10, 1))
    loc = json.loads(sarif(r))["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": manifest.resolve().as_uri()}


# --- JUnit ---------------------------------------------------------------------------------------------------


def test_junit_has_a_case_per_job_and_rule(result) -> None:
    root = ET.fromstring(junit(result))
    assert root.tag == "testsuites"
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(result.jobs) * len(result.rules) == int(root.get("tests"))
    assert {s.get("name") for s in root.findall("testsuite")} == set(result.files)
    for suite in root.findall("testsuite"):
        assert int(suite.get("tests")) == len(suite.findall("testcase"))
        assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
        assert int(suite.get("skipped")) == len(suite.findall("testcase/skipped"))


def test_junit_failures_are_what_blocks_and_skips_are_waivers(result) -> None:
    root = ET.fromstring(junit(result))
    failed = set()
    for case in root.iter("testcase"):
        rule, _, job = case.get("name").partition(" · ")
        if case.find("failure") is not None:
            failed.add((rule.split()[0], job))
            assert case.get("file") in result.files
            assert int(case.get("line")) >= 1
        if case.find("skipped") is not None:
            assert case.find("skipped").get("message").startswith("waived: ")
    assert failed == {(f.rule, f.resource) for f in result.blocking()}
    assert int(root.get("failures")) == len(failed)
    assert int(root.get("skipped")) == len({(f.rule, f.resource) for f in result.findings if f.waived})
    below = [c for c in root.iter("testcase") if c.find("system-out") is not None]
    assert below and all("below --fail-on" in c.find("system-out").text for c in below)


# --- GitHub annotations --------------------------------------------------------------------------------------

ANNOTATION = re.compile(r"^::(error|warning|notice) file=([^,]+),line=(\d+),title=([^:]+)::(.+)$")


def test_github_annotations(result) -> None:
    lines = github(result).splitlines()
    annotations = [ANNOTATION.match(ln) for ln in lines if ln.startswith("::") and "file=" in ln]
    assert all(annotations) and len(annotations) == len(result.findings)
    for m, f in zip(annotations, result.findings, strict=True):
        kind, file, line, title, message = m.groups()
        assert kind == ("notice" if f.waived else "error" if result.blocks(f) else "warning")
        assert (file, int(line)) == (f.file, f.line)
        assert title == f"{f.rule} {f.name} ({f.severity.label})"
        assert message.startswith(_data(f.message)) and "\n" not in message
    assert sum(1 for ln in lines if ln.startswith("::error ")) == len(result.blocking())
    assert any(ln.startswith("::warning::") and "expired" in ln for ln in lines)
    assert lines[-1].startswith("gpu-auditor gate: ")


def test_github_escapes_what_would_break_an_annotation() -> None:
    assert _data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert _prop("a,b:c%.yaml") == "a%2Cb%3Ac%25.yaml"


def test_github_annotation_for_an_oddly_named_file(tmp_path: Path) -> None:
    manifest = tmp_path / "train,v2:spot.yaml"
    manifest.write_text((FIXTURES / "kubernetes/job-bad.yaml").read_text())
    r = run_gate(load_policy(FIXTURES / "policy.yml"), [manifest], today=date(2026, 10, 1))
    [line] = [ln for ln in github(r).splitlines() if ln.startswith("::error ")]
    assert f"file={_prop(str(manifest))},line=2," in line and "train%2Cv2%3Aspot.yaml" in line


# --- JSON and text -------------------------------------------------------------------------------------------


def test_json(result) -> None:
    doc = json.loads(as_json(result))
    assert doc["schema"] == "gpu-auditor/gate@1" and doc["verdict"] == "fail" and doc["exit_code"] == 1
    assert len(doc["findings"]) == len(result.findings) and len(doc["jobs"]) == len(result.jobs)
    assert {f["fingerprint"] for f in doc["findings"] if f["blocking"]} == {f.fingerprint for f in result.blocking()}
    budget = [f for f in doc["findings"] if f["rule"] == "BUD002" and f["evidence"].get("projected_cost")]
    assert budget and all(isinstance(f["evidence"]["projected_cost"], str) for f in budget)
    assert {w["source"] for w in doc["waivers"]} == {"inline"}


def test_text(result) -> None:
    out = text(result)
    for f in result.blocking():
        assert f"{f.file}:{f.line}: error: {f.rule} {f.name} ({f.severity.label}): {f.message}" in out
    assert out.count(": waived: ") == sum(1 for f in result.findings if f.waived)
    assert out.rstrip().splitlines()[-1].endswith("fail on high: FAIL")


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit", "github"])
def test_every_format_renders_a_clean_run(fmt: str, in_repo) -> None:
    r = run_gate(load_policy(FIXTURES / "policy.yml"), [FIXTURES / "kubernetes/job-good.yaml"],
                 today=date(2026, 10, 1))
    out = render(r, fmt)
    if fmt == "sarif":
        assert json.loads(out)["runs"][0]["results"] == []
    elif fmt == "junit":
        root = ET.fromstring(out)
        assert root.get("failures") == "0" and int(root.get("tests")) == len(r.rules)
    elif fmt == "json":
        assert json.loads(out)["verdict"] == "pass"
    else:
        assert out.rstrip().endswith("PASS")


# --- files that could not be read ----------------------------------------------------------------------------


@pytest.fixture
def broken(tmp_path: Path, in_repo) -> object:
    """A folder with two broken files and one good file with a blocking finding."""
    for src, name in (("invalid/malformed.yaml", "a.yaml"), ("invalid/malformed.json", "b.json"),
                      ("kubernetes/job-bad.yaml", "c.yaml")):
        (tmp_path / name).write_bytes((FIXTURES / src).read_bytes())
    return run_gate(load_policy(FIXTURES / "policy.yml"), [tmp_path], today=date(2026, 10, 1))


def test_every_format_names_the_files_that_failed(broken) -> None:
    assert broken.exit_code == 2 and len(broken.failures) == 2
    out = text(broken)
    assert re.search(r"a\.yaml:10: error: not valid YAML", out) and re.search(r"b\.json:3: error: not valid JSON", out)
    assert "SPOT001" in out, "the good file is still judged"
    doc = json.loads(as_json(broken))
    assert doc["verdict"] == "error" and doc["exit_code"] == 2
    assert [(Path(e["file"]).name, e["line"]) for e in doc["failed_files"]] == [("a.yaml", 10), ("b.json", 3)]
    run = json.loads(sarif(broken))["runs"][0]
    inv = run["invocations"][0]
    assert inv["executionSuccessful"] is False
    errors = [n for n in inv["toolExecutionNotifications"] if n["level"] == "error"]
    assert [(e["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 1)[-1],
             e["locations"][0]["physicalLocation"]["region"]["startLine"]) for e in errors] == [("a.yaml", 10),
                                                                                                 ("b.json", 3)]
    assert any(r["ruleId"] == "SPOT001" for r in run["results"])
    root = ET.fromstring(junit(broken))
    assert root.get("errors") == "2"
    erred = {Path(s.get("name")).name: s.get("errors") for s in root.iter("testsuite")}
    assert erred == {"a.yaml": "1", "b.json": "1", "c.yaml": "0"}
    gh = github(broken).splitlines()
    assert sum(line.startswith("::error file=") and "title=gpu-auditor: manifest not read" in line for line in gh) == 2


def test_sarif_with_failures_validates_against_the_official_schema(broken, sarif_schema) -> None:
    schema = json.loads(sarif_schema.read_text())
    cls = jsonschema.validators.validator_for(schema)
    errors = list(cls(schema).iter_errors(json.loads(sarif(broken))))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def test_markdown_has_the_verdict_and_a_row_per_open_finding(result) -> None:
    """`--format markdown` (the Action's job summary): the verdict as a heading, the summary line, one table row
    per open finding (blocking ones first), each waived finding in a list."""
    md = render(result, "markdown")
    lines = md.splitlines()
    assert lines[0] == {"fail": "### gpu-auditor gate: FAIL", "pass": "### gpu-auditor gate: pass"}[result.verdict]
    assert lines[2].startswith("gpu-auditor gate: ") and lines[2].endswith(("FAIL", "PASS"))
    rows = [ln for ln in lines if ln.startswith(("| blocks |", "| warns |"))]
    assert len(rows) == len(result.active())
    marks = [ln.split(" | ")[0] for ln in rows]
    assert marks == sorted(marks)  # "| blocks" before "| warns"
    assert sum(1 for ln in lines if ln.startswith("- ") and " until " in ln) == len(result.findings) - len(rows)
    assert all(ln.count(" | ") == 6 for ln in rows)  # no value broke its row


def test_markdown_escapes_what_would_break_the_table(tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text((FIXTURES / "kubernetes" / "job-bad.yaml").read_text().replace(
        "name: resnet-train", "name: 'resnet|<b>x</b>'", 1))
    md = render(run_gate(load_policy(FIXTURES / "policy.yml"), [manifest], today=date(2026, 10, 1)), "markdown")
    [row] = [ln for ln in md.splitlines() if ln.startswith("| blocks |")]
    assert row.count(" | ") == 6 and "<b>" not in row and "resnet\\|\\<b\\>x\\</b\\>" in row, row

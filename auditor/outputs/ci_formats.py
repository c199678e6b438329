"""The gate's verdict in the formats CI systems read: text, JSON, SARIF 2.1.0, JUnit XML and GitHub
workflow annotations. Each is a view of one GateResult."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from auditor import __version__
from auditor.errors import InputError
from auditor.gate import GATE_SCHEMA, GateResult
from auditor.model import Finding, Severity
from auditor.outputs.registry import gate_output, gate_outputs
from auditor.rule import Rule
from auditor.secret_patterns import mask, mask_deep
from auditor.text import md_escape, one_line, printable

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def render(result: GateResult, fmt: str) -> str:
    """One format of the verdict. Values from the manifests (job names, tags, file names) never act as
    control characters in it (text.py), and secrets in them are masked unless the policy says
    `mask_secrets: false` (secret_patterns.py)."""
    return gate_outputs()[fmt](result)


def write_output(path: Path, content: str, follow_symlinks: bool = False) -> None:
    """`gate --output`: written atomically; a symbolic link on the way is refused unless `follow_symlinks`."""
    from auditor.atomic import target, write_file  # only for --output: the gate on a commit starts without it

    path = target(path, follow_symlinks)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot write the gate's output: {e.strerror}", path=str(path)) from None
    write_file(path, content, what="gate's output")


def _masking(r: GateResult) -> bool:
    return getattr(r.policy, "mask_secrets", True)


def _show(r: GateResult, value: object) -> str:
    """An input value on one line, masked as the policy says."""
    return one_line(mask(str(value)) if _masking(r) and value is not None else value)


def _where(f: Finding) -> str:
    return f"{f.file}:{f.line}" if f.file else f.resource


def _failed_where(e: dict[str, Any]) -> str:
    return f"{e['file']}:{e['line']}" if e["line"] is not None else str(e["file"])


def summary_line(r: GateResult) -> str:
    active = r.active()
    counts = ", ".join(f"{n} {s.label}" for s in reversed(Severity)
                       if (n := sum(1 for f in active if f.severity == s)))
    waived = len(r.findings) - len(active)
    fail_on = r.fail_on.label if r.fail_on is not None else "none"
    verdict = {"pass": "PASS", "fail": "FAIL", "warn": "FAIL (--warn-only: passing anyway)",
               "error": "ERROR"}[r.verdict]
    failed = f"; {len({e.path for e in r.failures})} file(s) could not be read" if r.failures else ""
    return (f"gpu-auditor gate: {len(r.jobs)} job(s) in {len(r.files)} file(s){failed}; {len(active)} finding(s)"
            f"{f' ({counts})' if counts else ''}, {waived} waived; fail on {fail_on}: {verdict}")


@gate_output("text")
def text(r: GateResult) -> str:
    lines = [f"{_failed_where(e)}: error: {e['message']}" for e in r.failed_files()]
    for f in r.active():
        mark = "error" if r.blocks(f) else "warning"
        lines.append(f"{_where(f)}: {mark}: {f.rule} {f.name} ({f.severity.label}): {f.message}")
        lines.append(f"    job {f.resource}; fix: {f.remediation}")
    for f in r.findings:
        if f.waiver is not None:
            lines.append(f"{_where(f)}: waived: {f.rule} {f.name}: {f.waiver['reason']} "
                         f"(until {f.waiver['expires']})")
    lines += [f"warning: {w}" for w in r.warnings]
    lines.append(summary_line(r))
    return "\n".join(_show(r, line) for line in lines) + "\n"


@gate_output("markdown")
def markdown(r: GateResult) -> str:
    """The gate's report in Markdown, for a GitHub job summary ($GITHUB_STEP_SUMMARY) or a merge request: the
    verdict, the files that could not be read, a table of the open findings (blocking ones first), the waived ones
    and the warnings. Every value from the inputs escaped, on one line, masked as the policy says."""
    def cell(value: object) -> str:
        return md_escape(_show(r, value))

    verdict = {"pass": "pass", "fail": "FAIL", "warn": "FAIL, passing anyway (--warn-only)", "error": "ERROR"}
    out = [f"### gpu-auditor gate: {verdict[r.verdict]}", "", summary_line(r), ""]
    if r.failures:
        out += ["**Could not be read** (exit 2):", ""]
        out += [f"- `{_failed_where(e)}`: {cell(e['message'])}" for e in r.failed_files()] + [""]
    active = sorted(r.active(), key=lambda f: not r.blocks(f))
    if active:
        out += ["| | Severity | Rule | Job | Where | Finding | Fix |", "|---|---|---|---|---|---|---|"]
        out += [f"| {'blocks' if r.blocks(f) else 'warns'} | {f.severity.label} | {f.rule} {f.name} | "
                f"{cell(f.resource)} | {cell(_where(f))} | {cell(f.message)} | {f.remediation} |"  # the rule's Markdown
                for f in active] + [""]
    waived = [(f, f.waiver) for f in r.findings if f.waiver is not None]  # f.waived: it has a waiver
    if waived:
        out += ["Waived:", ""]
        out += [f"- {f.rule} on {cell(f.resource)} ({cell(_where(f))}) until {w['expires']}: "
                f"{cell(w['reason'])}" for f, w in waived] + [""]
    out += [f"- warning: {cell(w)}" for w in r.warnings]
    return "\n".join(out).rstrip("\n") + "\n"


@gate_output("json")
def as_json(r: GateResult) -> str:
    doc = {
        "schema": GATE_SCHEMA,
        "tool": {"name": "gpu-auditor", "version": __version__},
        "as_of": r.as_of.isoformat(),
        "policy": {"name": r.policy.name, "version": r.policy.version, "path": r.policy.path},
        "verdict": r.verdict, "exit_code": r.exit_code,
        "fail_on": r.fail_on.label if r.fail_on is not None else "none", "warn_only": r.warn_only,
        "files": r.files,
        "failed_files": r.failed_files(),
        "jobs": [{"id": j.id, "name": j.name, "platform": j.platform, "kind": j.manifest_kind, "file": j.source_file,
                  "line": j.source_line, "provider": j.provider, "region": j.region, "instance_type": j.instance_type,
                  "instance_count": j.instance_count, "gpu_model": j.gpu_model, "gpu_count": j.gpu_count,
                  "gpus_in_all": j.gpus_in_all(), "accelerator_family": j.accelerator_family,
                  "accelerator": j.accelerator, "spot": j.spot, "checkpoint_uri": j.checkpoint_uri,
                  "max_runtime_s": j.max_runtime_s, "workload": j.workload, "job_kind": j.kind,
                  **({"sweep": {"max_trials": j.sweep_max_trials, "parallel_trials": j.sweep_parallel_trials,
                                "early_stopping": j.sweep_early_stopping, "algorithm": j.sweep_algorithm,
                                "grid_size": j.sweep_grid_size}} if j.kind == "sweep" else {}),
                  "tags": j.tags} for j in r.jobs],
        "rules": [rule.id for rule in r.rules],
        "findings": [{**f.to_dict(), "blocking": r.blocks(f)} for f in r.findings],
        "waivers": r.waivers,
        "warnings": r.warnings,
    }
    doc = json.loads(json.dumps(doc, default=str))
    return json.dumps(mask_deep(doc) if _masking(r) else doc, indent=2) + "\n"


# ---- SARIF 2.1.0 --------------------------------------------------------------------------------------------


def _level(severity: Severity) -> str:
    return "error" if severity >= Severity.HIGH else "warning" if severity >= Severity.MEDIUM else "note"


def _result_level(r: GateResult, f: Finding) -> str:
    """error for what blocks the merge; a waived finding keeps its rule's level (its suppression says why)."""
    if r.blocks(f):
        return "error"
    if f.waived:
        return _level(f.severity)
    return "warning" if f.severity >= Severity.MEDIUM else "note"


def _uri(path: str) -> tuple[str, str | None]:
    """A file as SARIF wants it: relative to the checkout (%SRCROOT%) where it lies under it, else a file URI."""
    p = Path(path).resolve()
    try:
        return quote(p.relative_to(Path.cwd().resolve()).as_posix()), "%SRCROOT%"
    except ValueError:
        return p.as_uri(), None


def _rule_descriptor(rule: Rule) -> dict[str, Any]:
    doc = rule.doc()
    flat = {k: " ".join(v.split()) for k, v in doc.items()}
    markdown = "\n\n".join(f"## {s}\n\n{doc[s]}" for s in ("What it does", "Why it matters", "Example", "How to fix"))
    return {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": flat["summary"]},
        "fullDescription": {"text": flat["What it does"]},
        "help": {"text": f"{flat['Why it matters']} How to fix: {flat['How to fix']}", "markdown": markdown},
        "defaultConfiguration": {"level": _level(rule.severity)},
        "properties": {"tags": ["gpu", "cost", rule.clause], "severity": rule.severity.label,
                       "policyClause": rule.clause},
    }


def _failure_notification(e: dict[str, Any]) -> dict[str, Any]:
    """A file that could not be read, as an error notification located at its file and line."""
    uri, base = _uri(str(e["file"]))
    location: dict[str, Any] = {"artifactLocation": {"uri": uri, **({"uriBaseId": base} if base else {})}}
    if e["line"]:
        location["region"] = {"startLine": e["line"]}
    return {"level": "error", "message": {"text": f"{_failed_where(e)}: {e['message']}"},
            "locations": [{"physicalLocation": location}]}


@gate_output("sarif")
def sarif(r: GateResult) -> str:
    rules = sorted(r.rules, key=lambda x: x.id)
    index = {rule.id: i for i, rule in enumerate(rules)}
    results = []
    for f in r.findings:
        res: dict[str, Any] = {
            "ruleId": f.rule,
            "level": _result_level(r, f),
            "message": {"text": f.message},
            "partialFingerprints": {"gpuAuditorFingerprint/v1": f.fingerprint},
            "properties": {"severity": f.severity.label, "job": f.resource, "evidence": f.evidence,
                           "remediation": f.remediation},
        }
        if f.rule in index:
            res["ruleIndex"] = index[f.rule]
        if f.file:
            uri, base = _uri(f.file)
            artifact = {"uri": uri, **({"uriBaseId": base} if base else {})}
            location: dict[str, Any] = {"physicalLocation": {"artifactLocation": artifact}}
            if f.line:
                location["physicalLocation"]["region"] = {"startLine": f.line}
            location["logicalLocations"] = [{"fullyQualifiedName": f.resource, "kind": "resource"}]
            res["locations"] = [location]
        if f.waiver is not None:
            w = f.waiver
            res["suppressions"] = [{"kind": "inSource" if w.get("source") == "inline" else "external",
                                    "status": "accepted",
                                    "justification": f"{w['reason']} (until {w['expires']})"}]
        results.append(res)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "gpu-auditor", "version": __version__, "semanticVersion": __version__,
                            "rules": [_rule_descriptor(rule) for rule in rules]}},
        "automationDetails": {"id": "gpu-auditor/gate/"},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
        "invocations": [{"executionSuccessful": not r.failures,
                         "toolExecutionNotifications": [_failure_notification(e) for e in r.failed_files()] +
                         [{"level": "warning", "message": {"text": w}} for w in r.warnings]}],
        "results": _clean(r, results),
    }
    run["invocations"][0]["toolExecutionNotifications"] = _clean(r, run["invocations"][0][
        "toolExecutionNotifications"])
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2, default=str) + "\n"


def _clean(r: GateResult, value: object) -> object:
    """Every string of a JSON-like value on one line and masked as the policy says (SARIF results)."""
    value = json.loads(json.dumps(value, default=str))
    if _masking(r):
        value = mask_deep(value)
    return _one_line_deep(value)


def _one_line_deep(value: object) -> object:
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {one_line(k): _one_line_deep(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_one_line_deep(v) for v in value]
    return value


# ---- JUnit XML ----------------------------------------------------------------------------------------------


@gate_output("junit")
def junit(r: GateResult) -> str:
    """One test case per job and rule, one suite per file: a finding at or above --fail-on is a failure, a
    waived one is skipped, one below it passes with the finding in its system-out."""
    import xml.etree.ElementTree as ET  # only for JUnit: the gate on a commit starts without it

    by_case: dict[tuple[str, str], list[Finding]] = {(f.resource, f.rule): [] for f in r.findings}
    for f in r.findings:
        by_case[(f.resource, f.rule)].append(f)
    root = ET.Element("testsuites", name="gpu-auditor gate")
    totals = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
    failed: dict[str, list[dict[str, Any]]] = {}
    for e in r.failed_files():
        failed.setdefault(str(e["file"]), []).append(e)
    for file in r.files + [f for f in failed if f not in r.files]:
        suite = ET.SubElement(root, "testsuite", name=file)
        counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
        for e in failed.get(file, []):  # a file that could not be read: an error, as JUnit names a broken test
            case = ET.SubElement(suite, "testcase", classname=_failed_where(e), name="gpu-auditor reads the manifest",
                                 file=file, attrib={"line": str(e["line"])} if e["line"] else {})
            ET.SubElement(case, "error", type="unreadable manifest", message=e["message"]).text = \
                f"{_failed_where(e)}: {e['message']}"
            counts["tests"] += 1
            counts["errors"] += 1
        for job in (j for j in r.jobs if j.source_file == file):
            for rule in sorted(r.rules, key=lambda x: x.id):
                case = ET.SubElement(suite, "testcase", classname=f"{file}:{job.source_line}",
                                     name=f"{rule.id} {rule.name} · {job.id}", file=file, line=str(job.source_line))
                counts["tests"] += 1
                found = by_case.get((job.id, rule.id), [])
                blocking = [f for f in found if r.blocks(f)]
                open_ = [f for f in found if not f.waived]
                if blocking:
                    counts["failures"] += 1
                    fail = ET.SubElement(case, "failure", type=blocking[0].severity.label,
                                         message=blocking[0].message)
                    fail.text = "\n".join(f"{f.severity.label}: {one_line(f.message)}\nfix: {one_line(f.remediation)}"
                                           for f in blocking)  # input on its line: no line of it starts `::`
                elif found and not open_:
                    counts["skipped"] += 1
                    ET.SubElement(case, "skipped", message="waived: " + "; ".join(
                        f"{f.waiver['reason']} (until {f.waiver['expires']})" for f in found if f.waiver is not None))
                if open_ and not blocking:
                    ET.SubElement(case, "system-out").text = "\n".join(
                        f"{f.severity.label} (below --fail-on): {one_line(f.message)}" for f in open_)
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    masking = _masking(r)
    for el in root.iter():  # XML 1.0 allows no C0 control character but tab, LF and CR, even escaped
        for k, value in el.attrib.items():
            el.set(k, one_line(mask(value) if masking else value))
        if el.text:
            el.text = printable(mask(el.text) if masking else el.text)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# ---- GitHub workflow commands -------------------------------------------------------------------------------


def _data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(s: str) -> str:
    return _data(s).replace(":", "%3A").replace(",", "%2C")


@gate_output("github")
def github(r: GateResult) -> str:
    """`::error file=...,line=...,title=...::message` for what blocks, `::warning` below --fail-on, `::notice`
    for what a waiver covers; GitHub shows them on the lines of the pull request."""
    out = []
    for e in r.failed_files():
        props = [f"file={_prop(_show(r, e['file']))}"] + ([f"line={e['line']}"] if e["line"] else [])
        out.append(f"::error {','.join(props + ['title=gpu-auditor: manifest not read'])}::"
                   f"{_data(_show(r, e['message']))}")
    for f in r.findings:
        kind = "notice" if f.waived else "error" if r.blocks(f) else "warning"
        props = [f"file={_prop(_show(r, f.file))}"] if f.file else []
        if f.file and f.line:
            props.append(f"line={f.line}")
        props.append(f"title={_prop(_show(r, f'{f.rule} {f.name} ({f.severity.label})'))}")
        msg = _show(r, f.message) + (_show(r, f" (waived until {f.waiver['expires']}: {f.waiver['reason']})")
                                     if f.waiver is not None else "\nFix: " + _show(r, f.remediation))
        out.append(f"::{kind} {','.join(props)}::{_data(msg)}")
    out += [f"::warning::{_data(_show(r, w))}" for w in r.warnings]
    out.append(_show(r, summary_line(r)))
    return "\n".join(out) + "\n"


FORMATS = tuple(gate_outputs())  # the registered formats (outputs/registry.py), as `gate --format` offers them

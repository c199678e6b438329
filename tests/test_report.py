"""The report views of one Audit: HTML, Markdown, CSV; escaping of hostile text; atomic, readable writes."""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from datetime import date
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import pytest

from auditor import report
from auditor.engine import Audit, parse_quarter, run_audit
from auditor.errors import InputError
from auditor.model import Finding, Severity, fmt_money
from auditor.policy import load_policy
from auditor.report import (
    CSV_FIELDS,
    FILE_NAMES,
    md_escape,
    render_csv,
    render_html,
    render_json,
    render_md,
    safe_cell,
    write_outputs,
)

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
RULE_IDS = ("GPU001", "GPU002", "TAG001", "NET001", "SPOT001")
SCRIPT = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("x")'


@pytest.fixture(scope="module")
def demo_audit() -> Audit:
    policy = load_policy(DEMO / "policy.yml")
    return run_audit(policy, [DEMO / "billing"], DEMO / "inventory.json", parse_quarter("2026-Q3"),
                     date(2026, 10, 15))


def hostile_findings() -> list[Finding]:
    return [
        Finding(rule="GPU001", name="idle-gpu", severity=Severity.CRITICAL, resource=FORMULA, message=SCRIPT,
                entity_type="GpuAsset", provider="aws", team="<img src=x onerror=alert(2)>",
                owner="+cmd|' /C calc'!A0", cost=Decimal("12.34"), monthly_savings=Decimal("5.00"),
                remediation="@SUM(1+1)", key="a"),
        Finding(rule="TAG001", name="missing-required-tags", severity=Severity.HIGH, resource=SCRIPT,
                message=FORMULA + " | broken | table", entity_type="ResourceSpend", team="-2+3",
                cost=Decimal("-7.50"), key="b"),
    ]


@pytest.fixture()
def hostile_audit(demo_audit) -> Audit:
    return replace(demo_audit, findings=hostile_findings() + list(demo_audit.findings))


# ---- HTML ---------------------------------------------------------------------------------------------


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_is_self_contained(demo_audit):
    html = render_html(demo_audit)
    assert html.lstrip().startswith("<!DOCTYPE html>")
    assert "<script" not in html.lower()
    parser = Tags()
    parser.feed(html)
    names = {t for t, _ in parser.tags}
    assert not names & {"script", "link", "img", "iframe", "object", "embed", "base", "form"}
    for tag, attrs in parser.tags:
        for attr in ("src", "href", "srcset", "background"):
            value = (attrs.get(attr) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "javascript:")), (tag, attr, value)
        assert not any(a.startswith("on") for a in attrs), (tag, attrs)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html, re.I)
    assert "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)


def test_html_content(demo_audit):
    html = render_html(demo_audit)
    for rule_id in RULE_IDS:
        assert rule_id in html, rule_id
    s = demo_audit.summary
    assert fmt_money(s["billed_cost"]) == "$294,973.29"
    for amount in (s["billed_cost"], s["gpu_cost"], s["monthly_savings"], s["effective_cost"]):
        assert fmt_money(amount) in html
    assert "2026-Q3" in html
    assert "Example ML GPU policy" in html
    assert "expired" in html  # the lapsed GPU001 waiver
    assert "Waived until 2027-03-31" in html
    for src in demo_audit.sources:
        assert src.path in html


def test_html_escapes_hostile_text(hostile_audit):
    html = render_html(hostile_audit)
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html.lower()
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    parser = Tags()
    parser.feed(html)
    assert not any(a.startswith("on") for _, attrs in parser.tags for a in attrs)
    assert "HYPERLINK(&#34;x&#34;)" in html or "HYPERLINK(&quot;x&quot;)" in html


def test_html_escapes_hostile_policy_and_warnings(demo_audit):
    audit = copy.copy(demo_audit)
    audit.policy = replace(demo_audit.policy, name=SCRIPT, owner=SCRIPT)
    audit.warnings = [SCRIPT]
    audit.clauses = [dict(c, text=SCRIPT) for c in demo_audit.clauses]
    audit.waivers = [dict(w, reason=SCRIPT) for w in demo_audit.waivers]
    html = render_html(audit)
    assert "<script" not in html.lower()
    assert html.count("&lt;script&gt;") >= 5


# ---- Markdown -----------------------------------------------------------------------------------------


def test_markdown_content(demo_audit):
    md = render_md(demo_audit)
    assert md.startswith("# GPU spend audit 2026-Q3: Example ML GPU policy")
    for rule_id in RULE_IDS:
        assert rule_id in md
    assert "$294,973.29" in md
    assert fmt_money(demo_audit.summary["monthly_savings"]) in md
    assert "(waived)" in md


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


def test_markdown_escapes_hostile_text(hostile_audit):
    md = render_md(hostile_audit)
    assert not re.search(r"(?<!\\)<", md)  # every < is escaped, so no HTML reaches a Markdown renderer
    assert r"\<script\>alert\(1\)\</script\>" in md
    # a pipe in a message does not add a column: every table row has as many cell borders as its header
    header = "| Severity | Rule | Finding | Team | Cost | Saving / month |"
    lines = md.splitlines()
    start = lines.index(header)
    rows = [ln for ln in lines[start:] if ln.startswith("|")]
    rows = rows[:next((i for i, r in enumerate(rows) if r.startswith("| Clause")), len(rows))]
    assert len(rows) == 2 + len(hostile_audit.findings)
    assert {_cells(r) for r in rows} == {_cells(header)}
    assert "HYPERLINK\\(" in md


def test_markdown_escapes_hostile_policy_name(demo_audit):
    audit = copy.copy(demo_audit)
    audit.policy = replace(demo_audit.policy, name=SCRIPT)
    audit.clauses = [dict(c, text=SCRIPT) for c in demo_audit.clauses]
    md = render_md(audit)
    assert not re.search(r"(?<!\\)<", md)


def test_markdown_escapes_hostile_policy_owner(demo_audit):
    audit = copy.copy(demo_audit)
    audit.policy = replace(demo_audit.policy, owner=SCRIPT)
    md = render_md(audit)
    assert not re.search(r"(?<!\\)<", md)


def test_md_escape_unit():
    assert md_escape(None) == ""
    assert md_escape("a\nb  c") == "a b c"
    assert md_escape("[x](http://e)") == r"\[x\]\(http://e\)"
    assert md_escape("a|b") == r"a\|b"
    assert md_escape("<b>") == r"\<b\>"


# ---- CSV ----------------------------------------------------------------------------------------------


def test_csv_content(demo_audit):
    rows = list(csv.DictReader(io.StringIO(render_csv(demo_audit))))
    assert tuple(rows[0].keys()) == CSV_FIELDS
    assert len(rows) == len(demo_audit.findings)
    assert set(RULE_IDS) <= {r["rule"] for r in rows}
    for r in rows:
        assert r["cost"] == "" or re.fullmatch(r"-?\d+\.\d{2}", r["cost"])
    waived = [r for r in rows if r["waived"] == "True"]
    assert [r["resource"] for r in waived] == ["i-0bench4f1a2b3c4d5"]


def test_csv_neutralises_formulas(hostile_audit):
    rows = list(csv.DictReader(io.StringIO(render_csv(hostile_audit))))
    first, second = rows[0], rows[1]
    assert first["resource"] == "'" + FORMULA
    assert first["message"] == SCRIPT  # not a formula: left as it is
    assert first["owner"] == "'+cmd|' /C calc'!A0"
    assert first["remediation"] == "'@SUM(1+1)"
    assert first["cost"] == "12.34"
    assert second["message"].startswith("'=HYPERLINK(")
    assert second["team"] == "'-2+3"
    assert second["cost"] == "-7.50"  # a negative amount is a number, not a formula
    for r in rows:
        for v in r.values():
            assert not (v and v[0] in "=+@\t\r"), v
            assert not (v.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", v)), v


@pytest.mark.parametrize(("value", "expected"), [
    ("=1+1", "'=1+1"), ("+1", "+1"), ("-1.5", "-1.5"), ("-x", "'-x"), ("@A1", "'@A1"), ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"), ("plain", "plain"), ("", ""), (None, ""), (Decimal("-3.10"), "-3.10"), (5, "5"),
])
def test_safe_cell(value, expected):
    assert safe_cell(value) == expected


# ---- JSON ---------------------------------------------------------------------------------------------


def test_json_round_trips(hostile_audit):
    doc = json.loads(render_json(hostile_audit))
    assert doc["findings"][0]["message"] == SCRIPT
    assert doc["findings"][0]["resource"] == FORMULA
    assert doc["findings"][0]["cost"] == "12.34"


# ---- writing ------------------------------------------------------------------------------------------


def test_write_outputs_writes_all_four(demo_audit, tmp_path):
    out = tmp_path / "nested" / "report"
    written = write_outputs(demo_audit, out)
    assert [p.name for p in written] == ["audit.json", "report.html", "report.md", "findings.csv"]
    assert sorted(p.name for p in out.iterdir()) == sorted(FILE_NAMES.values())
    assert (out / "report.html").read_text(encoding="utf-8") == render_html(demo_audit)
    assert json.loads((out / "audit.json").read_text(encoding="utf-8"))["window"]["label"] == "2026-Q3"


def test_write_outputs_is_atomic_when_rendering_fails(demo_audit, tmp_path, monkeypatch):
    (tmp_path / "report.html").write_text("the previous report\n")

    def boom(audit):
        raise RuntimeError("renderer failed")

    monkeypatch.setitem(report.RENDERERS, "md", boom)
    with pytest.raises(RuntimeError, match="renderer failed"):
        write_outputs(demo_audit, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # nothing else, no temp files
    assert (tmp_path / "report.html").read_text() == "the previous report\n"
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError):
        write_outputs(demo_audit, fresh)
    assert not fresh.exists()


def test_write_outputs_is_atomic_when_writing_fails(demo_audit, tmp_path, monkeypatch):
    (tmp_path / "report.html").write_text("the previous report\n")
    (tmp_path / "audit.json").write_text("{}\n")
    real = report.tempfile.mkstemp
    calls = []

    def mkstemp(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(report.tempfile, "mkstemp", mkstemp)
    with pytest.raises(InputError, match="No space left on device") as exc:
        write_outputs(demo_audit, tmp_path)
    assert exc.value.path == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "report.html"]
    assert (tmp_path / "report.html").read_text() == "the previous report\n"
    assert (tmp_path / "audit.json").read_text() == "{}\n"


def test_write_outputs_rename_failure_leaves_previous_report(demo_audit, tmp_path, monkeypatch):
    (tmp_path / "audit.json").write_text("{}\n")
    (tmp_path / "report.html").write_text("the previous report\n")
    real = os.replace
    calls = []

    def flaky_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(report.os, "replace", flaky_replace)
    with pytest.raises(InputError, match="left as it was"):
        write_outputs(demo_audit, tmp_path)
    # the first file was already renamed into place when the second rename failed: it is put back
    assert (tmp_path / "audit.json").read_text() == "{}\n"
    assert (tmp_path / "report.html").read_text() == "the previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "report.html"]


def test_write_outputs_rename_failure_without_previous_report(demo_audit, tmp_path, monkeypatch):
    real = os.replace
    calls = []

    def flaky_replace(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(report.os, "replace", flaky_replace)
    with pytest.raises(InputError):
        write_outputs(demo_audit, tmp_path)
    assert list(tmp_path.iterdir()) == []  # no half report: the two files already renamed are removed again


def test_write_outputs_into_a_file_is_an_input_error(demo_audit, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(InputError) as exc:
        write_outputs(demo_audit, blocker / "out")
    assert exc.value.path == str(blocker / "out")


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_respect_the_umask(tmp_path, umask, mode):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "auditor", "audit", "-q", "--policy", str(DEMO / "policy.yml"), "--inventory",
           str(DEMO / "inventory.json"), "--quarter", "2026-Q3", "--rule", "GPU001", "--out", str(out),
           str(DEMO / "billing" / "aws-cur-2026-07.csv")]
    proc = subprocess.run(cmd, preexec_fn=lambda: os.umask(umask), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    files = sorted(out.iterdir())
    assert [p.name for p in files] == sorted(FILE_NAMES.values())
    for p in files:
        assert p.stat().st_mode & 0o777 == mode, (p.name, oct(p.stat().st_mode))


def test_written_files_are_readable_by_others_in_process(demo_audit, tmp_path):
    old = os.umask(0o022)
    os.umask(old)
    write_outputs(demo_audit, tmp_path)
    for p in tmp_path.iterdir():
        m = p.stat().st_mode & 0o777
        assert m == 0o666 & ~report._UMASK
        if old == 0o022:
            assert m == 0o644

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
from dataclasses import fields, replace
from datetime import date
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor import atomic
from auditor.audit import Audit
from auditor.core import run_audit
from auditor.errors import InputError
from auditor.model import Finding, Severity, fmt_money, money
from auditor.outputs import report
from auditor.outputs.report import (
    CSV_FIELDS,
    FILE_NAMES,
    md_escape,
    render_csv,
    render_html,
    render_json,
    render_md,
    write_outputs,
)
from auditor.policy import load_policy
from auditor.text import is_clean, json_text, one_line, safe_cell, safe_row
from auditor.trend import compare
from auditor.window import parse_quarter

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
RULE_IDS = ("GPU001", "GPU002", "TAG001", "NET001", "SPOT001")
SCRIPT = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("x")'


@pytest.fixture(scope="module")
def demo_audit(demo_audit_result) -> Audit:
    return demo_audit_result  # run_audit of the demo, 2026-Q3, today 2026-10-15, with the inventory (conftest)


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
    assert fmt_money(s["billed_cost"]) == "$341,964.32"
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
    assert "$341,964.32" in md
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
    ("=1+1", "'=1+1"), ("+1", "+1"), ("-1.5", "-1.5"), ("-x", "'-x"), ("@A1", "'@A1"), ("\t=1", "\\t=1"),
    ("\r=1", "\\r=1"), ("a\nb\x1b", "a\\nb\\x1b"), ("plain", "plain"), ("", ""), (None, ""),
    (Decimal("-3.10"), "-3.10"), (5, "5"),
])
def test_safe_cell(value, expected):
    assert safe_cell(value) == expected
    assert safe_row([value, "plain", None]) == [expected, "plain", ""]


class _Text(str):
    """Text of a class of its own (an enum's value, a path's name): a cell made of it is its text."""


CELL = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                 st.decimals(allow_nan=False, places=2), st.text(max_size=6),
                 st.text(st.sampled_from("=+-@\t\r\n\x1b\x85\u202e1.a "), max_size=5),
                 st.text(st.sampled_from("=+-@1. x"), max_size=4).map(_Text))


@settings(max_examples=300, deadline=None)
@given(st.lists(CELL, max_size=8))
def test_a_row_is_made_safe_cell_by_cell(values):
    """safe_row, which looks at a row at once where it can, gives each cell what safe_cell gives it."""
    assert safe_row(values) == [safe_cell(v) for v in values]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=12), st.text(st.characters(max_codepoint=0x7f), max_size=12),
                 st.text(st.sampled_from("ab =\x00\t\n\r\x1b\x7f\x85\x9f\xa0\u2028\u202e\ufeff\udc80é"), max_size=8)))
def test_text_is_escaped_as_its_expressions_escape_it(text):
    """one_line, is_clean and json_text pass ASCII with no control character by as it is, without their regular
    expressions: on any text they give what the expressions alone give."""
    from auditor import text as t

    assert one_line(text) == t._ONE_LINE.sub(t._escape, text)
    assert is_clean(text) == (t._ONE_LINE.search(text) is None)
    assert json_text(text) == t._JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# ---- JSON ---------------------------------------------------------------------------------------------


def test_json_round_trips(hostile_audit):
    doc = json.loads(render_json(hostile_audit))
    assert doc["findings"][0]["message"] == SCRIPT
    assert doc["findings"][0]["resource"] == FORMULA
    assert doc["findings"][0]["cost"] == "12.34"


# ---- writing ------------------------------------------------------------------------------------------


def test_write_outputs_writes_all_four_and_the_jobs(demo_audit, tmp_path):
    out = tmp_path / "nested" / "report"
    written = write_outputs(demo_audit, out)
    assert [p.name for p in written] == ["audit.json", "report.html", "report.md", "findings.csv", "jobs.csv",
                                         "actions.csv"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*FILE_NAMES.values(), "jobs.csv", "actions.csv"])
    assert (out / "report.html").read_text(encoding="utf-8") == render_html(demo_audit)
    assert json.loads((out / "audit.json").read_text(encoding="utf-8"))["window"]["label"] == "2026-Q3"


def test_write_outputs_is_atomic_when_rendering_fails(demo_audit, tmp_path, monkeypatch):
    (tmp_path / "report.html").write_text("the previous report\n")

    real = report._render

    def boom(fmt, view):
        if fmt == "md":
            raise RuntimeError("renderer failed")
        return real(fmt, view)

    monkeypatch.setattr(report, "_render", boom)
    with pytest.raises(RuntimeError, match="renderer failed"):
        write_outputs(demo_audit, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # nothing else, no temp files
    assert (tmp_path / "report.html").read_text() == "the previous report\n"
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError):
        write_outputs(demo_audit, fresh)
    assert not fresh.exists()


def leftovers(out: Path) -> list[str]:
    """Hidden folders a write of `out` left beside it."""
    return [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}{atomic.STAGING}")]


def test_write_outputs_is_atomic_when_writing_fails(demo_audit, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("the previous report\n")
    (out / "audit.json").write_text("{}\n")
    real = atomic._write
    calls = []

    def write(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(atomic, "_write", write)
    with pytest.raises(InputError, match="No space left on device") as exc:
        write_outputs(demo_audit, out)
    assert exc.value.path == str(out)
    assert sorted(p.name for p in out.iterdir()) == ["audit.json", "report.html"]
    assert (out / "report.html").read_text() == "the previous report\n"
    assert (out / "audit.json").read_text() == "{}\n"
    assert leftovers(out) == []


def fail_publish(monkeypatch, name: str) -> None:
    """The step that makes the new set visible (`_exchange`, or `rename` for a first set) fails with EIO."""
    def refuse(src, dst, *args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(atomic if name == "_exchange" else atomic.os, name, refuse)


def test_write_outputs_exchange_failure_leaves_previous_report(demo_audit, tmp_path, monkeypatch):
    out = tmp_path / "out"
    (out / "outbox").mkdir(parents=True)  # a folder carried into the new set, and back on the failure
    (out / "audit.json").write_text("{}\n")
    (out / "report.html").write_text("the previous report\n")
    fail_publish(monkeypatch, "_exchange")
    with pytest.raises(InputError, match="Input/output error; the previous report is left as it was"):
        write_outputs(demo_audit, out)
    assert (out / "audit.json").read_text() == "{}\n"
    assert (out / "report.html").read_text() == "the previous report\n"
    assert sorted(p.name for p in out.iterdir()) == ["audit.json", "outbox", "report.html"]
    assert leftovers(out) == []


def test_write_outputs_rename_failure_without_previous_report(demo_audit, tmp_path, monkeypatch):
    fail_publish(monkeypatch, "rename")
    with pytest.raises(InputError):
        write_outputs(demo_audit, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []  # no half report, no folder


def test_write_outputs_into_a_file_is_an_input_error(demo_audit, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(InputError) as exc:
        write_outputs(demo_audit, blocker / "out")
    assert exc.value.path == str(blocker / "out")


@pytest.mark.heavy
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_respect_the_umask(tmp_path, umask, mode):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "auditor", "audit", "-q", "--policy", str(DEMO / "policy.yml"), "--inventory",
           str(DEMO / "inventory.json"), "--quarter", "2026-Q3", "--rule", "GPU001", "--out", str(out),
           str(DEMO / "billing" / "aws-cur-2026-07.csv")]
    proc = subprocess.run(cmd, preexec_fn=lambda: os.umask(umask), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    files = sorted(out.iterdir())
    assert [p.name for p in files] == sorted([*FILE_NAMES.values(), "jobs.csv", "actions.csv"])
    for p in files:
        assert p.stat().st_mode & 0o777 == mode, (p.name, oct(p.stat().st_mode))


def test_written_files_are_readable_by_others_in_process(demo_audit, tmp_path):
    old = os.umask(0o022)
    os.umask(old)
    write_outputs(demo_audit, tmp_path)
    for p in tmp_path.iterdir():
        m = p.stat().st_mode & 0o777
        assert m == 0o666 & ~atomic._UMASK
        if old == 0o022:
            assert m == 0o644


# ---- every section, from the audit.json dict alone ----------------------------------------------------------

SECTIONS = ("Summary", "Where the money went", "The GPU fleet", "Findings", "The policy", "Forecast",
            "Quarter over quarter", "Inputs")
HOSTILE_ID = '/subscriptions/x/vm-<script>alert(1)</script>" onload="alert(2)'
HOSTILE_TEAM = '" onload="alert(3)'
HOSTILE_PROJECT = "<script>alert(4)</script>"


@pytest.fixture(scope="module")
def demo_doc(demo_audit) -> dict:
    """The demo audit as of 2026-10-15, against last quarter's audit (test_report_trend.last_quarter)."""
    from test_report_trend import last_quarter

    audit = copy.copy(demo_audit)
    audit.as_of = date(2026, 10, 15)
    audit.previous = {"path": "q2/audit.json", "sha256": "0" * 64, "doc": last_quarter(audit.to_dict())}
    audit.trend = compare(audit.to_dict(), audit.previous["doc"])
    return audit.to_dict()


def test_every_section_in_html_and_markdown(demo_doc):
    html, md = render_html(demo_doc), render_md(demo_doc)
    for title in SECTIONS:
        assert re.search(rf"<h2[^>]*>{title}</h2>", html), title
        assert f"\n## {title}\n" in md, title
    for text in ("GPU-hours by pricing", "On-demand", "Spot", "Committed", "Under 10%", "10% to 50%", "Over 50%",
                 "Idle and oversized machines", "By account", "By region", "By team", "By project", "2026-Q4",
                 "At the current run rate", "With the savings applied", "Resolved since last quarter (1)",
                 "Still open", "New this quarter", "Billing lines by month"):
        assert text in html, text
    # counted as the policy's clauses: a clause is broken where any of its rules is
    states: dict[str, set[str]] = {}
    for c in demo_doc["clauses"]:
        states.setdefault(c["clause"], set()).add(c["status"].split()[0])
    broken = sum(1 for s in states.values() if "broken" in s)
    met = sum(1 for s in states.values() if "broken" not in s and "met" in s)
    counted = f"{met} met, {broken} broken"
    assert len(states) < len(demo_doc["clauses"]) and broken >= 5 and counted in html and counted in md
    for src in demo_doc["inputs"]["billing"]:
        assert src["sha256"] in html and src["sha256"] in md
    assert fmt_money(demo_doc["summary"]["quarterly_savings"]) in html


def test_summary_reconciles_to_the_cent(demo_doc):
    s = demo_doc["summary"]
    def near(parts: list, whole) -> bool:
        """Each figure is rounded once, to the cent: parts add up to the whole within half a cent each."""
        return abs(sum(Decimal(p) for p in parts) - Decimal(whole)) <= Decimal("0.005") * len(parts)

    total = s["billed_cost"]["USD"]
    for dim, rows in s["breakdown"].items():
        assert near([r["billed_cost"]["USD"] for r in rows], total), dim
    assert near([v["USD"] for v in s["by_category"].values()], total)
    gpu = s["gpu_cost"]["USD"]
    assert near([r["gpu_cost"].get("USD", "0") for r in s["breakdown"]["provider"]], gpu)
    assert near([m["billed_cost"]["USD"] for m in s["fleet"]["by_model"]], gpu)
    hours = Decimal(s["gpu_hours"])
    assert abs(sum(Decimal(h) for h in s["gpu_hours_by_pricing"].values()) - hours) <= Decimal("0.15")
    assert abs(sum(Decimal(m["gpu_hours"]) for m in s["fleet"]["by_model"]) - hours) <= Decimal("0.05") * len(
        s["fleet"]["by_model"])
    # one quarterly savings figure: the next quarter's hours (2026-Q4: 2,208), the forecast's as well
    assert s["quarterly_savings"] == s["forecast"]["savings"]
    assert Decimal(s["quarterly_savings"]["USD"]) == money(Decimal(s["monthly_savings"]["USD"]) * 2208 / 730)
    # the headline is the sum of the actions, one per resource
    assert sum(Decimal(a["saving"]) for a in s["actions"] if a["saving"]) == Decimal(s["monthly_savings"]["USD"])
    assert len({(a["resource"], a["currency"]) for a in s["actions"]}) == len(s["actions"])
    for team, detail in s["team_spend"].items():
        assert near([v["USD"] for v in detail["by_category"].values()], s["by_team"][team]["USD"])


def test_fleet_bands_and_idle_machine(demo_doc):
    fleet = demo_doc["summary"]["fleet"]
    # the demo's idle p5.48xlarge: 8 H100s at 2.4% for all 2,208 hours of the quarter, the only machine under 10%
    assert fleet["utilisation"]["under_10"] == str(8 * 2208) + ".0"
    idle = next(m for m in fleet["machines"] if m["id"] == "i-0a1f3c5e7b9d24680")
    assert idle["status"] == ["idle"] and idle["team"] == "vision" and idle["gpu_count"] == 8
    bench = next(m for m in fleet["machines"] if m["id"] == "i-0bench4f1a2b3c4d5")
    assert bench["status"] == ["oversized (waived)"]
    assert fleet["machines"][0]["id"] == "i-0a1f3c5e7b9d24680"  # the most expensive first
    assert demo_doc["summary"]["gpu_hours_by_pricing"]["spot"] != "0.0"


@pytest.mark.heavy
def test_forecast_is_the_last_month_run_rate(demo_audit, demo_doc):
    from auditor.tables.store import Store

    store = Store()
    store.load_billing([DEMO / "billing"])
    september = store.lines().execute("SELECT sum(BilledCost) FROM lines WHERE ChargePeriodStart >= '2026-09-01' "
                                  "AND ChargePeriodStart < '2026-10-01'").fetchone()[0]
    fc = demo_doc["summary"]["forecast"]
    assert fc["basis"]["start"] == "2026-09-01T00:00:00Z" and fc["next"]["label"] == "2026-Q4"
    hours = Decimal(2208)  # October to December 2026
    assert fc["billed_cost"]["USD"] == str((september * hours / 720).quantize(Decimal("0.01")))  # 720 h in Sep
    savings = Decimal(demo_doc["summary"]["monthly_savings"]["USD"]) * hours / 730  # from the rounded monthly
    assert abs(Decimal(fc["savings"]["USD"]) - savings) <= Decimal("0.02")
    with_savings = Decimal(fc["with_savings"]["USD"])
    assert abs(with_savings - (Decimal(fc["billed_cost"]["USD"]) - Decimal(fc["savings"]["USD"]))) <= Decimal("0.01")


def test_partial_audit_says_so_at_the_top(demo_doc):
    doc = copy.deepcopy(demo_doc)
    doc["partial"] = True
    html, md = render_html(doc), render_md(doc)
    assert "Partial audit" in html and html.index("Partial audit") < html.index(">Summary</h2>")
    assert "**Partial audit:**" in md and md.index("Partial audit") < md.index("## Summary")
    assert "Partial audit" not in render_html(demo_doc)


@pytest.mark.heavy
def test_what_was_missing(tmp_path):
    """One month of AWS billing audited as the quarter, without an inventory: the gaps are named at the top."""
    policy = load_policy(DEMO / "policy.yml")
    audit = run_audit(policy, [DEMO / "billing" / "aws-cur-2026-07.csv"], None, parse_quarter("2026-Q3"),
                      date(2026, 10, 15))
    missing = audit.to_dict()["summary"]["coverage"]["missing"]
    assert "no aws billing lines for 2026-08" in missing and "no aws billing lines for 2026-09" in missing
    assert any(m.startswith("no GPU inventory") for m in missing)
    html = render_html(audit)
    assert html.index("Gaps in the inputs") < html.index(">Summary</h2>")
    assert "no aws billing lines for 2026-09" in render_md(audit)


def test_expiring_waivers(demo_doc):
    doc = copy.deepcopy(demo_doc)
    assert "Waivers expiring" not in render_html(doc)  # 2027-03-31 is months away on 2026-10-15
    doc["as_of"] = "2027-03-10"
    html, md = render_html(doc), render_md(doc)
    assert re.search(r"Waivers expiring within 30 days of 2027-03-10.*i-0bench\*.*in 21 days", html, re.S)
    assert "Waivers expiring within 30 days of 2027-03-10" in md and "in 21 days" in md


def test_team_view(demo_doc):
    html, md = render_html(demo_doc, team="nlp"), render_md(demo_doc, team="nlp")
    nlp = [f for f in demo_doc["findings"] if f["team"] == "nlp"]
    others = [f for f in demo_doc["findings"] if f["team"] != "nlp"]
    for f in nlp:
        assert f["resource"] in html
    assert "i-0a1f3c5e7b9d24680" not in html[:html.index(">Inputs</h2>")]  # vision's idle H100
    assert not any(f["resource"] in md[:md.index("## Inputs")] for f in others)
    assert fmt_money(demo_doc["summary"]["by_team"]["nlp"]) in html
    assert fmt_money(demo_doc["summary"]["billed_cost"]) not in html  # the organisation's total is not the team's
    assert "2026-Q3 · team nlp" in html and "lead-nlp@example.com" in html
    rows = list(csv.DictReader(io.StringIO(render_csv(demo_doc, team="nlp"))))
    assert len(rows) == len(nlp) and {r["team"] for r in rows} == {"nlp"}


def test_saved_audit_rerenders_identically(demo_doc):
    saved = json.loads(render_json(demo_doc))
    assert saved == demo_doc
    assert render_html(saved) == render_html(demo_doc)
    assert render_md(saved) == render_md(demo_doc)
    assert render_csv(saved) == render_csv(demo_doc)
    assert render_json(saved) == render_json(demo_doc)


def test_audit_json_is_written_as_json_dumps_writes_it(demo_doc, hostile_audit):
    """audit.json is written item by item (outputs/audit_json.py), as the text json.dumps(indent=2) gives."""
    from auditor.outputs.view import audit_doc

    odd = {"findings": [], "jobs": [{}], "summary": {"n": [1, 2.5, float("nan"), float("-inf"), True, None, []],
                                                   "e": {}, 3: {"x": [[{}], {"k": ()}]}, 1.5: "a\u2028b\x1b\n\"",
                                                   None: False, "list": [("t", 1)]}, "severity": Severity.HIGH}
    for doc in (audit_doc(demo_doc), audit_doc(hostile_audit), odd, {}):
        assert render_json(doc) == json_text(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n"
    with pytest.raises(TypeError):
        render_json({"findings": [{"cost": Decimal(1)}]})


def test_audit_json_follows_its_schema(demo_doc, demo_audit):
    import jsonschema

    schema = json.loads((REPO / "auditor" / "data" / "audit.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    for doc in (demo_doc, json.loads(render_json(demo_audit))):
        errors = [f"{e.json_path}: {e.message[:120]}" for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
        assert errors == []


def test_finding_dict_has_every_field_in_order():
    """Finding.to_dict is written out field by field (not dataclasses.asdict): a field added to Finding must
    reach audit.json too."""
    f = Finding(rule="TAG001", name="missing-required-tags", severity=Severity.HIGH, resource="i-1", message="m",
                entity_type="ResourceSpend", evidence={"gb": Decimal("1.5")}, cost=Decimal("1.005"), key="k")
    d = f.to_dict()
    # billing_ids is the rules' hint to running.judge, not the finding's data (repr=False)
    assert list(d) == [x.name for x in fields(Finding) if x.name != "key" and x.repr] + ["fingerprint", "waived"]
    assert (d["severity"], d["cost"], d["monthly_savings"], d["waived"]) == ("high", "1.00", None, False)
    assert d["fingerprint"] == f.fingerprint and d["evidence"] == {"gb": Decimal("1.5")}


def test_csv_carries_evidence_and_waiver(demo_doc):
    rows = list(csv.DictReader(io.StringIO(render_csv(demo_doc))))
    bench = next(r for r in rows if r["resource"] == "i-0bench4f1a2b3c4d5")
    assert bench["waiver_expires"] == "2027-03-31" and bench["waiver_owner"] == "lead-platform@example.com"
    assert json.loads(bench["evidence"])["recommended_type"] == "g6.48xlarge"


# ---- hostile text from the billing itself, in every format --------------------------------------------------


@pytest.fixture(scope="module")
def hostile_billing_audit(tmp_path_factory) -> Audit:
    """A real FOCUS export whose resource id and tags carry markup: the audit reads it like any other."""
    src = DEMO / "billing" / "focus-azure-2026-q3.csv"
    with open(src, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = [next(reader), next(reader)]
        fields = reader.fieldnames
    rows[0].update(ResourceId=HOSTILE_ID, ResourceName=HOSTILE_ID,
                   Tags=json.dumps({"team": HOSTILE_TEAM, "project": HOSTILE_PROJECT}))
    path = tmp_path_factory.mktemp("hostile") / "focus-hostile.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return run_audit(load_policy(DEMO / "policy.yml"), [path], None, None, date(2026, 10, 15))


@pytest.mark.heavy
def test_hostile_billing_is_text_in_every_format(hostile_billing_audit):
    doc = hostile_billing_audit.to_dict()
    assert any(f["resource"] == HOSTILE_ID and f["team"] == HOSTILE_TEAM for f in doc["findings"])
    assert {r["key"] for r in doc["summary"]["breakdown"]["project"]} >= {HOSTILE_PROJECT}
    for html in (render_html(doc), render_html(doc, team=HOSTILE_TEAM)):
        assert "<script" not in html.lower()
        parser = Tags()
        parser.feed(html)
        assert not any(a.startswith("on") for _, attrs in parser.tags for a in attrs)
        assert "vm-&lt;script&gt;alert(1)&lt;/script&gt;&#34; onload=&#34;alert(2)" in html
        assert "&#34; onload=&#34;alert(3)" in html and "&lt;script&gt;alert(4)&lt;/script&gt;" in html
    for md in (render_md(doc), render_md(doc, team=HOSTILE_TEAM)):
        assert not re.search(r"(?<!\\)<", md)
        assert r"vm-\<script\>alert\(1\)\</script\>" in md and r"\<script\>alert\(4\)\</script\>" in md
    rows = list(csv.DictReader(io.StringIO(render_csv(doc))))
    hostile = next(r for r in rows if r["resource"] == HOSTILE_ID)  # text, exactly as billed
    assert hostile["team"] == HOSTILE_TEAM
    assert json.loads(render_json(doc))["findings"] == doc["findings"]

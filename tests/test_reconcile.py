"""Every figure in every view reconciles with the one figure in audit.json, and every breakdown with its total,
to the cent (issue 16).

Each case runs the real CLI (`audit`, `report --team`, `email --dry-run`) on the demo, each public sample in
../shared/samples/billing (see SOURCES.md there), a small benchmark shape (benchmarks/generate.py) and a bill in
another currency than the policy's; the figures are parsed back out of report.html, report.md, findings.csv, the
e-mails (subject, text and HTML parts) and the terminal summary."""

from __future__ import annotations

import csv
import email
import gzip
import io
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from email import policy as email_policy
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from auditor.cli import cli
from auditor.outputs.mail import ENV
from auditor.policy import load_policy

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
SAMPLE_FILES = [  # in the public samples (the `samples` fixture)
    "aws_cur_legacy/focus_converters__sample-anonymous-aws-export-dataset.csv",
    "focus/FOCUS-Sample-Data__FOCUS-1.0__focus_sample.csv",
    "azure/finops-toolkit__EA_ActualCost_Small.csv",
    "gcp_bigquery/koku__gcp__2022-08-01_5.csv",
]
NO_SMTP = {ENV + k: None for k in ("HOST", "PORT", "USER", "PASSWORD", "PASSWORD_FILE", "SECURITY", "CAFILE", "FROM")}
MONEY = re.compile(r"(-?)\$([0-9][0-9,]*\.[0-9]{2})|(-?)([0-9][0-9,]*\.[0-9]{2}) ([A-Z]{3})\b")
ZERO = Decimal(0)


def run(*args) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args], env=NO_SMTP, catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result.output


# ---- reading figures back --------------------------------------------------------------------------------------


def amounts(text: str) -> dict[str, Decimal]:
    """`$1,234.56 + 7.00 EUR` as {currency: amount}; `–` as {}."""
    out: dict[str, Decimal] = {}
    for m in MONEY.finditer(text or ""):
        if m.group(2):
            cur, value = "USD", Decimal(m.group(1) + m.group(2).replace(",", ""))
        else:
            cur, value = m.group(5), Decimal(m.group(3) + m.group(4).replace(",", ""))
        out[cur] = out.get(cur, ZERO) + value
    return out


def plain(d: dict | None) -> dict[str, Decimal]:
    """An audit.json amount map, without zero entries."""
    return {c: Decimal(v) for c, v in (d or {}).items() if Decimal(v) != 0}


def nz(d: dict[str, Decimal]) -> dict[str, Decimal]:
    return {c: v for c, v in d.items() if v != 0}


def total(rows: list[dict[str, Decimal]]) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for r in rows:
        for c, v in r.items():
            out[c] = out.get(c, ZERO) + v
    return nz(out)


@dataclass
class Table:
    heading: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    html_rows: list[str] = field(default_factory=list)  # each row's markup (HTML only), for colours

    def col(self, name: str) -> list[str]:
        i = self.header.index(name)
        return [r[i] if i < len(r) else "" for r in self.rows]


class _Tables(HTMLParser):
    """Every <table> of a page with a header row (<th>), its cells' text, and the h2/h3 above it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.stack: list[dict] = []
        self.heading = ""
        self.h: list[str] | None = None
        self.text: list[str] = []  # all text, outside <code>
        self.code_depth = 0
        self.code_text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3"):
            self.h = []
        elif tag == "table":
            self.stack.append({"heading": self.heading, "rows": [], "th": None, "markup": []})
        elif tag == "tr" and self.stack:
            self.stack[-1]["rows"].append([])
            self.stack[-1]["markup"].append("")
        elif tag in ("td", "th") and self.stack:
            t = self.stack[-1]
            if t["rows"]:
                t["rows"][-1].append("")
                if tag == "th":
                    t["th"] = len(t["rows"]) - 1
        elif tag == "code":
            self.code_depth += 1
        if self.stack and self.stack[-1]["markup"]:
            self.stack[-1]["markup"][-1] += self.get_starttag_text() or ""

    def handle_endtag(self, tag):
        if tag in ("h2", "h3") and self.h is not None:
            self.heading = " ".join("".join(self.h).split())
            self.h = None
        elif tag == "table" and self.stack:
            t = self.stack.pop()
            rows = [[" ".join(c.split()) for c in r] for r in t["rows"]]
            if t["th"] is not None:
                header = rows[t["th"]]
                body = [r for r in rows[t["th"] + 1:] if r]
                self.tables.append(Table(t["heading"], header, body, t["markup"][t["th"] + 1:]))
        elif tag == "code":
            self.code_depth -= 1

    def handle_data(self, data):
        if self.h is not None:
            self.h.append(data)
        (self.code_text if self.code_depth else self.text).append(data)
        for t in self.stack[-1:]:
            if t["rows"] and t["rows"][-1]:
                t["rows"][-1][-1] += data


def html_tables(html: str) -> tuple[list[Table], str]:
    """The page's tables, and its text outside <code>."""
    p = _Tables()
    p.feed(html)
    return p.tables, " ".join(" ".join(p.text).split())


def html_headings(html: str) -> list[str]:
    return [" ".join(re.sub(r"<[^>]+>", "", h).split()) for h in re.findall(r"<h3[^>]*>(.*?)</h3>", html, re.S)]


def md_tables(md: str) -> list[Table]:
    out, heading, block = [], "", []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            block.append([re.sub(r"\\(.)", r"\1", c.strip()) for c in cells])  # md_escape undone
            continue
        if len(block) >= 2:
            out.append(Table(heading, block[0], [r for r in block[2:]]))
        block = []
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
    return out


def find(tables: list[Table], first: str, *also: str) -> list[Table]:
    return [t for t in tables if t.header and t.header[0] == first and all(a in t.header for a in also)]


# ---- what the figures must be, from audit.json alone -----------------------------------------------------------


ORG_WIDE = {"SteadyGpuSpend", "UnattributedSpend", "WaiverStatus"}  # the organisation's, not a team's resource


def team_of(f: dict) -> str:
    return "(organisation)" if f["entity_type"] in ORG_WIDE else f.get("team") or "(unattributed)"


def savings_of(findings: list[dict]) -> dict[str, Decimal]:
    """Per resource the largest saving of high confidence (one resource is saved once; the others are to
    check), summed per currency."""
    best: dict[tuple[str, str], Decimal] = {}
    for f in findings:
        if f["monthly_savings"] is not None and not f["waived"] and f.get("confidence", "high") == "high":
            k = (f["resource"], f["currency"])
            best[k] = max(best.get(k, Decimal(f["monthly_savings"])), Decimal(f["monthly_savings"]))
    out: dict[str, Decimal] = {}
    for (_, cur), v in best.items():
        out[cur] = out.get(cur, ZERO) + v
    return nz(out)


# ---- the checks, one view at a time ----------------------------------------------------------------------------

BREAKDOWN_KEYS = ("Provider", "Account", "Region", "Team", "Project")
RAW_DECIMAL = re.compile(r"\d\.\d*0{6,}\b")
LABELS = {"spend": ("Total spend", "Team spend"), "gpu": ("GPU compute",), "savings": ("Savings found",)}


ERRORS: list[str] = []  # every failed check of the running test: one view's failure does not hide the next one's


def soft(fn):
    """Run a check; a failed assertion is collected (see reconcile), so that every view is checked."""

    def wrapper(*args, **kwargs):
        try:
            fn(*args, **kwargs)
        except AssertionError as e:
            ERRORS.append(f"{fn.__name__}: {str(e).splitlines()[0]}")
    return wrapper


def figures(doc: dict, team: str | None) -> tuple[dict, dict, dict]:
    """Spend, GPU compute and monthly savings of the audit, or of one team, from audit.json."""
    s = doc["summary"]
    if team is None:
        spend, gpu = plain(s["billed_cost"]), plain(s["gpu_cost"])
        savings = plain(s["monthly_savings"])
    else:
        spend = plain((s.get("by_team") or {}).get(team))
        gpu = plain(((s.get("team_spend") or {}).get(team) or {}).get("by_category", {}).get("gpu_compute"))
        savings = savings_of([f for f in doc["findings"] if team_of(f) == team])
    assert savings == savings_of([f for f in doc["findings"] if team is None or team_of(f) == team])
    return spend, gpu, savings


def check_report(doc: dict, tables: list[Table], text: str, rule_lines: list[str], team: str | None, where: str):
    """One rendering of the report (HTML or Markdown, the whole or one team's) against audit.json."""
    for check in (check_headline, check_breakdowns, check_budgets, check_savings, check_clauses):
        soft(check)(doc, tables, text, rule_lines, team, where)
    soft(check_decimals)(text, where)


def check_headline(doc, tables, text, rule_lines, team, where):
    """Spend, GPU compute, savings found."""
    spend, gpu, savings = figures(doc, team)
    [card] = [t for t in tables if t.header and t.header[0].startswith(LABELS["spend"])] or [None]
    if card is not None:  # Markdown: one table with the figures as its row
        row = dict(zip(card.header, card.rows[0], strict=True))
        assert nz(amounts(row[card.header[0]])) == spend, f"{where}: headline spend"
        assert nz(amounts(row["GPU compute"])) == gpu, f"{where}: headline GPU compute"
        assert nz(amounts(row["Savings found / month"])) == savings, f"{where}: headline savings"
    else:  # HTML: the summary cards
        for key, want in (("spend", spend), ("gpu", gpu), ("savings", savings)):
            pattern = "(?:" + "|".join(LABELS[key]) + r")\s+((?:-?\$[0-9,.]+|[0-9,.]+ [A-Z]{3})(?: \+ (?:-?\$[0-9,.]+|"
            m = re.search(pattern + r"[0-9,.]+ [A-Z]{3}))*|–)", text)
            assert m, f"{where}: no {key} card"
            assert nz(amounts(m.group(1))) == want, f"{where}: headline {key} {m.group(1)!r} != {want}"



def check_breakdowns(doc, tables, text, rule_lines, team, where):
    """Where the money went: categories and every breakdown add up to the total shown."""
    spend, gpu, _ = figures(doc, team)
    [categories] = find(tables, "Category", "Spend")
    assert total([amounts(c) for c in categories.col("Spend")]) == spend, f"{where}: categories"
    breakdowns = [t for k in BREAKDOWN_KEYS for t in find(tables, k, "GPU compute")]
    assert breakdowns, f"{where}: no breakdown tables"
    for t in breakdowns:
        money_col = "Total" if "Total" in t.header else "Spend"
        assert total([amounts(c) for c in t.col(money_col)]) == spend, f"{where}: by {t.header[0]} spend"
        assert total([amounts(c) for c in t.col("GPU compute")]) == gpu, f"{where}: by {t.header[0]} GPU compute"



def check_budgets(doc, tables, text, rule_lines, team, where):
    """Each team's spend is the one in summary.by_team; every unit the policy sets is shown, and the table
    agrees with the budget findings."""
    s = doc["summary"]
    [budgets] = find(tables, "Team", "Budget / quarter")
    for row in budgets.rows:
        cells = dict(zip(budgets.header, row, strict=False))
        assert nz(amounts(cells["Spend"])) == plain(s["by_team"].get(cells["Team"])), f"{where}: budget spend"
    for name, t in load_policy(doc["policy"]["path"]).teams.items():
        if team not in (None, name):
            continue
        rows = [dict(zip(budgets.header, r, strict=False)) for r in budgets.rows if r[0] == name]
        assert len(rows) == 1, f"{where}: team {name} of the policy has {len(rows)} rows in the budget table"
        row = rows[0]
        if t.gpu_hours_per_quarter is not None:
            assert "GPU-hours budget" in budgets.header, f"{where}: GPU-hours budget not shown"
            assert Decimal(row["GPU-hours budget"].replace(",", "")) == t.gpu_hours_per_quarter, where
        over = [f for f in doc["findings"] if f["rule"] == "BUD001" and f["resource"] == name and not f["waived"]]
        if over:  # the bar says what the finding says
            used = [Decimal(c.rstrip("%")) for k, c in row.items() if k.startswith("Used") and c.endswith("%")]
            assert max(used) >= 100, f"{where}: {name} has a budget finding, but the table shows {row}"



def check_savings(doc, tables, text, rule_lines, team, where):
    """Findings by team and by rule: their savings add up to the headline, overlaps shown once and marked."""
    _, _, savings = figures(doc, team)
    [by_team] = find(tables, "Team", "Saving / month", "Open") or [None]
    if by_team is not None and team is None:
        assert total([amounts(c) for c in by_team.col("Saving / month")]) == savings, f"{where}: findings by team"
    counted, marked = [], []
    for line in rule_lines:
        for m in re.finditer(r"((?:-?\$[0-9,.]+|[0-9,.]+ [A-Z]{3})) a month( already counted under [A-Z]+\d{3})?",
                             line):
            (marked if m.group(2) else counted).append(amounts(m.group(1)))
    assert total(counted) == savings, f"{where}: per-rule savings {total(counted)} != headline {savings}"



def check_clauses(doc, tables, text, rule_lines, team, where):
    """Counted as the policy's clauses, each with one state."""
    [policy_table] = [t for t in tables if t.header and t.header[0] == "Clause"]
    names = [re.split(r"[ (]", c, maxsplit=1)[0] for c in policy_table.col("Clause")]
    assert len(names) == len(set(names)), f"{where}: a clause is listed twice: {names}"
    assert len(names) == len({c["clause"] for c in doc["clauses"]}), f"{where}: clauses"



def check_decimals(text, where):
    assert not RAW_DECIMAL.search(text), f"{where}: raw decimal {RAW_DECIMAL.search(text).group(0)}"


def check_no_markdown(text: str, where: str):
    assert "`" not in text, f"{where}: Markdown backticks in the HTML: ...{text[text.index('`') - 40:][:80]}"


def check_html(doc: dict, html: str, team: str | None, where: str):
    tables, text = html_tables(html)
    soft(check_no_markdown)(text, where)
    rule_lines = [h for h in html_headings(html) if re.match(r"[A-Z]+\d{3} ", h)]
    check_report(doc, tables, text, rule_lines, team, where)
    soft(check_forecast)(doc, [t for t in tables if t.heading == "Forecast"], team, where)


def check_md(doc: dict, md: str, team: str | None, where: str):
    tables = md_tables(md)
    rule_lines = [line for line in md.splitlines() if re.match(r"- \*\*[A-Z]+\d{3} ", line)]
    check_report(doc, tables, md, rule_lines, team, where)
    soft(check_forecast)(doc, [t for t in tables if t.heading == "Forecast"], team, where)


def check_forecast(doc: dict, tables: list[Table], team: str | None, where: str):
    fc = doc["summary"].get("forecast")
    if not fc:
        return
    [t] = tables
    rows = {r[0]: nz(amounts(r[1])) for r in t.rows}
    run_rate = plain(fc["billed_cost"] if team is None else fc["by_team"].get(team))
    assert rows["At the current run rate"] == run_rate, f"{where}: forecast run rate"
    quarter = fc["next"]["label"]
    saving_rows = [k for k in rows if "saving" in k.lower() and "applied" not in k]
    assert saving_rows, f"{where}: no forecast savings row"
    for k in saving_rows:  # named for the window it covers, not "the quarter" (that is the summary's figure)
        assert "the quarter" not in k and quarter in k, f"{where}: forecast savings labelled {k!r}"
    if team is None:
        assert rows[saving_rows[0]] == plain(fc["savings"]), f"{where}: forecast savings"


def check_csv(doc: dict, text: str, where: str):
    rows = list(csv.DictReader(io.StringIO(text)))
    by_print = {f["fingerprint"]: f for f in doc["findings"]}
    assert len(rows) == len(by_print), where
    for r in rows:
        f = by_print[r["fingerprint"]]
        assert (r["cost"] or None) == f["cost"] and (r["monthly_savings"] or None) == f["monthly_savings"], where
        assert (r["counted_under"] or None) == f.get("counted_under"), where
    counted = [{r["currency"]: Decimal(r["monthly_savings"])} for r in rows
               if r["monthly_savings"] and r["waived"] == "False" and not r["counted_under"]
               and r["confidence"] == "high"]
    assert total(counted) == plain(doc["summary"]["monthly_savings"]), f"{where}: savings not counted under another"


def check_terminal(doc: dict, out: str, where: str):
    s = doc["summary"]
    figures = {m.group(1): m.group(2) for m in re.finditer(r"^  (total spend|GPU compute|savings / month)\s+(.*)$",
                                                         out, re.M)}
    assert nz(amounts(figures["total spend"])) == plain(s["billed_cost"]), f"{where}: terminal total"
    assert nz(amounts(figures["GPU compute"])) == plain(s["gpu_cost"]), f"{where}: terminal GPU"
    assert nz(amounts(figures["savings / month"])) == plain(s["monthly_savings"]), f"{where}: terminal savings"
    rows = re.findall(r"^  ([A-Z]+\d{3})\s+\S+\s+\S+\s+\d+\s+(.*)$", out, re.M)
    # `$98.10*` and `(+$98.10*)`: savings another rule's finding on the same resource already counts; `?`:
    # savings to check (confidence below high), not in the total
    counted = [amounts(re.sub(r"\(\+[^)]*[*?]\)", "", v)) for _, v in rows if not v.rstrip().endswith(("*", "?"))]
    assert total(counted) == plain(s["monthly_savings"]), f"{where}: terminal per-rule savings {total(counted)}"
    if any("*" in v for _, v in rows):
        assert re.search(r"^  \* .*counted", out, re.M), f"{where}: an overlap is marked but not explained"


def check_emails(doc: dict, outbox: Path, where: str):
    s = doc["summary"]
    emls = sorted(outbox.glob("*.eml"))
    assert emls, where
    policy_teams = s.get("teams") or {}
    for p in emls:
        msg = email.message_from_bytes(p.read_bytes(), policy=email_policy.default)
        text = msg.get_body(("plain",)).get_content()
        html = msg.get_body(("html",)).get_content()
        leads = [t for t, v in policy_teams.items() if v["lead"] == msg["To"]]
        is_owner = "whole picture" in text
        subj = msg["Subject"]
        m = re.search(r": (.*) spent, (?:(.*)/month savings found|no savings found)$", subj)
        assert m, f"{where}: subject {subj!r}"
        if is_owner:
            spend, savings = plain(s["billed_cost"]), plain(s["monthly_savings"])
        else:
            spend = total([plain(s["by_team"].get(t)) for t in leads])
            savings = savings_of([f for f in doc["findings"] if f.get("team") in leads])
        assert nz(amounts(m.group(1))) == spend, f"{where}: subject spend {subj!r}"
        assert nz(amounts(m.group(2) or "")) == savings, f"{where}: subject savings {subj!r}"
        # the text part: each section's spend and savings
        for sec in re.split(r"^== ", text, flags=re.M)[1:]:
            name = sec.split("\n", 1)[0]
            got = {k: v for k, v in re.findall(r"^(Spent|Savings found|Total spend)\s+(.*)$", sec, re.M)}
            if name.startswith("All teams"):
                assert nz(amounts(got["Total spend"])) == plain(s["billed_cost"]), where
                assert nz(amounts(got["Savings found"].split(" a month")[0])) == plain(s["monthly_savings"]), where
                continue
            t = re.match(r'Team "?([^" ]+)', name)
            key = t.group(1) if t else "(unattributed)"
            assert nz(amounts(got["Spent"].split(" of a ")[0])) == plain(s["by_team"].get(key)), f"{where}: {name}"
            mine = [f for f in doc["findings"] if team_of(f) == key]
            assert nz(amounts(got["Savings found"])) == savings_of(mine), f"{where}: {name} savings"
        assert not RAW_DECIMAL.search(text) and not RAW_DECIMAL.search(html), where
        # the full report, attached: the owner's of the whole audit, a lead's of each of their teams
        reports = [a.get_content() for a in msg.iter_attachments() if a.get_content_type() == "text/html"]
        assert len(reports) == (1 if is_owner else len(leads)), f"{where}: attached reports"
        for team, report in zip([None] if is_owner else leads, reports, strict=True):
            check_html(doc, report, team, f"{where}: report attached to {msg['To']}")


# ---- the cases ---------------------------------------------------------------------------------------------


def audit_case(tmp: Path, billing: list[Path], policy: Path, *extra) -> tuple[dict, Path, str]:
    out = tmp / "audit"
    terminal = run("audit", "--policy", policy, "--as-of", "2026-10-15", "--out", out, *extra, *billing)
    return json.loads((out / "audit.json").read_text()), out, terminal


def reconcile(tmp: Path, billing: list[Path], policy: Path, *extra) -> dict:
    doc, out, terminal = audit_case(tmp, billing, policy, *extra)
    return check_every_view(doc, out, terminal, policy)


def check_every_view(doc: dict, out: Path, terminal: str, policy: Path) -> dict:
    """Every view of an audit written into `out` (which the e-mails' outbox is written into) against its
    audit.json: the terminal, the reports, findings.csv, each team's report and the e-mails."""
    ERRORS.clear()
    soft(check_terminal)(doc, terminal, "terminal")
    check_html(doc, (out / "report.html").read_text(), None, "report.html")
    check_md(doc, (out / "report.md").read_text(), None, "report.md")
    soft(check_csv)(doc, (out / "findings.csv").read_text(), "findings.csv")
    teams = sorted(set(doc["summary"]["by_team"]) | set(doc["summary"].get("teams") or {}))
    for team in teams:
        check_md(doc, run("report", out / "audit.json", "--format", "md", "--team", team), team, f"md --team {team}")
        check_html(doc, run("report", out / "audit.json", "--format", "html", "--team", team), team,
                   f"html --team {team}")
    run("email", "--policy", policy, "--dry-run", out)
    soft(check_emails)(doc, out / "outbox", "email")
    assert not ERRORS, f"{len(ERRORS)} checks failed:\n" + "\n".join(dict.fromkeys(ERRORS))
    return doc


@pytest.mark.heavy
def test_demo_reconciles(demo_run, tmp_path):
    # the session's demo audit (conftest.demo_run: --inventory, --quarter 2026-Q3, --as-of 2026-10-15), copied to
    # write the e-mails beside it
    out = Path(shutil.copytree(demo_run.folder, tmp_path / "audit"))
    doc = check_every_view(json.loads((out / "audit.json").read_text()), out, demo_run.output, DEMO / "policy.yml")
    # AWS tax is its own category, and no team's
    tax = ZERO
    for f in sorted((DEMO / "billing").glob("aws-cur-*")):
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt", newline="") as fh:
            for r in csv.DictReader(fh):  # the September file spells the columns as Athena does (snake_case)
                kind = r.get("lineItem/LineItemType", r.get("line_item_line_item_type"))
                if kind == "Tax":
                    tax += Decimal(r.get("lineItem/UnblendedCost", r.get("line_item_unblended_cost")))
    assert tax > 0
    assert plain(doc["summary"]["by_category"].get("tax")) == {"USD": tax.quantize(Decimal("0.01"))}
    assert "Tax" in (tmp_path / "audit" / "report.md").read_text()
    assert plain(doc["summary"]["by_team"]["(tax)"]) == {"USD": tax.quantize(Decimal("0.01"))}
    # nor is it spend that lacks a team (TAG003 over every line)
    policy = tmp_path / "all.yml"
    policy.write_text((DEMO / "policy.yml").read_text().replace("    scope: gpu\n", "    scope: all\n", 1))
    every = audit_case(tmp_path / "all", [DEMO / "billing"], policy, "--quarter", "2026-Q3")[0]
    [tag003] = [f for f in every["findings"] if f["rule"] == "TAG003"]
    assert tag003["evidence"]["scope"] == "all"
    assert Decimal(tag003["evidence"]["unattributed"]) == plain(doc["summary"]["by_team"]["(unattributed)"])["USD"]
    assert Decimal(tag003["evidence"]["total"]) == plain(doc["summary"]["billed_cost"])["USD"] - tax.quantize(
        Decimal("0.01"))
    # the budget table: vision's GPU-hours budget finding, and its bar at 109%
    vision = doc["summary"]["teams"]["vision"]
    assert vision["gpu_hours_budget"] == "30000" and vision["gpu_hours_share"] > 100


@pytest.mark.heavy
@pytest.mark.parametrize("name", SAMPLE_FILES, ids=lambda n: n.split("/")[0])
def test_public_samples_reconcile(name, samples, tmp_path):
    path = samples / name
    assert path.is_file(), f"public sample missing: {path}"
    reconcile(tmp_path, [path], DEMO / "policy.yml")


@pytest.mark.heavy
def test_benchmark_shape_reconciles(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import generate

    info = generate.generate(3000, tmp_path / "bench", formats=("cur-csv",))
    reconcile(tmp_path, [Path(f) for f in info["formats"]["cur-csv"]], Path(info["policy"]), "--inventory",
              info["inventory"])


# ---- another currency than the policy's -------------------------------------------------------------------------


def cad_bill(folder: Path) -> Path:
    """Two lines of the demo's FOCUS file billed in CAD: a tagged GPU VM, and an untagged disk of 12.60 CAD (the
    demo policy's tagging clause sets min_cost 10, in USD)."""
    src = (DEMO / "billing" / "focus-azure-2026-q3.csv").read_text().splitlines()
    reader = list(csv.DictReader(io.StringIO("\n".join(src[:2]))))
    vm = {**reader[0], "BillingCurrency": "CAD"}
    disk = {**vm, "BilledCost": "12.60", "EffectiveCost": "12.60", "ListCost": "12.60", "ContractedCost": "12.60",
            "ResourceId": vm["ResourceId"].replace("virtualmachines/nlp-a100-train-01", "disks/orphan-disk"),
            "ResourceName": "orphan-disk", "ServiceCategory": "Storage", "ServiceName": "Storage",
            "ResourceType": "Disk", "ConsumedUnit": "GB-Month", "PricingUnit": "GB-Month", "Tags": "{}"}
    path = folder / "focus-cad.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(vm))
        w.writeheader()
        w.writerows([vm, disk])
    return path


@pytest.fixture(scope="module")
def cad_without_rates(tmp_path_factory) -> tuple[dict, Path, str]:
    """The demo's billing and a bill in CAD, under the demo policy, which has no exchange rates."""
    tmp = tmp_path_factory.mktemp("cad")
    return audit_case(tmp, [DEMO / "billing", cad_bill(tmp)], DEMO / "policy.yml", "--quarter", "2026-Q3")


@pytest.mark.heavy
def test_other_currency_is_reported_apart_without_rates(cad_without_rates, tmp_path):
    doc, written, terminal = cad_without_rates
    out = Path(shutil.copytree(written, tmp_path / "audit"))
    check_every_view(doc, out, terminal, DEMO / "policy.yml")
    # TAG001's USD threshold is not compared with CAD as if it were dollars
    assert not [f for f in doc["findings"] if f["rule"] == "TAG001" and f["currency"] == "CAD"]
    said = [line for line in terminal.splitlines() if "CAD" in line and "focus-cad.csv" in line]
    assert said and "left out" in said[0], terminal
    md = (out / "report.md").read_text()
    assert re.search(r"focus-cad\.csv.*left out|left out.*focus-cad\.csv", md), "the report does not say so"
    assert "CAD" in doc["summary"]["billed_cost"] and "USD" in doc["summary"]["billed_cost"]
    # nlp's CAD spend is left out of its USD budget, and the report says so
    left = {t: v["left_out"] for t, v in doc["summary"]["teams"].items() if v["left_out"]}
    assert list(left) == ["nlp"] and set(left["nlp"]) == {"CAD"}
    [over] = [f for f in doc["findings"] if f["rule"] == "BUD001" and f["resource"] == "nlp"]
    assert over["evidence"]["left_out"] == left["nlp"]
    assert re.search(r"no rate for: nlp [0-9,.]+ CAD", md), "the budget table does not say what it left out"


@pytest.mark.heavy
def test_other_currency_is_converted_with_the_rates_given(cad_without_rates, tmp_path):
    bill = cad_bill(tmp_path)
    policy = tmp_path / "policy.yml"
    policy.write_text((DEMO / "policy.yml").read_text().replace(
        "currency: USD\n", "currency: USD\nrates:\n  date: 2026-09-30\n  source: Bank of Canada, 2026-09-30 close\n"
        "  per_unit: {CAD: 0.85}\n", 1))
    doc, out, terminal = audit_case(tmp_path, [DEMO / "billing", bill], policy, "--quarter", "2026-Q3")
    assert doc["policy"]["rates"] == {"date": "2026-09-30", "source": "Bank of Canada, 2026-09-30 close",
                                      "rates": {"CAD": "0.85"}}
    # 12.60 CAD is 10.71 USD: over the $10 threshold, so the untagged disk is a finding, in CAD
    [tag] = [f for f in doc["findings"] if f["rule"] == "TAG001" and f["resource"].endswith("orphan-disk")]
    assert tag["currency"] == "CAD" and tag["cost"] == "12.60"
    md = (out / "report.md").read_text()
    assert "1 CAD = 0.85 USD" in md and "Bank of Canada" in md
    assert "1 CAD = 0.85 USD" in terminal
    # nlp's CAD spend counts toward its USD budget at that rate
    without = cad_without_rates[0]
    cad = Decimal(without["summary"]["teams"]["nlp"]["left_out"]["CAD"])
    assert not doc["summary"]["teams"]["nlp"]["left_out"]
    assert (Decimal(doc["summary"]["teams"]["nlp"]["spent"]) - Decimal(without["summary"]["teams"]["nlp"]["spent"])
            == (cad * Decimal("0.85")).quantize(Decimal("0.01")))

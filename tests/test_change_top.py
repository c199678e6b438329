"""The top of every view says what changed since the last quarter when last quarter's audit is given
(`audit --previous`): spend, GPU spend and savings found, in the HTML and Markdown reports' summary, the
terminal's summary and the e-mails (a lead's: the team's spend). The expected figures are worked out here from
the two audits' totals (the change and its percent, rounded to one decimal), not read from the views' code."""

from __future__ import annotations

import email
import json
from decimal import Decimal
from email import policy as email_policy

import pytest
from click.testing import CliRunner
from conftest import REPO
from test_report_trend import last_quarter

from auditor.cli import cli
from auditor.model import fmt_money

DEMO_ARGS = ["--quarter", "2026-Q3", "--as-of", "2026-10-15"]


def words(previous: str, current: str) -> str:
    p, c = Decimal(previous), Decimal(current)
    d = c - p
    return f"{'up' if d > 0 else 'down'} {fmt_money(abs(d))} ({float(d / p * 100):+.1f}%)"


@pytest.fixture(scope="module")
def with_previous(demo_folder, tmp_path_factory):
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    prev = last_quarter(doc)
    root = tmp_path_factory.mktemp("change")
    (root / "q2.json").write_text(json.dumps(prev), encoding="utf-8")
    d = REPO / "fixtures" / "demo"
    out = root / "q3"
    r = CliRunner().invoke(cli, ["audit", "--policy", str(d / "policy.yml"), "--inventory", str(d / "inventory.json"),
                                 *DEMO_ARGS, "--previous", str(root / "q2.json"), "--out", str(out),
                                 str(d / "billing")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    mail = CliRunner().invoke(cli, ["email", "--policy", str(d / "policy.yml"), "--dry-run", str(out)])
    assert mail.exit_code == 0, mail.output
    return prev, json.loads((out / "audit.json").read_text(encoding="utf-8")), out, r.stdout


def sentence(prev: dict, doc: dict) -> str:
    p, s = prev["summary"], doc["summary"]
    return (f"Compared with 2026-Q2: spend {words(p['billed_cost']['USD'], s['billed_cost']['USD'])}, GPU compute "
            f"{words(p['gpu_cost']['USD'], s['gpu_cost']['USD'])}, savings found "
            f"{words(p['monthly_savings']['USD'], s['monthly_savings']['USD'])} a month.")


@pytest.mark.heavy
def test_the_change_is_worked_out_from_both_audits(with_previous):
    prev, doc, _, _ = with_previous
    assert prev["summary"]["billed_cost"] == {"USD": "251000.00"}  # test_report_trend's Q2
    assert sentence(prev, doc).startswith("Compared with 2026-Q2: spend up $90,964.32 (+36.2%), GPU compute up "
                                          "$84,085.45 (+38.1%), savings found up ")


@pytest.mark.heavy
def test_markdown_and_terminal_say_it_at_the_top(with_previous):
    prev, doc, out, stdout = with_previous
    md = (out / "report.md").read_text(encoding="utf-8")
    top = md.split("### Spend by provider")[0]
    assert sentence(prev, doc) in top
    lines = stdout.splitlines()
    assert lines[0].startswith("GPU spend audit 2026-Q3") and lines[1] == "  " + sentence(prev, doc)


def test_html_says_it_at_the_top(with_previous):
    prev, doc, out, _ = with_previous
    html = (out / "report.html").read_text(encoding="utf-8")
    top = html.split("Spend by provider")[0]
    p, s = prev["summary"], doc["summary"]
    for key, figure in (("spend", "billed_cost"), ("gpu", "gpu_cost"), ("savings", "monthly_savings")):
        assert f'data-change="{key}">{words(p[figure]["USD"], s[figure]["USD"])} on 2026-Q2</div>' in top, key
    assert sentence(prev, doc).removeprefix("Compared with 2026-Q2") in top.replace(" (its audit)", "")


@pytest.mark.heavy
def test_emails_say_it_at_the_top(with_previous):
    prev, doc, out, _ = with_previous
    teams = {t["lead"]: name for name, t in doc["summary"]["teams"].items()}
    for p in sorted((out / "outbox").glob("*.eml")):
        msg = email.message_from_bytes(p.read_bytes(), policy=email_policy.default)
        text, html = (msg.get_body((k,)).get_content() for k in ("plain", "html"))
        team = teams.get(msg["To"])
        if team is None:
            expected = sentence(prev, doc)
        else:
            team_words = words(prev["summary"]["by_team"][team]["USD"], doc["summary"]["by_team"][team]["USD"])
            expected = f"Compared with 2026-Q2: spend {team_words}."
        head = text.split("==")[0]
        assert expected in head, (p.name, head)
        assert f'data-change="top"><strong>{expected}</strong>' in html, p.name

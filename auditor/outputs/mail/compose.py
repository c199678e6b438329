"""Building the messages: the audit read back and fingerprinted, each letter's subject, text and HTML, and
the drafts of one audit (a message per recipient, keyed by the audit's fingerprint and the recipient).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email import policy as email_policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import jinja2

from auditor.audit_model import AuditDoc
from auditor.auditfile import read_audit
from auditor.errors import InputError
from auditor.figures import ORGANISATION
from auditor.model import fmt_money
from auditor.outputs import anomalies, charts
from auditor.outputs.change import change_sentence
from auditor.outputs.mail.outbox import PENDING, now, slug
from auditor.outputs.mail.route import Letter, Section, added, amounts, clean, mail_address, route
from auditor.outputs.report import inline_code
from auditor.outputs.templates import environment
from auditor.outputs.view import SHOWN_PER_RULE, UNATTRIBUTED, actions_view, shown_findings
from auditor.policy import Policy
from auditor.text import one_line, template_value

FINDING_KEYS = ("rule", "name", "severity", "resource", "message", "remediation", "currency", "waived")


def load_audit(path: Path) -> tuple[AuditDoc, Path]:
    """An audit folder or its audit.json, as written by `gpu-auditor audit`."""
    saved = read_audit(path)
    audit: Mapping[str, Any] = saved.doc
    file = saved.path
    # what routing and the message read
    needed = {"window": ("label", "start", "end"), "summary": ("by_team", "billed_cost")}
    missing = [f"{part}.{key}" for part, keys in needed.items() for key in keys
               if not isinstance(audit.get(part), dict) or key not in audit[part]]
    findings = audit.get("findings")
    if not isinstance(findings, list) or not all(isinstance(f, dict) for f in findings):
        missing.append("findings")
    else:
        missing += sorted({f"findings[].{k}" for f in findings for k in FINDING_KEYS if k not in f})
    if missing:
        raise InputError(f"audit.json lacks {', '.join(missing)}; rerun `gpu-auditor audit`", path=str(file))
    return saved.doc, file


def audit_fingerprint(audit: AuditDoc) -> str:
    """What identifies one audit: its window, policy, inputs (by content) and results; not when it was run or
    where its files lay, so rerunning the same audit gives the same fingerprint and sends nothing twice."""
    core = {k: v for k, v in audit.items() if k not in ("generated_at", "as_of", "tool", "inputs", "warnings")}
    core["policy"] = {k: v for k, v in audit.get("policy", {}).items() if k != "path"}
    core["inputs"] = sorted(b.get("sha256", "") for b in audit.get("inputs", {}).get("billing", []))
    core["findings"] = [{k: v for k, v in f.items() if k != "file"} for f in audit.get("findings", [])]
    canonical = json.dumps(core, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def message_key(fingerprint: str, recipient: str) -> str:
    return hashlib.sha256(f"{fingerprint}\n{recipient.lower()}".encode()).hexdigest()


def subject(audit: AuditDoc, letter: Letter) -> str:
    if letter.is_owner:
        who, spend = "all teams", amounts(audit["summary"]["billed_cost"])
        savings = amounts(audit["summary"].get("monthly_savings"))
    else:
        who = ", ".join(s.name for s in letter.sections)
        spend, savings = {}, {}
        for s in letter.sections:
            spend = added(spend, s.spend)
            savings = added(savings, s.savings)  # teams never share a finding, so their savings add up
    found = f"{fmt_money(savings)}/month savings found" if any(savings.values()) else "no savings found"
    nothing = {next(iter(audit["summary"]["billed_cost"]), "USD"): 0}
    return one_line(f"GPU audit {audit['window']['label']} · {who}: {fmt_money(spend or nothing)} spent, {found}")


def _by_rule(section: Section, clauses: dict[str, str], limit: int) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for f in section.findings:
        g = groups.setdefault(f["rule"], {"rule": f["rule"], "name": f["name"], "severity": f["severity"],
                                          "clause": clauses.get(f["rule"], ""), "findings": []})
        g["findings"].append(f)
    for g in groups.values():  # one remedy for the whole rule is said once, not once per resource
        fixes = {f["remediation"] for f in g["findings"]}
        g["fix"] = fixes.pop() if len(fixes) == 1 and len(g["findings"]) > 1 else None
        g["count"] = len(g["findings"])
        g["findings"], g["rest"] = shown_findings(g["findings"], limit)  # thousands: the costliest, the rest summed
    return list(groups.values())


@functools.cache
def _env(autoescape: bool) -> jinja2.Environment:
    env = environment("email-html" if autoescape else "email-text", autoescape=autoescape, trim_blocks=True,
                      lstrip_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                      finalize=template_value)
    env.filters["money"] = fmt_money
    env.filters["line"] = one_line
    # rule text written in Markdown (`CheckpointConfig.S3Uri`): <code> in HTML, the bare name in plain text
    env.filters["code"] = inline_code if autoescape else (lambda v: str(v).replace("`", ""))
    return env


def view(audit: AuditDoc, letter: Letter, owner: str) -> dict[str, Any]:
    """The names the email templates see."""
    start = datetime.fromisoformat(audit["window"]["start"].rstrip("Z"))
    end = datetime.fromisoformat(audit["window"]["end"].rstrip("Z"))
    last = (end - timedelta(microseconds=1)).date()
    clauses = {c["rule"]: c.get("text", "") for c in audit.get("clauses", [])}
    p = audit.get("policy", {})
    currency = next(iter(audit["summary"]["billed_cost"]), "USD")
    return {
        "label": one_line(audit["window"]["label"]), "period": f"{start.date()} to {last}",
        "policy": clean({"name": p.get("name", ""), "version": p.get("version", ""), "owner": owner}),
        "partial": bool(audit.get("partial")), "summary": audit["summary"], "letter": letter,
        "currency": currency,
        "section_groups": lambda s, limit=SHOWN_PER_RULE: _by_rule(s, clauses, limit),
        "total_savings": amounts(audit["summary"].get("monthly_savings")),
        # a section's actions (one per resource; their savings add up to its savings found), or all of them
        "actions": lambda s=None: actions_view(audit["summary"], None if s is None else s.team
                                               or (UNATTRIBUTED, ORGANISATION)),
        "weekly": lambda team=None: charts.weekly(audit["summary"], p.get("currency") or currency, team),
        "band_keys": charts.band_keys(),
        # the spend anomalies: a few series, a few days each (the rest in the attached report)
        "anomalies": lambda limit=MAIL_CHARTS, days=MAIL_DAYS: anomalies.charts(audit["findings"], limit, days),
        "anomaly_series": anomalies.series(audit["findings"]),
        "weekly_cut": False,  # True: the weekly charts left out of the body (compose, `Fit`)
        # since last quarter (--previous): the whole audit's for the owner, the team's spend for its one lead
        "change": change_sentence(clean(audit)) if letter.is_owner else
        change_sentence(clean(audit), letter.sections[0].name) if len(letter.sections) == 1 else None,
    }


BODY_LIMIT = 100_000  # bytes: mail clients clip a message's body past about 100 kB (Gmail at 102 kB)
MAIL_CHARTS = 3  # spend-anomaly series charted in a message's body (the report has anomalies.CHARTS)
MAIL_DAYS = 3  # days out of line listed per series charted in a body (the report lists them all)


@dataclass(frozen=True)
class Fit:
    """How much of an audit a message's body shows: findings listed per rule, spend-anomaly series charted and
    days listed per series, and the weekly charts or not. What is left out is in the attachments."""

    per_rule: int
    charts: int = MAIL_CHARTS
    days: int = MAIL_DAYS
    weekly: bool = True


# tried in turn until the body fits under BODY_LIMIT: the charts (pictures of what the findings and the attached
# report say) go first, then findings; the weekly charts last
FITS = (Fit(SHOWN_PER_RULE), Fit(SHOWN_PER_RULE, 1), Fit(SHOWN_PER_RULE, 0, 0),
        *(Fit(n, 0, 0) for n in (20, 10, 5, 2, 1)), Fit(1, 0, 0, weekly=False))


def attachments(audit: AuditDoc, letter: Letter) -> list[tuple[str, str, str]]:
    """(file name, text, subtype) of what a message carries whole beside its short body: the full report and every
    finding as CSV, the owner's of the whole audit, a lead's of each of their teams. Nothing in the message points
    to a file the reader cannot open (the audit folder is on the auditor's machine)."""
    from auditor.outputs.report import render_csv, render_html

    doc = clean(audit)  # a tag's CR or LF: not even in an attachment
    base = "gpu-audit-" + slug(audit["window"]["label"], 20)
    out = []
    for team in [None] if letter.is_owner else [s.name for s in letter.sections]:
        name = base + (f"-{slug(team, 40)}" if team is not None else "")
        out += [(f"{name}.html", render_html(doc, team=team), "html"),
                (f"{name}-findings.csv", render_csv(doc, team=team), "csv")]
    return out


def html_part(audit: AuditDoc, letter: Letter, names: dict[str, Any]) -> str:
    """The HTML of a message's body from `view`'s names (and the attachments' names, where not given)."""
    names = {"attachments": [name for name, _, _ in attachments(audit, letter)], **names}
    return _env(autoescape=True).get_template("email.html.j2").render(**names)


def fitted(names: dict[str, Any], fit: Fit) -> dict[str, Any]:
    """`view`'s names cut to what `fit` shows."""
    shown = {**names, "section_groups": functools.partial(names["section_groups"], limit=fit.per_rule),
             "anomalies": functools.partial(names["anomalies"], fit.charts, fit.days)}
    if not fit.weekly:
        weekly, letter = names["weekly"], names["letter"]
        drawn = [] if not letter.is_owner and len(letter.sections) != 1 else \
            [weekly() if letter.is_owner else weekly(letter.sections[0].name)]
        shown |= {"weekly": lambda team=None: None,
                  "weekly_cut": any(w and (w.get("has_spend") or w.get("has_bands")) for w in drawn)}
    return shown


def body(text: str, html: str) -> EmailMessage:
    """A message's body as sent: multipart/alternative, the plain text first (it reads well alone), then the HTML."""
    part = EmailMessage(policy=email_policy.SMTP)
    part.set_content(text, subtype="plain", charset="utf-8")
    part.add_alternative(html, subtype="html", charset="utf-8")
    return part


def compose(audit: AuditDoc, letter: Letter, sender: str, owner: str, key: str) -> EmailMessage:
    """The message: multipart/mixed, its body multipart/alternative (plain text first, it reads well alone, then
    the HTML; the two as sent, headers and transfer encoding included, under BODY_LIMIT), then the attachments
    (`attachments`). Headers are set through the standard library's email API from single-line values, so no
    header can be injected. Replies go to the policy owner."""
    files = attachments(audit, letter)
    names = {**view(audit, letter, owner), "attachments": [name for name, _, _ in files]}
    # The body shows less (`FITS`: fewer charts, then each rule's costliest findings, fewer of them) until the body
    # as sent is under BODY_LIMIT (many teams and rules at scale); every finding is in the attached CSV, every
    # chart in the attached report.
    for fit in FITS:
        shown = fitted(names, fit)
        text = _env(autoescape=False).get_template("email.txt.j2").render(**shown)
        html = _env(autoescape=True).get_template("email.html.j2").render(**shown)
        if len(body(text, html).as_bytes()) < BODY_LIMIT:
            break
    msg = EmailMessage(policy=email_policy.SMTP)
    msg["Subject"] = subject(audit, letter)
    msg["From"] = Address(display_name="GPU auditor", addr_spec=sender)
    msg["To"] = Address(addr_spec=letter.recipient)
    if owner.lower() != sender.lower():
        msg["Reply-To"] = Address(addr_spec=owner)
    msg["Date"] = format_datetime(datetime.now(UTC))
    msg["Message-ID"] = f"<gpu-audit.{key[:32]}@{Address(addr_spec=sender).domain}>"
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: out-of-office robots do not answer it
    msg["X-GPU-Auditor-Key"] = key
    msg.set_content(text, subtype="plain", charset="utf-8")
    msg.add_alternative(html, subtype="html", charset="utf-8")
    for name, content, subtype in files:  # the message becomes multipart/mixed: its body, then the files
        msg.add_attachment(content, subtype=subtype, charset="utf-8", filename=name)
    return msg


@dataclass
class Draft:
    """A composed message, not yet in the outbox."""

    msg: EmailMessage
    state: dict[str, Any]
    label: str  # the readable part of its file name


def compose_all(audit: AuditDoc, policy: Policy, sender: str | None = None,
                status: str = PENDING) -> list[Draft]:
    """Route the audit and compose one message per recipient. Every input error is raised here, before the
    outbox is touched."""
    owner = mail_address(policy.owner, "the policy owner")
    sender = mail_address(sender, "--from") if sender else owner
    fingerprint = audit_fingerprint(audit)
    drafts = []
    for letter in route(audit, policy):
        key = message_key(fingerprint, letter.recipient)
        msg = compose(audit, letter, sender, owner, key)
        label = "summary" if letter.is_owner else "team-" + "-".join(slug(s.name, 20) for s in letter.sections)
        state = {"version": 1, "key": key, "audit": fingerprint, "window": audit["window"]["label"],
                 "recipient": letter.recipient, "sender": sender, "subject": str(msg["Subject"]),
                 "teams": [s.name for s in letter.sections], "message_id": str(msg["Message-ID"]),
                 "status": status, "queued_at": now(), "last_error": None}
        drafts.append(Draft(msg, state, label))
    return drafts

"""Email the audit: one message per recipient (each team lead about their team, the policy owner a summary
of every team plus all that no team owns), queued in an outbox folder and delivered over SMTP.

The outbox is the ledger. Each message is an `.eml` file with a JSON state file beside it; a message's key is
a hash of the audit's fingerprint and the recipient, so the same audit never reaches one inbox twice: a key
whose state says `sent` is never sent again, and whatever is not sent stays for `--resend`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import smtplib
import ssl
import tempfile
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email import policy as email_policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import jinja2

from auditor.auditfile import read_audit
from auditor.errors import InputError
from auditor.model import fmt_money
from auditor.policy import Policy

UNATTRIBUTED = "(unattributed)"  # the key audit.json's summary.by_team uses for spend with no team
ENV = "GPU_AUDITOR_SMTP_"
SECURITY = ("none", "starttls", "ssl")
DEFAULT_PORTS = {"none": 25, "starttls": 587, "ssl": 465}
SENT, PENDING, DRAFT, FAILED = "sent", "pending", "draft", "failed"
FINDING_KEYS = ("rule", "name", "severity", "resource", "message", "remediation", "currency", "waived")


# ---- text that goes into headers and file names ----------------------------------------------------------


def one_line(value: Any) -> str:
    """Tag values and team names, made single-line: no CR, LF or other control character survives, so a
    value cannot start a new header or fake a line of the plain-text part."""
    text = "" if value is None else str(value)
    text = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text)
    return " ".join(text.split())


def slug(value: str, limit: int = 40) -> str:
    """A file-name part that cannot leave its folder: letters, digits, `_` and `-` only (no dots, no
    slashes), never empty."""
    text = unicodedata.normalize("NFKD", str(value)).encode("ascii", "ignore").decode()
    text = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")[:limit].strip("-_")
    return text or "x"


def mail_address(value: Any, what: str) -> str:
    """An address from the policy, checked: one addr-spec, nothing else."""
    text = "" if value is None else str(value).strip()
    try:
        addr = Address(addr_spec=text)
    except (ValueError, IndexError) as e:
        raise InputError(f"{what} {one_line(text)!r} is not an email address ({e})") from None
    if not addr.username or not addr.domain or addr.addr_spec != text:
        raise InputError(f"{what} {one_line(text)!r} is not an email address")
    return text


# ---- the audit ---------------------------------------------------------------------------------------------


def load_audit(path: Path) -> tuple[dict[str, Any], Path]:
    """An audit folder or its audit.json, as written by `gpu-auditor audit`."""
    saved = read_audit(path)
    audit, file = saved.doc, saved.path
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
    return audit, file


def audit_fingerprint(audit: dict[str, Any]) -> str:
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


# ---- routing -----------------------------------------------------------------------------------------------


def _amounts(value: Mapping[str, Any] | None) -> dict[str, Decimal]:
    return {c: Decimal(str(v)) for c, v in (value or {}).items()}


def _add(a: dict[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(a)
    for c, v in b.items():
        out[c] = out.get(c, Decimal(0)) + v
    return out


def savings_of(findings: list[dict[str, Any]]) -> dict[str, Decimal]:
    """Monthly savings per currency, as the audit counts them: per resource the largest (alternatives for one
    machine are not added)."""
    best: dict[tuple[str, str], Decimal] = {}
    for f in findings:
        if f.get("monthly_savings") is not None:
            key, amount = (f["resource"], f["currency"]), Decimal(f["monthly_savings"])
            best[key] = max(best.get(key, amount), amount)
    out: dict[str, Decimal] = {}
    for (_, currency), amount in best.items():
        out[currency] = out.get(currency, Decimal(0)) + amount
    return out


def clean(value: Any) -> Any:
    """Every string (keys too) made single-line (see one_line), for display."""
    if isinstance(value, str):
        return one_line(value)
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


@dataclass
class Section:
    """One team's part of a message; `team` None is the spend and findings with no team at all. Its findings
    are display copies (single-line strings); routing and sums use the raw values."""

    team: str | None
    lead: str | None
    in_policy: bool
    spend: dict[str, Decimal]
    savings: dict[str, Decimal]
    findings: list[dict[str, Any]]  # open (not waived)
    waived: list[dict[str, Any]]
    budget: Decimal | None = None

    @property
    def name(self) -> str:
        return one_line(self.team) if self.team is not None else "no team"

    def share(self, currency: str) -> float | None:
        if not self.budget:
            return None
        return round(float(self.spend.get(currency, Decimal(0)) / self.budget) * 100, 1)


@dataclass
class Letter:
    """One message: to a team lead about their team(s), or to the policy owner with the whole picture."""

    recipient: str
    sections: list[Section]  # the recipient's own teams
    is_owner: bool = False
    overview: list[Section] = field(default_factory=list)  # for the owner: every team, and no team
    unowned: list[Section] = field(default_factory=list)  # for the owner: what no lead in the policy owns


def route(audit: dict[str, Any], policy: Policy) -> list[Letter]:
    """Who gets what. Every finding and every dollar of spend lands in at least one message: its team's lead
    when the policy names the team, otherwise the policy owner."""
    by_team = audit["summary"]["by_team"]
    findings = audit["findings"]
    owner = mail_address(policy.owner, "the policy owner")

    def section(team: str | None, lead: str | None, in_policy: bool, budget=None) -> Section:
        mine = [f for f in findings if f.get("team") == team]
        active = [f for f in mine if not f["waived"]]
        spend = _amounts(by_team.get(UNATTRIBUTED if team is None else team))
        return Section(team, lead, in_policy, spend, savings_of(active), clean(active),
                       clean([f for f in mine if f["waived"]]), budget)

    teams = [section(name, mail_address(t.lead, f"the lead of team {one_line(name)!r}"), True,
                     t.budget_per_quarter) for name, t in policy.teams.items()]
    others = sorted(({f.get("team") for f in findings if f.get("team") is not None} |
                     {k for k in by_team if k != UNATTRIBUTED}) - set(policy.teams))
    unowned = [section(None, None, False)] + [section(name, None, False) for name in sorted(others)]
    unowned = [s for s in unowned if s.spend or s.findings or s.waived]

    letters: dict[str, Letter] = {}
    for s in teams:
        letters.setdefault(s.lead.lower(), Letter(s.lead, [])).sections.append(s)
    mine = letters.pop(owner.lower(), Letter(owner, []))
    mine.is_owner, mine.overview, mine.unowned = True, teams + unowned, unowned
    return list(letters.values()) + [mine]


# ---- the message ---------------------------------------------------------------------------------------------


def subject(audit: dict[str, Any], letter: Letter) -> str:
    if letter.is_owner:
        who, spend = "all teams", _amounts(audit["summary"]["billed_cost"])
        savings = _amounts(audit["summary"].get("monthly_savings"))
    else:
        who = ", ".join(s.name for s in letter.sections)
        spend, savings = {}, {}
        for s in letter.sections:
            spend = _add(spend, s.spend)
            savings = _add(savings, s.savings)  # teams never share a finding, so their savings add up
    found = f"{fmt_money(savings)}/month savings found" if any(savings.values()) else "no savings found"
    nothing = {next(iter(audit["summary"]["billed_cost"]), "USD"): 0}
    return one_line(f"GPU audit {audit['window']['label']} · {who}: {fmt_money(spend or nothing)} spent, {found}")


def _by_rule(section: Section, clauses: dict[str, str]) -> list[dict[str, Any]]:
    from auditor.outputs.report import shown_findings

    groups: dict[str, dict[str, Any]] = {}
    for f in section.findings:
        g = groups.setdefault(f["rule"], {"rule": f["rule"], "name": f["name"], "severity": f["severity"],
                                          "clause": clauses.get(f["rule"], ""), "findings": []})
        g["findings"].append(f)
    for g in groups.values():  # one remedy for the whole rule is said once, not once per resource
        fixes = {f["remediation"] for f in g["findings"]}
        g["fix"] = fixes.pop() if len(fixes) == 1 and len(g["findings"]) > 1 else None
        g["count"] = len(g["findings"])
        g["findings"], g["rest"] = shown_findings(g["findings"])  # thousands: the costliest, the rest summed
    return list(groups.values())


@functools.cache
def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("auditor.reports", "."), autoescape=autoescape,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    env.filters["money"] = fmt_money
    env.filters["line"] = one_line
    return env


def view(audit: dict[str, Any], letter: Letter, owner: str) -> dict[str, Any]:
    """The names the email templates see."""
    start = datetime.fromisoformat(audit["window"]["start"].rstrip("Z"))
    end = datetime.fromisoformat(audit["window"]["end"].rstrip("Z"))
    last = (end - timedelta(microseconds=1)).date()
    clauses = {c["rule"]: c.get("text", "") for c in audit.get("clauses", [])}
    p = audit.get("policy", {})
    return {
        "label": one_line(audit["window"]["label"]), "period": f"{start.date()} to {last}",
        "policy": clean({"name": p.get("name", ""), "version": p.get("version", ""), "owner": owner}),
        "partial": bool(audit.get("partial")), "summary": audit["summary"], "letter": letter,
        "currency": next(iter(audit["summary"]["billed_cost"]), "USD"),
        "section_groups": lambda s: _by_rule(s, clauses),
        "total_savings": _amounts(audit["summary"].get("monthly_savings")),
    }


def html_part(audit: dict[str, Any], letter: Letter, names: dict[str, Any]) -> str:
    """The lead of one team gets that team's own report, from the report renderer (the HTML of report.html cut
    to the team). The owner's summary, and a lead of several teams, get email.html.j2: the whole report of
    every team would be too long for a mailbox (mail clients clip messages past about 100 kB)."""
    if not letter.is_owner and len(letter.sections) == 1:
        from auditor.outputs.report import render_html

        return render_html(clean(audit), team=letter.sections[0].name)  # a tag's CR or LF: not even in the body
    return _env(autoescape=True).get_template("email.html.j2").render(**names)


def compose(audit: dict[str, Any], letter: Letter, sender: str, owner: str, key: str) -> EmailMessage:
    """The message: multipart/alternative, plain text first (it reads well alone), then the HTML. Headers are
    set through the standard library's email API from single-line values, so no header can be injected.
    Replies go to the policy owner."""
    names = view(audit, letter, owner)
    text = _env(autoescape=False).get_template("email.txt.j2").render(**names)
    html = html_part(audit, letter, names)
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
    return msg


# ---- the outbox ----------------------------------------------------------------------------------------------


@dataclass
class Entry:
    """One message in the outbox: `<stem>.eml` and its state `<stem>.json`."""

    folder: Path
    stem: str
    state: dict[str, Any]

    @property
    def eml(self) -> Path:
        return self.folder / f"{self.stem}.eml"

    @property
    def state_file(self) -> Path:
        return self.folder / f"{self.stem}.json"

    @property
    def sent(self) -> bool:
        return self.state.get("status") == SENT

    def save(self) -> None:
        _write_atomic(self.state_file, (json.dumps(self.state, indent=2, ensure_ascii=False) + "\n").encode())


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Outbox:
    """A folder of messages and their states. Held with an exclusive lock while in use, so two runs cannot
    send the same message at once."""

    def __init__(self, folder: Path, create: bool = True):
        self.folder = folder
        if not create and not folder.is_dir():
            raise InputError("no outbox here", path=str(folder))
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create the outbox: {e.strerror}", path=str(folder)) from None
        self._lock = None

    def __enter__(self) -> Outbox:
        import fcntl

        try:
            self._lock = open(self.folder / ".lock", "w")  # held until __exit__
        except OSError as e:
            raise InputError(f"cannot use the outbox: {e.strerror}", path=str(self.folder)) from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise InputError("another gpu-auditor email is using this outbox", path=str(self.folder)) from None
        return self

    def __exit__(self, *exc) -> None:
        if self._lock:
            self._lock.close()

    def entries(self) -> list[Entry]:
        out = []
        for file in sorted(self.folder.glob("*.json")):
            try:
                state = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise InputError(f"cannot read this outbox state file: {e}", path=str(file)) from None
            if isinstance(state, dict) and "key" in state and (file.with_suffix(".eml")).is_file():
                out.append(Entry(self.folder, file.stem, state))
        return out

    def put(self, msg: EmailMessage, state: dict[str, Any], label: str) -> Entry:
        """Queue a message, unless its key was already sent (then the sent entry comes back unchanged)."""
        known = {e.state["key"]: e for e in self.entries()}
        entry = known.get(state["key"])
        if entry is None:
            entry = Entry(self.folder, f"{slug(label)}-{state['key'][:12]}", {})
            if entry.eml.resolve().parent != self.folder.resolve():  # belt and braces; slug() allows no path
                raise InputError(f"message file name {entry.stem!r} leaves the outbox", path=str(self.folder))
        elif entry.sent:
            return entry
        entry.state = {**state, "attempts": entry.state.get("attempts", 0), "errors": entry.state.get("errors", []),
                       "eml": entry.eml.name}
        _write_atomic(entry.eml, msg.as_bytes(policy=email_policy.SMTP))
        entry.save()
        return entry


# ---- SMTP ------------------------------------------------------------------------------------------------


@dataclass
class SmtpSettings:
    host: str
    port: int
    security: str = "none"  # none, starttls, ssl
    user: str | None = None
    password: str | None = field(default=None, repr=False)  # never printed, never written
    cafile: str | None = None
    timeout: float = 30.0

    def ssl_context(self) -> ssl.SSLContext:
        try:
            return ssl.create_default_context(cafile=self.cafile)
        except (OSError, ssl.SSLError) as e:
            raise InputError(f"cannot load the CA file: {e}", path=self.cafile) from None


def smtp_settings(host: str | None = None, port: int | None = None, user: str | None = None,
                  security: str | None = None, password_file: Path | None = None, cafile: str | None = None,
                  env: Mapping[str, str] | None = None) -> SmtpSettings:
    """Options first, then the environment (GPU_AUDITOR_SMTP_HOST, _PORT, _USER, _SECURITY, _CAFILE,
    _PASSWORD or _PASSWORD_FILE). The password never comes from an option, so it stays out of shell history."""
    env = os.environ if env is None else env
    host = host or env.get(ENV + "HOST")
    if not host:
        raise InputError("no SMTP server: give --smtp-host or set GPU_AUDITOR_SMTP_HOST (or use --dry-run)")
    security = (security or env.get(ENV + "SECURITY") or "").strip().lower() or None
    if security is not None and security not in SECURITY:
        raise InputError(f"GPU_AUDITOR_SMTP_SECURITY {security!r}: use one of {', '.join(SECURITY)}")
    raw_port = port if port is not None else env.get(ENV + "PORT")
    try:
        port = int(raw_port) if raw_port not in (None, "") else None
    except ValueError:
        raise InputError(f"GPU_AUDITOR_SMTP_PORT {raw_port!r} is not a port number") from None
    if security is None:
        security = "ssl" if port == 465 else "none"
    user = user or env.get(ENV + "USER") or None
    password = env.get(ENV + "PASSWORD") or None
    password_file = password_file or env.get(ENV + "PASSWORD_FILE") or None
    if password_file:
        try:
            password = Path(password_file).read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read the SMTP password file: {getattr(e, 'strerror', e)}",
                             path=str(password_file)) from None
    if user and password is None:
        raise InputError("--smtp-user needs a password: set GPU_AUDITOR_SMTP_PASSWORD or give "
                         "--smtp-password-file")
    if user and security == "none":
        raise InputError("--smtp-user needs --starttls or --ssl: the password would cross the network in clear")
    settings = SmtpSettings(host, port or DEFAULT_PORTS[security], security, user, password,
                            cafile or env.get(ENV + "CAFILE") or None)
    if security != "none":
        settings.ssl_context()  # a bad CA file is an input error now, not a failed send later
    return settings


class Fatal(Exception):
    """A failure that no retry and no other message can get past (authentication, TLS, a server that
    refuses us at the greeting): stop and keep everything left in the outbox."""


class SmtpConnection:
    """One SMTP session, opened when first needed and reopened after any failure."""

    def __init__(self, settings: SmtpSettings):
        self.settings = settings
        self.smtp: smtplib.SMTP | None = None
        self.opening = False  # the last failure came before a session stood (connect, TLS, login)

    def _open(self) -> smtplib.SMTP:
        s = self.settings
        if s.security == "ssl":
            smtp = smtplib.SMTP_SSL(s.host, s.port, timeout=s.timeout, context=s.ssl_context())
        else:
            smtp = smtplib.SMTP(s.host, s.port, timeout=s.timeout)
        try:
            smtp.ehlo()
            if s.security == "starttls":
                if not smtp.has_extn("starttls"):
                    raise Fatal(f"{s.host}:{s.port} does not offer STARTTLS")
                smtp.starttls(context=s.ssl_context())
                smtp.ehlo()
            if s.user:
                smtp.login(s.user, s.password or "")
        except BaseException:
            with contextlib.suppress(Exception):
                smtp.close()
            raise
        return smtp

    def send(self, sender: str, recipient: str, data: bytes) -> None:
        try:
            if self.smtp is None:
                self.opening = True
                self.smtp = self._open()
            self.opening = False
            self.smtp.sendmail(sender, [recipient], data)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.smtp is not None:
            with contextlib.suppress(Exception):
                self.smtp.quit()
            with contextlib.suppress(Exception):
                self.smtp.close()
            self.smtp = None


def classify(error: BaseException) -> tuple[str, str]:
    """(kind, reason) of a failed send: `transient` (4xx, a dropped or refused connection: retry),
    `permanent` (5xx for this message: keep it, go on with the others) or `fatal` (stop)."""
    if isinstance(error, Fatal):
        return "fatal", str(error)
    if isinstance(error, smtplib.SMTPAuthenticationError):
        return "fatal", f"authentication failed: {error.smtp_code} {_text(error.smtp_error)}"
    if isinstance(error, smtplib.SMTPNotSupportedError):
        return "fatal", f"the server does not support this: {error}"
    if isinstance(error, ssl.SSLCertVerificationError):
        return "fatal", f"TLS certificate not trusted: {error.verify_message or error}"
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(error.recipients.values()))
        return ("transient" if 400 <= code < 500 else "permanent"), f"recipient refused: {code} {_text(text)}"
    if isinstance(error, smtplib.SMTPResponseException):
        code = error.smtp_code
        kind = "transient" if 400 <= code < 500 or code == -1 else "permanent"
        if isinstance(error, smtplib.SMTPConnectError | smtplib.SMTPHeloError) and kind == "permanent":
            kind = "fatal"
        return kind, f"{code} {_text(error.smtp_error)}"
    if isinstance(error, smtplib.SMTPServerDisconnected):
        return "transient", f"the server closed the connection ({error or 'no reason given'})"
    if isinstance(error, OSError):  # refused, reset, timed out
        return "transient", f"connection failed: {error.strerror or error}"
    if isinstance(error, smtplib.SMTPException):
        return "transient", str(error)
    raise error


def _text(value: Any) -> str:
    return one_line(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)


@dataclass
class Retry:
    """Bounded exponential backoff: `attempts` tries in all, waiting delay, 2*delay, 4*delay... (at most cap)
    in between. `sleep` is injectable so tests do not wait."""

    attempts: int = 4
    delay: float = 2.0
    cap: float = 60.0
    sleep: Callable[[float], None] = time.sleep

    def wait(self, attempt: int) -> float:
        return min(self.cap, self.delay * 2 ** (attempt - 1))


@dataclass
class Outcome:
    entry: Entry
    status: str  # sent, failed, skipped (not attempted after a fatal error)
    reason: str | None = None


def deliver(outbox: Outbox, entries: list[Entry], settings: SmtpSettings, retry: Retry | None = None,
            progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Send each unsent entry, retrying transient failures; record every attempt in the entry's state."""
    retry = retry or Retry()
    conn = SmtpConnection(settings)
    outcomes: list[Outcome] = []
    fatal: str | None = None
    try:
        for entry in entries:
            if entry.sent:
                continue
            if fatal:
                outcomes.append(_note(entry, "skipped", f"not attempted: {fatal}", progress))
                continue
            data = entry.eml.read_bytes()
            for attempt in range(1, retry.attempts + 1):
                entry.state["attempts"] = entry.state.get("attempts", 0) + 1
                try:
                    conn.send(entry.state["sender"], entry.state["recipient"], data)
                except Exception as e:  # noqa: BLE001 - classify() re-raises what is not a delivery failure
                    kind, reason = classify(e)
                    entry.state["errors"] = (entry.state.get("errors", []) + [
                        {"at": _now(), "kind": kind, "reason": reason}])[-10:]
                    if kind == "transient" and attempt < retry.attempts:
                        entry.save()
                        retry.sleep(retry.wait(attempt))
                        continue
                    if kind == "fatal" or conn.opening:  # no session to be had: spare the other messages
                        fatal = reason
                    outcomes.append(_note(entry, FAILED, reason, progress))
                    break
                else:
                    entry.state["sent_at"] = _now()
                    outcomes.append(_note(entry, SENT, None, progress))
                    break
    finally:
        conn.close()
    return outcomes


def _note(entry: Entry, status: str, reason: str | None, progress) -> Outcome:
    entry.state["status"] = SENT if status == SENT else FAILED if status == FAILED else entry.state["status"]
    entry.state["last_error"] = reason
    entry.save()
    outcome = Outcome(entry, status, reason)
    if progress:
        progress(outcome)
    return outcome


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---- the whole job ------------------------------------------------------------------------------------------


@dataclass
class Draft:
    """A composed message, not yet in the outbox."""

    msg: EmailMessage
    state: dict[str, Any]
    label: str  # the readable part of its file name


def compose_all(audit: dict[str, Any], policy: Policy, sender: str | None = None,
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
                 "status": status, "queued_at": _now(), "last_error": None}
        drafts.append(Draft(msg, state, label))
    return drafts


def left(outbox: Outbox) -> list[Entry]:
    return [e for e in outbox.entries() if not e.sent]


@dataclass
class Run:
    """What one `gpu-auditor email` did: every message of the audit (or of the outbox), what each send
    attempt ended in, and warnings."""

    outbox: Path
    entries: list[Entry]
    outcomes: list[Outcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def left(self) -> list[Entry]:
        return [e for e in self.entries if not e.sent]


def send_audit(audit_path: Path, policy: Policy, outbox: Path, settings: SmtpSettings | None,
               sender: str | None = None, retry: Retry | None = None,
               progress: Callable[[Outcome], None] | None = None,
               env: Mapping[str, str] | None = None) -> Run:
    """Queue the audit's messages in the outbox and, unless `settings` is None (a dry run), send them."""
    env = os.environ if env is None else env
    audit, _ = load_audit(audit_path)
    warnings = []
    if audit.get("policy", {}).get("name") != policy.name:
        warnings.append(f"the audit was run under policy {one_line(audit.get('policy', {}).get('name'))!r}, "
                        f"not {one_line(policy.name)!r}; teams and leads come from {policy.path or 'the policy'}")
    drafts = compose_all(audit, policy, sender or env.get(ENV + "FROM"), DRAFT if settings is None else PENDING)
    with Outbox(outbox) as box:
        entries = [box.put(d.msg, d.state, d.label) for d in drafts]  # an already sent one stays as it was
        outcomes = [] if settings is None else deliver(box, entries, settings, retry, progress)
    return Run(outbox, entries, outcomes, warnings)


def resend(outbox: Path, settings: SmtpSettings, retry: Retry | None = None,
           progress: Callable[[Outcome], None] | None = None) -> Run:
    """Send whatever the outbox holds that was not sent yet (failed, pending, or drafts of a dry run)."""
    with Outbox(outbox, create=False) as box:
        entries = left(box)
        return Run(outbox, entries, deliver(box, entries, settings, retry, progress))

"""SMTP: settings from the options and the environment, one connection reopened after failures, delivery of
the outbox's unsent entries with bounded retries, each attempt recorded in the entry's state.
"""

from __future__ import annotations

import contextlib
import os
import smtplib
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.errors import InputError
from auditor.outputs.mail.outbox import FAILED, SENT, Entry, Outbox, now
from auditor.retry import Retry
from auditor.text import one_line

ENV = "GPU_AUDITOR_SMTP_"
SECURITY = ("none", "starttls", "ssl")
DEFAULT_PORTS = {"none": 25, "starttls": 587, "ssl": 465}


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
    env_file = env.get(ENV + "PASSWORD_FILE")
    password_file = password_file or (Path(env_file) if env_file else None)
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
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(s.host, s.port, timeout=s.timeout, context=s.ssl_context())
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
class Outcome:
    entry: Entry
    status: str  # sent, failed, skipped (not attempted after a fatal error)
    reason: str | None = None


def deliver(outbox: Outbox, entries: list[Entry], settings: SmtpSettings, retry: Retry | None = None,
            progress: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Send each unsent entry, retrying transient failures; record every attempt in the entry's state."""
    retry = retry or Retry.exponential(attempts=4, delay=2.0)  # a busy server: 4 tries, 2, 4 and 8 s apart
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
                        {"at": now(), "kind": kind, "reason": reason}])[-10:]
                    if kind == "transient" and attempt < retry.attempts:
                        entry.save()
                        retry.sleep(retry.wait(attempt))
                        continue
                    if kind == "fatal" or conn.opening:  # no session to be had: spare the other messages
                        fatal = reason
                    outcomes.append(_note(entry, FAILED, reason, progress))
                    break
                else:
                    entry.state["sent_at"] = now()
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

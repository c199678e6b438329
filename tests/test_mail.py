"""Emailing the audit, against a real SMTP server (aiosmtpd) on loopback: plain, STARTTLS with a self-signed
certificate, implicit TLS, AUTH, and servers that refuse or drop the connection. Expected numbers come from the
demo audit's own audit.json."""

from __future__ import annotations

import datetime as dt
import email
import ipaddress
import json
import re
import shutil
import ssl
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from email import policy as email_policy
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from click.testing import CliRunner

from auditor.cli import cli
from auditor.errors import InputError
from auditor.outputs import mail
from auditor.outputs.report import render_csv, render_html
from auditor.policy import load_policy, parse_policy

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
USER, PASSWORD = "auditor", "s3cret-Pa55word-9f2c"
NO_SMTP_ENV = {k: None for k in ("HOST", "PORT", "USER", "PASSWORD", "PASSWORD_FILE", "SECURITY", "CAFILE",
                                 "FROM")}
NO_SMTP_ENV = {mail.ENV + k: v for k, v in NO_SMTP_ENV.items()}


def run(*args, env: dict | None = None):
    """The CLI in-process, with no SMTP settings leaking in from the environment of the test run."""
    return CliRunner().invoke(cli, [str(a) for a in args], env={**NO_SMTP_ENV, **(env or {})},
                              catch_exceptions=False)


# ---- the demo audit, and a private copy of it per test ----------------------------------------------------


@pytest.fixture(scope="module")
def demo_audit(demo_folder) -> Path:
    """The demo's audit.json (2026-Q3 as of 2026-10-15), run once for the session (conftest.demo_folder)."""
    return demo_folder / "audit.json"


@pytest.fixture()
def audit_dir(demo_audit, tmp_path) -> Path:
    folder = tmp_path / "audit"
    folder.mkdir()
    shutil.copy(demo_audit, folder / "audit.json")
    return folder


def audit_of(folder: Path) -> dict:
    return json.loads((folder / "audit.json").read_text())


def usd(text: str | Decimal) -> str:
    return f"${Decimal(text):,.2f}"


def expected_subjects(audit: dict) -> dict[str, str]:
    """Recipient -> subject, computed from audit.json: spend from summary.by_team, savings the largest per
    resource over the team's open findings."""
    label, teams = audit["window"]["label"], audit["summary"]["teams"]
    out = {}
    for name, team in teams.items():
        best: dict[str, Decimal] = {}
        for f in audit["findings"]:
            if f["team"] == name and not f["waived"] and f["monthly_savings"]:
                best[f["resource"]] = max(best.get(f["resource"], Decimal(0)), Decimal(f["monthly_savings"]))
        found = f"{usd(sum(best.values()))}/month savings found" if best else "no savings found"
        out[team["lead"]] = f"GPU audit {label} · {name}: {usd(audit['summary']['by_team'][name]['USD'])} " \
                            f"spent, {found}"
    s = audit["summary"]
    out[audit["policy"]["owner"]] = (f"GPU audit {label} · all teams: {usd(s['billed_cost']['USD'])} spent, "
                                     f"{usd(s['monthly_savings']['USD'])}/month savings found")
    return out


# ---- a real SMTP server on loopback -----------------------------------------------------------------------


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: email.message.EmailMessage
    raw: bytes
    login: str | None
    tls: bool


@dataclass
class Handler:
    """Records every accepted message; can refuse recipients or drop the connection in DATA."""

    received: list[Received] = field(default_factory=list)
    refuse: dict[str, str] = field(default_factory=dict)  # recipient -> SMTP reply
    drop_data: int = 0  # drop the connection in the next N DATA commands, before answering
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return self.refuse[address]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            if self.drop_data > 0:
                self.drop_data -= 1
                server.transport.abort()
                return "250 OK"  # never reaches the client
            auth = session.auth_data if session.authenticated else None
            login = auth.login.decode() if isinstance(auth, LoginPassword) else None
            msg = email.message_from_bytes(envelope.content, policy=email_policy.default)
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), msg, envelope.content,
                                          login, server.transport.get_extra_info("ssl_object") is not None))
        return "250 OK"

    def by_rcpt(self) -> dict[str, list[Received]]:
        out: dict[str, list[Received]] = {}
        for r in self.received:
            for rcpt in r.rcpt_tos:
                out.setdefault(rcpt, []).append(r)
        return out


class LoopbackController(Controller):
    """aiosmtpd on 127.0.0.1 with a port the kernel picks (no race for a free port)."""

    def _trigger_server(self):
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == USER.encode() and \
        auth_data.password == PASSWORD.encode()
    return AuthResult(success=ok, auth_data=auth_data, handled=False)  # handled=False: aiosmtpd answers 535


@pytest.fixture()
def smtp_server():
    """Start servers with the given aiosmtpd options; all are stopped after the test."""
    started = []

    def start(**kwargs) -> tuple[LoopbackController, Handler]:
        handler = Handler()
        controller = LoopbackController(handler, hostname="127.0.0.1", port=0, **kwargs)
        controller.start()
        started.append(controller)
        return controller, handler

    yield start
    for c in started:
        c.stop()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made here with the cryptography package."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-auditor test SMTP")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                        x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def server_tls(certificate) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*certificate)
    return ctx


def send(audit_dir: Path, port: int, *extra, policy: Path = DEMO / "policy.yml", env: dict | None = None):
    return run("email", "--policy", policy, "--smtp-host", "127.0.0.1", "--smtp-port", port, "--attempts", 3,
               "--retry-delay", 0, *extra, audit_dir, env=env)


def states(outbox: Path) -> dict[str, dict]:
    return {s["recipient"]: s for s in (json.loads(p.read_text()) for p in outbox.glob("*.json"))}


# ---- delivery ------------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_plain_smtp_one_message_per_recipient_then_never_again(audit_dir, smtp_server):
    controller, handler = smtp_server()
    audit = audit_of(audit_dir)
    subjects = expected_subjects(audit)

    result = send(audit_dir, controller.port)
    assert result.exit_code == 0, result.output
    got = handler.by_rcpt()
    assert set(got) == set(subjects)  # every lead and the owner, nobody else
    assert all(len(msgs) == 1 for msgs in got.values())
    assert all(len(r.rcpt_tos) == 1 and r.mail_from == audit["policy"]["owner"] for r in handler.received)
    for rcpt, [r] in got.items():
        msg = r.message
        assert msg["Subject"] == subjects[rcpt]
        assert msg["To"] == rcpt and msg.get_content_type() == "multipart/mixed"
        body, *files = msg.iter_parts()
        assert [p.get_content_type() for p in body.iter_parts()] == ["text/plain", "text/html"]
        assert files and all(p.is_attachment() for p in files)
        html = msg.get_body(("html",)).get_content()
        assert "<script" not in html.lower() and "<link" not in html.lower() and "src=" not in html
        assert msg["Message-ID"] and msg["Auto-Submitted"] == "auto-generated"

    # each lead reads their own team's spend and open findings, and nothing of another team's
    for name, team in audit["summary"]["teams"].items():
        msg = got[team["lead"]][0].message
        text, html = msg.get_body(("plain",)).get_content(), msg.get_body(("html",)).get_content()
        assert usd(audit["summary"]["by_team"][name]["USD"]) in text
        assert usd(audit["summary"]["by_team"][name]["USD"]) in html and f"team <strong>{name}</strong>" in html
        for f in audit["findings"]:
            if f["team"] == name:
                assert f["resource"] in text
            elif f["team"] and f["resource"] not in {g["resource"] for g in audit["findings"] if g["team"] == name}:
                assert f["resource"] not in text
    # the owner gets every team and all that no team owns; no finding is dropped
    owner = got[audit["policy"]["owner"]][0].message
    owner_text = owner.get_body(("plain",)).get_content()
    owner_html = owner.get_body(("html",)).get_content()
    assert usd(audit["summary"]["by_team"]["(unattributed)"]["USD"]) in owner_text
    assert usd(audit["summary"]["by_team"]["(unattributed)"]["USD"]) in owner_html
    unowned = [f for f in audit["findings"] if f["team"] is None]
    assert unowned and all(f["resource"] in owner_text and f["resource"] in owner_html for f in unowned)
    for name in audit["summary"]["teams"]:
        assert name in owner_text
    # the weekly charts, as table cells with their numbers beside them: the owner's for all teams, a lead's for
    # the team (in its report)
    week = audit["summary"]["weekly"]["weeks"][1]
    assert 'id="chart-weekly-spend"' in owner_html and 'id="chart-weekly-bands"' in owner_html
    assert usd(sum(Decimal(v) for v in week["gpu_cost"]["USD"].values())) in owner_html
    for name, team in audit["summary"]["teams"].items():
        lead_html = got[team["lead"]][0].message.get_body(("html",)).get_content()
        mine = week["gpu_cost"]["USD"].get(name)
        assert mine is None or ('id="chart-weekly-spend"' in lead_html and usd(mine) in lead_html), name

    sent = states(audit_dir / "outbox")
    assert {s["status"] for s in sent.values()} == {"sent"} and all(s["attempts"] == 1 for s in sent.values())

    again = send(audit_dir, controller.port)  # the same audit again: nothing is sent twice
    assert again.exit_code == 0, again.output
    assert len(handler.received) == len(subjects)
    assert again.output.count("already sent") == len(subjects)


def test_rerun_of_the_same_audit_is_the_same_audit(audit_dir, demo_audit):
    a = audit_of(audit_dir)
    b = json.loads(json.dumps(a))
    b["generated_at"], b["as_of"] = "2030-01-01T00:00:00Z", "2030-01-01"  # run later, from another folder
    b["policy"]["path"] = "/elsewhere/policy.yml"
    for src in b["inputs"]["billing"]:
        src["path"] = "/elsewhere/" + Path(src["path"]).name
    for f in b["findings"]:
        f["file"] = f["file"] and "/elsewhere/" + Path(f["file"]).name
    b["warnings"] = [w.replace("fixtures/", "/elsewhere/fixtures/") for w in b["warnings"]]
    assert mail.audit_fingerprint(a) == mail.audit_fingerprint(b)
    b["findings"][0]["monthly_savings"] = "1.00"
    assert mail.audit_fingerprint(a) != mail.audit_fingerprint(b)
    assert mail.message_key("f", "Lead@Example.com") == mail.message_key("f", "lead@example.com")


@pytest.mark.heavy
def test_starttls_with_self_signed_certificate_and_auth(audit_dir, smtp_server, certificate, tmp_path):
    controller, handler = smtp_server(tls_context=server_tls(certificate), require_starttls=True,
                                      authenticator=authenticator, auth_required=True)
    password_file = tmp_path / "password"
    password_file.write_text(PASSWORD + "\n")
    result = send(audit_dir, controller.port, "--starttls", "--smtp-cafile", certificate[0], "--smtp-user", USER,
                  "--smtp-password-file", password_file)
    assert result.exit_code == 0, result.output
    assert len(handler.received) == 4 and {(r.login, r.tls) for r in handler.received} == {(USER, True)}
    outbox = audit_dir / "outbox"
    assert PASSWORD not in result.output
    assert all(PASSWORD.encode() not in p.read_bytes() for p in outbox.iterdir())


@pytest.mark.heavy
def test_wrong_password_keeps_everything_and_stops(audit_dir, smtp_server, certificate):
    controller, handler = smtp_server(tls_context=server_tls(certificate), require_starttls=True,
                                      authenticator=authenticator, auth_required=True)
    result = send(audit_dir, controller.port, "--starttls", "--smtp-cafile", certificate[0], "--smtp-user", USER,
                  env={"GPU_AUDITOR_SMTP_PASSWORD": "wrong-" + PASSWORD})
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output and PASSWORD not in result.output
    assert handler.received == []
    left = states(audit_dir / "outbox")
    assert len(left) == 4 and not any(s["status"] == "sent" for s in left.values())
    assert sum(s["attempts"] for s in left.values()) == 1  # authentication is not retried, nor tried per message
    assert any("authentication failed: 535" in (s["last_error"] or "") for s in left.values())
    # and with the right password, --resend delivers them all
    again = run("email", "--resend", audit_dir / "outbox", "--smtp-host", "127.0.0.1", "--smtp-port",
                controller.port, "--starttls", "--smtp-cafile", certificate[0], "--smtp-user", USER,
                env={"GPU_AUDITOR_SMTP_PASSWORD": PASSWORD})
    assert again.exit_code == 0, again.output
    assert len(handler.received) == 4


@pytest.mark.heavy
def test_untrusted_certificate_is_not_accepted(audit_dir, smtp_server, certificate):
    controller, handler = smtp_server(tls_context=server_tls(certificate), require_starttls=True)
    result = send(audit_dir, controller.port, "--starttls")  # the system CAs do not know our certificate
    assert result.exit_code == 3, result.output
    assert "certificate not trusted" in result.output and handler.received == []


def test_starttls_required_but_not_offered_sends_nothing_in_clear(audit_dir, smtp_server):
    controller, handler = smtp_server()  # no TLS context: the server offers no STARTTLS
    result = send(audit_dir, controller.port, "--starttls")
    assert result.exit_code == 3 and "does not offer STARTTLS" in result.output
    assert handler.received == [] and sum(s["attempts"] for s in states(audit_dir / "outbox").values()) == 1


@pytest.mark.heavy
@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_implicit_tls_settings_from_the_environment(audit_dir, smtp_server, certificate):
    controller, handler = smtp_server(ssl_context=server_tls(certificate), authenticator=authenticator,
                                      auth_required=True, auth_require_tls=False)  # aiosmtpd: implicit TLS is TLS
    env = {"GPU_AUDITOR_SMTP_HOST": "127.0.0.1", "GPU_AUDITOR_SMTP_PORT": str(controller.port),
           "GPU_AUDITOR_SMTP_SECURITY": "ssl", "GPU_AUDITOR_SMTP_CAFILE": str(certificate[0]),
           "GPU_AUDITOR_SMTP_USER": USER, "GPU_AUDITOR_SMTP_PASSWORD": PASSWORD,
           "GPU_AUDITOR_SMTP_FROM": "gpu-audit@example.com"}
    result = run("email", "--policy", DEMO / "policy.yml", audit_dir, env=env)
    assert result.exit_code == 0, result.output
    assert len(handler.received) == 4 and {r.mail_from for r in handler.received} == {"gpu-audit@example.com"}
    assert {(r.login, r.tls) for r in handler.received} == {(USER, True)}
    assert all(r.message["Reply-To"] == "finops@example.com" for r in handler.received)


@pytest.mark.heavy
def test_refused_message_stays_in_outbox_until_resend(audit_dir, smtp_server):
    controller, handler = smtp_server()
    audit = audit_of(audit_dir)
    vision = audit["summary"]["teams"]["vision"]["lead"]
    handler.refuse[vision] = "451 4.3.0 Mailbox busy, try again later"

    result = send(audit_dir, controller.port)
    assert result.exit_code == 3, result.output
    assert "--resend" in result.output
    got = handler.by_rcpt()
    assert vision not in got and len(got) == 3 and all(len(m) == 1 for m in got.values())
    kept = states(audit_dir / "outbox")[vision]
    assert kept["status"] == "failed" and kept["attempts"] == 3 and "451" in kept["last_error"]
    assert (audit_dir / "outbox" / kept["eml"]).is_file()

    handler.refuse.clear()
    resent = run("email", "--resend", audit_dir / "outbox", "--smtp-host", "127.0.0.1", "--smtp-port",
                 controller.port)
    assert resent.exit_code == 0, resent.output
    got = handler.by_rcpt()
    assert len(got) == 4 and all(len(m) == 1 for m in got.values())
    assert got[vision][0].message["Subject"] == expected_subjects(audit)[vision]

    assert send(audit_dir, controller.port).exit_code == 0  # the whole audit again: nothing new goes out
    nothing = run("email", "--resend", audit_dir / "outbox", "--smtp-host", "127.0.0.1", "--smtp-port",
                  controller.port)
    assert nothing.exit_code == 0 and "nothing left to send" in nothing.output
    assert len(handler.received) == 4


def test_permanent_refusal_is_not_retried(audit_dir, smtp_server):
    controller, handler = smtp_server()
    owner = audit_of(audit_dir)["policy"]["owner"]
    handler.refuse[owner] = "550 5.1.1 No such user"
    result = send(audit_dir, controller.port)
    assert result.exit_code == 3, result.output
    kept = states(audit_dir / "outbox")[owner]
    assert kept["attempts"] == 1 and kept["last_error"].startswith("recipient refused: 550")
    assert len(handler.received) == 3


@pytest.mark.heavy
def test_dropped_connection_is_retried_and_delivered_once(audit_dir, smtp_server):
    controller, handler = smtp_server()
    handler.drop_data = 2
    result = send(audit_dir, controller.port)
    assert result.exit_code == 0, result.output
    got = handler.by_rcpt()
    assert len(got) == 4 and all(len(m) == 1 for m in got.values())
    attempts = sorted(s["attempts"] for s in states(audit_dir / "outbox").values())
    assert attempts == [1, 1, 1, 3]  # the first message lost two connections, then went through
    retried = max(states(audit_dir / "outbox").values(), key=lambda s: s["attempts"])
    assert [e["kind"] for e in retried["errors"]] == ["transient", "transient"]


def test_busy_server_is_retried_with_bounded_exponential_backoff(audit_dir, smtp_server):
    controller, handler = smtp_server()
    handler.refuse = {r: "421 4.7.0 Too busy" for r in expected_subjects(audit_of(audit_dir))}
    waits: list[float] = []
    retry = mail.Retry.exponential(attempts=5, delay=1.5, cap=5, sleep=waits.append)
    settings = mail.smtp_settings("127.0.0.1", controller.port, env={})
    run_ = mail.send_audit(audit_dir, load_policy(DEMO / "policy.yml"), audit_dir / "outbox", settings,
                           retry=retry, env={})
    assert len(run_.left) == 4 and handler.received == []
    assert waits == [1.5, 3.0, 5, 5] * 4  # bounded: 4 waits per message, doubling up to the cap


@pytest.mark.heavy
def test_dry_run_writes_eml_files_and_resend_sends_them(audit_dir, smtp_server):
    result = run("email", "--policy", DEMO / "policy.yml", "--dry-run", audit_dir)  # no server at all
    assert result.exit_code == 0, result.output
    outbox = audit_dir / "outbox"
    emls = sorted(outbox.glob("*.eml"))
    assert len(emls) == 4
    subjects = expected_subjects(audit_of(audit_dir))
    for p in emls:
        msg = email.message_from_bytes(p.read_bytes(), policy=email_policy.default)
        assert msg["Subject"] == subjects[msg["To"]]
        assert [x.get_content_type() for x in next(msg.iter_parts()).iter_parts()] == ["text/plain", "text/html"]
    assert {s["status"] for s in states(outbox).values()} == {"draft"}

    controller, handler = smtp_server()
    resent = run("email", "--resend", outbox, "--smtp-host", "127.0.0.1", "--smtp-port", controller.port)
    assert resent.exit_code == 0, resent.output
    assert {r.rcpt_tos[0] for r in handler.received} == set(subjects) and len(handler.received) == 4


@pytest.mark.heavy
def test_every_message_of_the_demo_reads_whole_in_a_mailbox(audit_dir):
    """Every team's lead and the owner: the body a mail client shows (the plain text and the HTML) under 100 kB,
    where Gmail clips at 102 kB; the full report and every finding as attachments, the lead's cut to the team;
    and no word of a file the reader cannot open (report.html, audit.json, the audit folder)."""
    result = run("email", "--policy", DEMO / "policy.yml", "--dry-run", "--outbox", audit_dir / "sized", audit_dir)
    assert result.exit_code == 0, result.output
    audit = audit_of(audit_dir)
    teams = {t["lead"]: name for name, t in audit["summary"]["teams"].items()}
    seen = set()
    for p in sorted((audit_dir / "sized").glob("*.eml")):
        msg = email.message_from_bytes(p.read_bytes(), policy=email_policy.default)
        body, *files = msg.iter_parts()
        text, html = (body.get_body((k,)).get_content() for k in ("plain", "html"))
        assert len(text.encode()) < 100_000 and len(html.encode()) < 100_000, (p.name, len(html.encode()))
        assert len(body.as_bytes()) < 100_000, p.name  # as sent, headers and transfer encoding included
        team = teams.get(msg["To"])
        seen.add(team or "owner")
        stem = "gpu-audit-2026-Q3" + (f"-{team}" if team else "")
        assert [(f.get_filename(), f.get_content_type()) for f in files] == [
            (f"{stem}.html", "text/html"), (f"{stem}-findings.csv", "text/csv")]
        report, csv_file = (f.get_content().replace("\r\n", "\n").rstrip("\n") for f in files)  # SMTP's CRLF
        assert report == render_html(audit, team=team).replace("\r\n", "\n").rstrip("\n")
        assert csv_file == render_csv(audit, team=team).replace("\r\n", "\n").rstrip("\n")
        for words in (r"report\.html", r"audit\.json", "audit folder", r"findings\.csv"):  # an attachment's name aside
            assert not re.search(r"(?<![-\w])" + words, text + html), (p.name, words)
        assert f"{stem}.html" in text and f"{stem}.html" in html  # the footer names what is attached
        assert "`" not in text and "`" not in html  # rule text's Markdown: <code> in HTML, bare in plain text
    assert seen == {*teams.values(), "owner"}


@pytest.mark.heavy
def test_audit_email_runs_the_audit_then_sends(tmp_path, smtp_server):
    controller, handler = smtp_server()
    out = tmp_path / "report"
    env = {"GPU_AUDITOR_SMTP_HOST": "127.0.0.1", "GPU_AUDITOR_SMTP_PORT": str(controller.port)}
    result = run("audit", "--policy", DEMO / "policy.yml", "--inventory", DEMO / "inventory.json", "--quarter",
                 "2026-Q3", "--as-of", "2026-10-15", "--out", out, "-q", "--email", DEMO / "billing", env=env)
    assert result.exit_code == 0, result.output
    subjects = expected_subjects(json.loads((out / "audit.json").read_text()))
    assert {r.rcpt_tos[0]: r.message["Subject"] for r in handler.received} == subjects
    assert {s["status"] for s in states(out / "outbox").values()} == {"sent"}

    no_host = run("audit", "--policy", DEMO / "policy.yml", "--out", tmp_path / "x", "--email", DEMO / "billing")
    assert no_host.exit_code == 2 and "no SMTP server" in no_host.output
    assert not (tmp_path / "x").exists()  # it fails before the audit runs


@pytest.mark.heavy
def test_unreachable_server_is_tried_for_one_message_only(audit_dir):
    import socket

    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = send(audit_dir, port)
    assert result.exit_code == 3, result.output
    left = states(audit_dir / "outbox")
    assert sorted(s["attempts"] for s in left.values()) == [0, 0, 0, 3]
    assert all("connection failed" in s["last_error"] for s in left.values())
    assert result.output.count("not attempted") == 3


# ---- headers, names and input ------------------------------------------------------------------------------


EVIL_TEAM = "vision\r\nBcc: evil@attacker.example"
EVIL_TAG = "research\nBcc: evil2@attacker.example\r\nX-Injected: yes"


def hostile_copy(audit_dir: Path, tmp_path: Path, team: str, tag_team: str | None = None) -> Path:
    """The demo audit and policy with team vision renamed (and an unattributed finding tagged `tag_team`)."""
    audit = audit_of(audit_dir)
    for f in audit["findings"]:
        if f["team"] == "vision":
            f["team"] = team
    for key in ("by_team", "teams"):
        audit["summary"][key][team] = audit["summary"][key].pop("vision")
    if tag_team:
        next(f for f in audit["findings"] if f["team"] is None)["team"] = tag_team
    (audit_dir / "audit.json").write_text(json.dumps(audit))
    text = (DEMO / "policy.yml").read_text().replace("\n  vision:\n", f"\n  {json.dumps(team)}:\n")
    policy = tmp_path / "policy.yml"
    policy.write_text(text)
    assert team in load_policy(policy).teams
    return policy


@pytest.mark.heavy
def test_no_header_injection_from_team_names_or_tags(audit_dir, smtp_server, tmp_path):
    controller, handler = smtp_server()
    policy = hostile_copy(audit_dir, tmp_path, EVIL_TEAM, EVIL_TAG)
    result = send(audit_dir, controller.port, policy=policy)
    assert result.exit_code == 0, result.output
    rcpts = [r for rec in handler.received for r in rec.rcpt_tos]
    assert sorted(rcpts) == sorted(expected_subjects(audit_of(audit_dir)))
    assert not any("attacker" in r for r in rcpts)
    for rec in handler.received:
        assert "Bcc" not in rec.message and "X-Injected" not in rec.message
        assert b"\nBcc:" not in rec.raw and b"\nX-Injected:" not in rec.raw
        assert "\r" not in rec.message["Subject"] and "\n" not in rec.message["Subject"]
        for part in (p for p in rec.message.walk() if not p.is_multipart()):  # the body's parts and the files
            lines = part.get_content().splitlines()
            assert not any(line.startswith(("Bcc:", "X-Injected:")) for line in lines)
    vision = handler.by_rcpt()["lead-vision@example.com"][0].message
    assert vision["Subject"].startswith("GPU audit 2026-Q3 · vision\\r\\nBcc: evil@attacker.example: $")
    owner = handler.by_rcpt()["finops@example.com"][0].message.get_body(("plain",)).get_content()
    assert "research\\nBcc: evil2@attacker.example\\r\\nX-Injected: yes" in owner  # shown, on one line, to the owner


def test_lead_address_with_a_newline_is_an_input_error(audit_dir, tmp_path):
    text = (DEMO / "policy.yml").read_text().replace(
        "lead: lead-vision@example.com", 'lead: "lead-vision@example.com\\r\\nBcc: evil@attacker.example"')
    policy = tmp_path / "policy.yml"
    policy.write_text(text)
    result = run("email", "--policy", policy, "--dry-run", audit_dir)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"gpu-auditor: error: {policy}:") and "\n" not in result.stderr.strip()
    assert "teams.vision.lead: " in result.stderr and "has a line break" in result.stderr
    assert not (audit_dir / "outbox").exists()  # nothing written


@pytest.mark.heavy
@pytest.mark.parametrize("team", ["../../etc", "/etc/passwd", "..", "a/../../b\x00", "团队" * 30 + "x" * 200],
                         ids=["dotdot-etc", "absolute", "dotdot", "nul", "long-unicode"])
def test_outbox_file_names_stay_in_the_outbox(audit_dir, tmp_path, team):
    policy = hostile_copy(audit_dir, tmp_path, team)
    before = {p for p in tmp_path.rglob("*")}
    result = run("email", "--policy", policy, "--dry-run", audit_dir)
    assert result.exit_code == 0, result.output
    outbox = (audit_dir / "outbox").resolve()
    new = {p for p in tmp_path.rglob("*")} - before
    assert new and all(p.resolve().parent == outbox or p.resolve() == outbox for p in new)
    names = [p.name for p in outbox.iterdir() if p.name != ".lock"]
    assert len(names) == 8 and all(not n.startswith(".") and len(n) < 80 for n in names)


def test_one_message_per_recipient_when_people_hold_several_roles(demo_audit):
    audit = json.loads(demo_audit.read_text())
    text = (DEMO / "policy.yml").read_text().replace("lead: lead-nlp@example.com", "lead: LEAD-vision@example.com")
    text = text.replace("lead: lead-platform@example.com", "lead: finops@example.com")
    letters = mail.route(audit, parse_policy(text))
    assert [(le.recipient, [s.team for s in le.sections], le.is_owner) for le in letters] == [
        ("lead-vision@example.com", ["vision", "nlp"], False), ("finops@example.com", ["platform"], True)]
    both = mail.subject(audit, letters[0])
    spend = sum(Decimal(audit["summary"]["by_team"][t]["USD"]) for t in ("vision", "nlp"))
    assert both.startswith(f"GPU audit 2026-Q3 · vision, nlp: {usd(spend)} spent, ")
    assert mail.subject(audit, letters[1]) == expected_subjects(audit)["finops@example.com"]
    # every finding, open or waived, is in some message
    shown = {f["fingerprint"] for le in letters for s in le.sections + le.unowned for f in s.findings + s.waived}
    assert shown == {f["fingerprint"] for f in audit["findings"]}


def test_a_tagged_team_missing_from_the_policy_goes_to_the_owner(demo_audit):
    audit = json.loads(demo_audit.read_text())
    audit["summary"]["by_team"]["research"] = {"USD": "12.34"}
    stray = next(f for f in audit["findings"] if f["team"] is None)
    stray["team"] = "research"
    owner = mail.route(audit, load_policy(DEMO / "policy.yml"))[-1]
    research = next(s for s in owner.unowned if s.team == "research")
    assert not research.in_policy and research.spend == {"USD": Decimal("12.34")}
    assert [f["resource"] for f in research.findings] == [stray["resource"]]
    assert "research" in [s.name for s in owner.overview]


def test_two_runs_cannot_share_an_outbox(tmp_path):
    with mail.Outbox(tmp_path / "outbox"):
        with pytest.raises(InputError, match="another gpu-auditor email"):
            mail.Outbox(tmp_path / "outbox").__enter__()


@pytest.mark.heavy
@pytest.mark.parametrize("args, message", [
    (["--policy", "POLICY", "--dry-run", "MISSING"], "no audit.json found here"),
    (["--policy", "POLICY", "--dry-run", "POLICY"], "not valid JSON"),
    (["--policy", "POLICY", "AUDIT"], "no SMTP server"),
    (["--policy", "POLICY", "--smtp-host", "h", "--smtp-user", "u", "AUDIT"], "needs a password"),
    (["--policy", "POLICY", "--smtp-host", "h", "--smtp-user", "u", "--smtp-password-file", "MISSING", "AUDIT"],
     "password file"),
    (["--policy", "POLICY", "--smtp-host", "h", "--smtp-password", "x", "AUDIT"], "No such option"),
    (["--policy", "MISSING", "--dry-run", "AUDIT"], "policy file not found"),
    (["--dry-run", "AUDIT"], "give an AUDIT folder and --policy"),
    (["--policy", "POLICY", "--smtp-host", "h", "--starttls", "--smtp-cafile", "POLICY", "AUDIT"],
     "cannot load the CA file"),
    (["--resend", "MISSING", "--smtp-host", "h"], "no outbox here"),
    (["--resend", "AUDIT", "AUDIT"], "takes no AUDIT"),
    (["--policy", "POLICY", "--from", "not an address", "--dry-run", "AUDIT"], "more than one address, or a name"),
    (["--policy", "POLICY", "--from", "@example.com", "--dry-run", "AUDIT"], "is not an email address"),
])
def test_input_errors_exit_2_with_one_line(audit_dir, tmp_path, args, message):
    subst = {"MISSING": tmp_path / "missing", "POLICY": DEMO / "policy.yml", "AUDIT": audit_dir}
    result = run("email", *[subst.get(a, a) for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_user_without_tls_is_refused_and_password_only_from_env_or_file(tmp_path):
    with pytest.raises(InputError, match="needs --starttls or --ssl"):
        mail.smtp_settings("h", user="u", env={"GPU_AUDITOR_SMTP_PASSWORD": PASSWORD})
    s = mail.smtp_settings("h", user="u", security="starttls", env={"GPU_AUDITOR_SMTP_PASSWORD": PASSWORD})
    assert (s.port, s.password) == (587, PASSWORD) and PASSWORD not in repr(s)
    assert mail.smtp_settings("h", env={"GPU_AUDITOR_SMTP_PORT": "465"}).security == "ssl"


@pytest.mark.parametrize("value, expected", [
    ("vision", "vision"), ("../../etc", "etc"), ("..", "x"), (".hidden", "hidden"), ("a b/c\\d", "a-b-c-d"),
    ("", "x"), ("ümlaut", "umlaut"), ("\r\n", "x"), ("\x00", "x"), ("x" * 300, "x" * 40), ("-_a_-", "a"),
])
def test_slug(value, expected):
    assert mail.slug(value) == expected

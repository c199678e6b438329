"""Security: hostile strings from an export stay inert in every output; file names built from team or account
names stay in the output folder; YAML and code are never executed from input; secrets from the environment and
from billing data (presigned and SAS URLs) appear in no output; dependencies have lower bounds.

Everything runs through the command line, as a user would run it, over files written in tmp_path.
"""

from __future__ import annotations

import ast
import csv
import email
import json
import re
import shutil
import tomllib
from email import policy as email_policy
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.cli import cli
from auditor.providers.redact import redact

REPO = Path(__file__).resolve().parents[1]
SHIPPED = [REPO / "auditor", REPO / "rules", REPO / "reports"]

CUR_COLUMNS = ["identity/LineItemId", "bill/PayerAccountId", "lineItem/UsageAccountId", "lineItem/LineItemType",
               "lineItem/UsageStartDate", "lineItem/UsageEndDate", "lineItem/ProductCode", "lineItem/UsageType",
               "lineItem/ResourceId", "lineItem/UsageAmount", "lineItem/CurrencyCode", "lineItem/UnblendedCost",
               "product/ProductName", "product/instanceType", "product/productFamily", "product/regionCode",
               "pricing/unit", "resourceTags/user:team", "resourceTags/user:owner", "resourceTags/user:project"]


def write_cur(path: Path, lines: list[dict[str, str]]) -> Path:
    """A CUR of one-hour g5.xlarge lines; each dict gives the resource id, tags, account and cost."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CUR_COLUMNS)
        for i, line in enumerate(lines):
            w.writerow([f"li-{i}", "111111111111", line.get("account", "222222222222"), "Usage",
                        f"2026-07-01T{i:02d}:00:00Z", f"2026-07-01T{i + 1:02d}:00:00Z", "AmazonEC2",
                        "BoxUsage:g5.xlarge", line["resource"], "1", "USD", line.get("cost", "10.00"),
                        "Amazon Elastic Compute Cloud", "g5.xlarge", "Compute Instance", "us-east-1", "Hrs",
                        line.get("team", ""), line.get("owner", ""), line.get("project", "")])
    return path


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env)


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def active_html(html: str) -> list:
    """Elements or attributes that would run code: script and friends, on* handlers, javascript: URLs."""
    parser = Elements()
    parser.feed(html)
    bad = []
    for tag, attrs in parser.elements:
        if tag in ("script", "iframe", "object", "embed", "form", "base") or \
                (tag == "meta" and (attrs.get("http-equiv") or "").lower() == "refresh"):
            bad.append(tag)
        for name, value in attrs.items():
            if name.startswith("on") or (value or "").strip().lower().startswith(("javascript:", "data:text")):
                bad.append((tag, name, value))
    return bad


def html_parts(eml: Path) -> list[str]:
    msg = email.message_from_bytes(eml.read_bytes(), policy=email_policy.default)
    return [p.get_content() for p in msg.walk() if p.get_content_type() == "text/html"]


# ---- hostile strings in an export -------------------------------------------------------------------------

SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '" onload="alert(2)'
FORMULA = '=HYPERLINK("http://evil.example/x","click")'
HOSTILE_LINES = [
    {"resource": SCRIPT},
    {"resource": FORMULA, "team": ATTRIBUTE, "owner": "|pipe|"},
    {"resource": "i-ok\nnext line", "team": "vision\r\n# heading", "owner": "+cmd|' /C calc'!A0"},
    {"resource": "](javascript:alert(3))", "team": "@SUM(1+1)", "owner": "-2+3"},
    {"resource": "<img src=x onerror=alert(4)>", "team": "vision", "owner": "a@example.com"},
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """An audit of a CUR whose resource ids and tags are built to break out of HTML, Markdown and CSV, and its
    e-mail, written with --dry-run."""
    tmp = tmp_path_factory.mktemp("hostile")
    billing = write_cur(tmp / "hostile.csv", HOSTILE_LINES)
    policy = tmp / "policy.yml"
    policy.write_text("policy: Hostile export\nowner: finops@example.com\n"
                      "teams:\n  vision: {lead: lead@example.com}\n", encoding="utf-8")
    out = tmp / "out"
    result = invoke("audit", "-q", "--policy", policy, "--out", out, billing)
    assert result.exit_code == 0, result.output
    result = invoke("email", "--dry-run", "--policy", policy, out)
    assert result.exit_code == 0, result.output
    return out


def test_hostile_export_reaches_the_audit_intact(hostile):
    """The data is kept as it came (JSON escapes it); the views below make it inert."""
    doc = json.loads((hostile / "audit.json").read_text(encoding="utf-8"))
    # and COM004 on the family: the window is the export's five hours, and in each of them a g5.xlarge in
    # us-east-1 ran on demand for $10.00, so the family's least hour is $10.00, over the $5 min_floor_per_hour;
    # no finding says to stop any of those machines (TAG001 only), so none is left out of the floor
    assert {f["resource"] for f in doc["findings"]} == {line["resource"] for line in HOSTILE_LINES} | {
        "aws:us-east-1:g5:USD"}
    [baseline] = [f for f in doc["findings"] if f["rule"] == "COM004"]
    assert baseline["evidence"]["floor_per_hour"] == "10.0000" and baseline["evidence"]["hours"] == 5
    assert ATTRIBUTE in {f["team"] for f in doc["findings"]}


@pytest.mark.heavy
def test_hostile_export_runs_nothing_in_html(hostile):
    html = (hostile / "report.html").read_text(encoding="utf-8")
    assert active_html(html) == []
    assert SCRIPT not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'onload="alert(2)' not in html and "<img src=x" not in html
    emails = sorted((hostile / "outbox").glob("*.eml"))
    assert emails, "the dry run wrote no message"
    for eml in emails:
        for part in html_parts(eml):
            assert active_html(part) == [], eml.name
            assert SCRIPT not in part


def test_hostile_export_breaks_no_markdown(hostile):
    md = (hostile / "report.md").read_text(encoding="utf-8")
    assert SCRIPT not in md and not re.search(r"(?<!\\)<img", md)
    assert "](javascript:" not in md  # no link can be formed
    for line in md.splitlines():
        assert not line.startswith(("next line", "# heading")), line  # no newline got through
        if line.startswith("|") and "pipe" in line:
            assert "|pipe|" not in line and r"\|pipe\|" in line, line
    # every table row has as many cells as its header row
    table: list[int] = []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            table.append(len(re.findall(r"(?<!\\)\|", line)))
        elif table:
            assert len(set(table)) == 1, table
            table = []


def test_hostile_export_is_no_spreadsheet_formula(hostile):
    doc = json.loads((hostile / "audit.json").read_text(encoding="utf-8"))
    with open(hostile / "findings.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 1 + len(doc["findings"])  # a newline inside a value split no row
    assert len({len(r) for r in rows}) == 1
    for row in rows[1:]:
        for cell in row:
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                float(cell)  # only a number may start so
    assert any(cell == "'" + FORMULA for row in rows for cell in row)


# ---- file names from team and account names ---------------------------------------------------------------

@pytest.mark.heavy
def test_team_and_account_names_cannot_leave_the_output_folder(tmp_path):
    escapes = ["../../../escaped", "..\\..\\escaped", "/tmp/escaped-abs", "outbox/../../escaped", ".", ".."]
    lines = [{"resource": f"i-{i}", "team": name, "owner": f"{name}@example.com", "account": name}
             for i, name in enumerate(escapes)]
    work = tmp_path / "work"
    work.mkdir()
    billing = write_cur(work / "names.csv", lines)
    teams = "".join(f"  {json.dumps(name)}: {{lead: lead{i}@example.com}}\n" for i, name in enumerate(escapes))
    policy = work / "policy.yml"
    policy.write_text(f"policy: Escapes\nowner: finops@example.com\nteams:\n{teams}", encoding="utf-8")
    out = work / "deep" / "out"
    before = set(tmp_path.rglob("*"))
    assert invoke("audit", "-q", "--policy", policy, "--out", out, billing).exit_code == 0
    result = invoke("email", "--dry-run", "--policy", policy, out)
    assert result.exit_code == 0, result.output
    created = set(tmp_path.rglob("*")) - before
    assert created and all(p == out or out in p.parents or p == out.parent for p in created), sorted(created)
    assert len(list((out / "outbox").glob("*.eml"))) == len(escapes) + 1
    assert not Path("/tmp/escaped-abs").exists()


# ---- no code from input -----------------------------------------------------------------------------------

def _shipped_modules() -> list[Path]:
    return sorted(p for folder in SHIPPED for p in folder.rglob("*.py"))


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


@pytest.mark.heavy
def test_no_eval_exec_pickle_or_shell_in_shipped_code():
    found = []
    for path in _shipped_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call):
                name = _name(node.func)
                if name in ("eval", "exec", "compile", "__import__", "os.system", "os.popen", "marshal.loads"):
                    found.append(f"{where}: {name}()")
                if any(k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                       for k in node.keywords):
                    found.append(f"{where}: shell=")
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for mod in mods:
                    if mod.split(".")[0] in ("pickle", "cPickle", "_pickle", "marshal", "shelve", "dill",
                                             "jsonpickle", "cloudpickle"):
                        found.append(f"{where}: import {mod}")
    assert found == []


UNSAFE_YAML = {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all", "Loader",
               "UnsafeLoader", "FullLoader", "CLoader", "CUnsafeLoader", "CFullLoader", "add_constructor",
               "add_multi_constructor"}


def _safe_loader(expr: ast.AST, safe: set[str], assigned: dict[str, list[str]]) -> bool:
    """A `Loader=` that names only safe loaders, directly or through a variable assigned in the module."""
    if isinstance(expr, ast.Name) and expr.id in safe:
        return True
    sources = assigned.get(_name(expr), []) if isinstance(expr, ast.Name) else [ast.unparse(expr)]
    return bool(sources) and all("Loader" in s and set(re.findall(r"\b\w*Loader\b", s)) <= safe for s in sources)


def test_yaml_only_through_safe_loaders():
    """yaml.safe_load, or a loader class derived from SafeLoader; never yaml.load, the full or unsafe loaders, or
    a constructor that builds Python objects."""
    uses = []
    for path in _shipped_modules():
        text = path.read_text(encoding="utf-8")
        if "yaml" not in text:
            continue
        tree = ast.parse(text, str(path))
        # SafeLoader, safeyaml.NoAliasLoader (a SafeLoader), and the classes derived from either in the module.
        safe = {"SafeLoader", "CSafeLoader", "yaml.SafeLoader", "yaml.CSafeLoader", "NoAliasLoader"}
        classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        for _ in classes:
            safe |= {c.name for c in classes if {_name(b) for b in c.bases} & safe}
        assigned: dict[str, list[str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    assigned.setdefault(_name(target), []).append(ast.unparse(node.value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) in ("yaml.load", "yaml.load_all"):
                loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
                if loader is None or not _safe_loader(loader, safe, assigned):
                    uses.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)[:80]}")
                continue
            if isinstance(node, ast.Attribute) and _name(node.value) == "yaml" and node.attr in UNSAFE_YAML - {
                    "load", "load_all"}:
                uses.append(f"{path.relative_to(REPO)}:{node.lineno}: yaml.{node.attr}")
            if isinstance(node, ast.ClassDef) and any(_name(b).startswith("yaml.") for b in node.bases):
                bases = [_name(b) for b in node.bases]
                if not set(bases) <= {"yaml.SafeLoader", "yaml.CSafeLoader"}:
                    uses.append(f"{path.relative_to(REPO)}:{node.lineno}: class {node.name}({', '.join(bases)})")
            if isinstance(node, ast.ImportFrom) and node.module == "yaml":
                names = {a.name for a in node.names} & UNSAFE_YAML
                uses += [f"{path.relative_to(REPO)}:{node.lineno}: from yaml import {n}" for n in sorted(names)]
    assert uses == []


def test_policy_yaml_refuses_aliases_and_python_tags(tmp_path):
    for body, words in [("clauses:\n  idle: &a {min_hours: 24}\n  rightsizing: *a\n", "aliases"),
                        ("x: !!python/object/apply:os.system ['touch pwned']\n", "not valid YAML")]:
        policy = tmp_path / "policy.yml"
        policy.write_text("policy: p\nowner: o@example.com\n" + body, encoding="utf-8")
        result = invoke("policy", "validate", policy)
        assert result.exit_code == 2 and words in result.stderr, result.output
    assert not (REPO / "pwned").exists() and not Path("pwned").exists()


# ---- secrets ----------------------------------------------------------------------------------------------

PRESIGNED = ("https://ckpt-bucket.s3.us-east-1.amazonaws.com/runs/model.pt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
             "&X-Amz-Credential=AKIAFAKEPRESIGNED01%2F20260701%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260701T000000Z"
             "&X-Amz-Expires=604800&X-Amz-Security-Token=FAKESECURITYTOKEN0123456789"
             "&X-Amz-SignedHeaders=host&X-Amz-Signature=5e2ffa1c0b0d7d0fakesignature0123456789abcdef")
SAS = ("https://mlcheckpoints.blob.core.windows.net/runs/ckpt-0814?sv=2022-11-02&ss=b&srt=co&sp=rwdlac"
       "&se=2026-12-31T00:00:00Z&sig=FAKESASSIGNATURE0123456789%3D")
GCS = ("https://storage.googleapis.com/ml-data/shard-0001.tar?X-Goog-Algorithm=GOOG4-RSA-SHA256"
       "&X-Goog-Credential=fake-sa%40proj.iam.gserviceaccount.com&X-Goog-Signature=FAKEGOOGSIGNATURE0123")
WITH_PASSWORD = "https://svc-user:FAKEURLPASSWORD01@registry.example.com/models/llama"
BARE_SAS = "sv=2022-11-02&sp=r&sig=FAKEBARESAS0123456789"
ENV_SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKEENVACCESS01",
    "AWS_SECRET_ACCESS_KEY": "fakeEnvSecretAccessKey0123456789/abcdEFGH",
    "AWS_SESSION_TOKEN": "FAKEENVSESSIONTOKEN0123456789",
    "AZURE_CLIENT_SECRET": "fake~azure~client~secret~0123456789",
    "GPU_AUDITOR_SMTP_PASSWORD": "fake-smtp-password-0123456789",
}
SECRETS = [*ENV_SECRETS.values(), "FAKEGOOGLEPRIVATEKEY0123456789", "fakeGoogleKeyId0123456789",
           "AKIAFAKEPRESIGNED01", "FAKESECURITYTOKEN0123456789", "5e2ffa1c0b0d7d0fakesignature0123456789abcdef",
           "FAKESASSIGNATURE0123456789", "FAKEGOOGSIGNATURE0123", "FAKEURLPASSWORD01", "FAKEBARESAS0123456789"]


@pytest.fixture(scope="module")
def secret_run(tmp_path_factory) -> dict:
    """Every command a user runs, with fake credentials in the environment and presigned, SAS and signed URLs in
    the export's resource ids and tags and in the inventory's checkpoint location; what each printed, and the
    folder it wrote."""
    tmp = tmp_path_factory.mktemp("secrets")
    gcp_key = tmp / "gcp-key.json"
    gcp_key.write_text(json.dumps({"type": "service_account", "private_key_id": "fakeGoogleKeyId0123456789",
                                   "private_key": "-----BEGIN PRIVATE KEY-----\nFAKEGOOGLEPRIVATEKEY0123456789\n"
                                                  "-----END PRIVATE KEY-----\n"}), encoding="utf-8")
    env = {**ENV_SECRETS, "GOOGLE_APPLICATION_CREDENTIALS": str(gcp_key)}
    billing = write_cur(tmp / "cur.csv", [
        {"resource": PRESIGNED},  # untagged: a TAG001 finding names it
        {"resource": "i-0sas", "team": SAS, "owner": WITH_PASSWORD},  # the team and owner of a finding
        {"resource": GCS, "team": "vision", "owner": BARE_SAS},
        {"resource": WITH_PASSWORD + "?token=FAKEURLPASSWORD01"},
    ])
    inventory = tmp / "inventory.json"
    inventory.write_text(json.dumps({"version": 1, "assets": [], "gpu_usage": [], "jobs": [{
        "id": "training-job/spot-1", "platform": "sagemaker", "provider": "aws", "account": "222222222222",
        "region": "us-east-1", "name": "spot-1", "state": "Completed", "instance_type": "ml.g5.xlarge",
        "spot": True, "checkpoint_uri": SAS, "checkpoint_interval_min": 600, "start_time": "2026-07-01T00:00:00Z",
        "end_time": "2026-07-01T06:00:00Z", "tags": {"team": "vision", "link": PRESIGNED}}]}), encoding="utf-8")
    bad_tags = tmp / "focus-bad-tags.csv"
    bad_tags.write_text("BilledCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ProviderName,"
                        "ResourceId,Tags\n1.5,USD,2026-07-01 00:00:00,2026-07-01 01:00:00,Usage,AWS,i-1,"
                        f"\"{{\"\"ckpt\"\": \"\"{SAS}\"\"\"\n", encoding="utf-8")
    policy = tmp / "policy.yml"
    policy.write_text("policy: Secrets\nowner: finops@example.com\nteams:\n  vision: {lead: lead@example.com}\n",
                      encoding="utf-8")
    out = tmp / "out"
    runs = {
        "inspect": invoke("inspect", billing, env=env),
        "inspect-json": invoke("inspect", "--json", billing, env=env),
        "audit": invoke("audit", "--policy", policy, "--inventory", inventory, "--out", out, billing, env=env),
        "email-dry-run": invoke("email", "--dry-run", "--policy", policy, out, env=env),
        "bad-tags": invoke("inspect", bad_tags, env=env),
        "validate": invoke("policy", "validate", policy, env=env),
    }
    smtp_out = tmp / "smtp-out"
    invoke("audit", "-q", "--policy", policy, "--out", smtp_out, billing, env=env)
    runs["email-smtp-down"] = invoke("email", "--policy", policy, "--smtp-host", "127.0.0.1", "--smtp-port", "9",
                                     "--smtp-user", "auditor", "--starttls", "--attempts", "1", "--retry-delay", "0",
                                     smtp_out, env=env)
    return {"runs": runs, "folders": [out, smtp_out]}


@pytest.mark.heavy
def test_the_secret_run_did_its_work(secret_run):
    runs = secret_run["runs"]
    assert runs["audit"].exit_code == 0, runs["audit"].output
    assert runs["bad-tags"].exit_code == 2 and "focus-bad-tags.csv:2: column 'Tags'" in runs["bad-tags"].stderr
    assert runs["email-smtp-down"].exit_code == 3, runs["email-smtp-down"].output
    out = secret_run["folders"][0]
    doc = json.loads((out / "audit.json").read_text(encoding="utf-8"))
    assert {f["rule"] for f in doc["findings"]} >= {"TAG001", "SPOT001"}
    html = (out / "report.html").read_text(encoding="utf-8")
    # the objects stay identifiable: scheme, host and path are kept, the query string goes
    for kept in ("ckpt-bucket.s3.us-east-1.amazonaws.com/runs/model.pt?REDACTED",
                 "storage.googleapis.com/ml-data/shard-0001.tar?REDACTED"):
        assert kept in html, kept
    spot = next(f for f in doc["findings"] if f["rule"] == "SPOT001")
    assert spot["evidence"]["checkpoint_uri"] == "https://mlcheckpoints.blob.core.windows.net/runs/ckpt-0814?REDACTED"


@pytest.mark.heavy
def test_no_secret_in_any_output(secret_run):
    texts = {}
    for name, result in secret_run["runs"].items():
        texts[f"{name} stdout"] = result.stdout
        texts[f"{name} stderr"] = result.stderr
    for folder in secret_run["folders"]:
        for path in folder.rglob("*"):
            if path.is_file():
                texts[str(path)] = path.read_bytes().decode("utf-8", "replace")
    assert len(texts) > 15
    leaks = [(where, secret) for where, text in texts.items() for secret in SECRETS if secret in text]
    assert leaks == []


@pytest.mark.heavy
@pytest.mark.parametrize("fmt", ["cur", "focus"])
def test_no_secret_is_stored(tmp_path, fmt):
    """Redaction happens as the lines are read: nothing in the costs table holds a secret, whatever view or
    e-mail is later made of it."""
    from auditor.tables.store import Store

    if fmt == "cur":
        path = write_cur(tmp_path / "cur.csv", [{"resource": PRESIGNED, "team": SAS, "owner": BARE_SAS},
                                                {"resource": GCS, "project": WITH_PASSWORD}])
    else:
        path = tmp_path / "focus.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["BilledCost", "BillingCurrency", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
                        "ProviderName", "ResourceId", "Tags"])
            w.writerow(["1.5", "USD", "2026-07-01 00:00:00", "2026-07-01 01:00:00", "Usage", "AWS", PRESIGNED,
                        json.dumps({"ckpt": SAS, "owner": BARE_SAS})])
            w.writerow(["2.5", "USD", "2026-07-01 01:00:00", "2026-07-01 02:00:00", "Usage", "Microsoft", GCS,
                        json.dumps({"registry": WITH_PASSWORD})])
    store = Store()
    [source] = store.load_billing([path])
    assert source.rows == 2
    for table in ("costs", "lines"):  # the stored rows, and the same file read line by line
        stored = str(store.lines().execute(f"SELECT * FROM {table}").fetchall())
        assert [secret for secret in SECRETS if secret in stored] == [], table
        assert "ckpt-bucket.s3.us-east-1.amazonaws.com/runs/model.pt?REDACTED" in stored, table
        assert "mlcheckpoints.blob.core.windows.net/runs/ckpt-0814?REDACTED" in stored, table


@pytest.mark.parametrize(("text", "expected"), [
    (PRESIGNED, "https://ckpt-bucket.s3.us-east-1.amazonaws.com/runs/model.pt?REDACTED"),
    (SAS, "https://mlcheckpoints.blob.core.windows.net/runs/ckpt-0814?REDACTED"),
    (WITH_PASSWORD, "https://REDACTED@registry.example.com/models/llama"),
    (BARE_SAS, "sv=2022-11-02&sp=r&sig=REDACTED"),
    ('{"ckpt": "' + SAS + '", "team": "vision"}',
     '{"ckpt": "https://mlcheckpoints.blob.core.windows.net/runs/ckpt-0814?REDACTED", "team": "vision"}'),
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=FAKEKEY==;EndpointSuffix=core.windows.net",
     "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=REDACTED;EndpointSuffix=core.windows.net"),
    ("s3://bucket/key", "s3://bucket/key"),
    ("owner@example.com", "owner@example.com"),
    ("team=vision", "team=vision"),
    ("arn:aws:sagemaker:us-east-1:1:training-job/x", "arn:aws:sagemaker:us-east-1:1:training-job/x"),
])
def test_redact(text, expected):
    assert redact(text) == expected


def test_redact_sql_is_redact():
    import duckdb

    from auditor.providers.redact import redact_sql

    con = duckdb.connect()
    for text in [PRESIGNED, SAS, GCS, WITH_PASSWORD, BARE_SAS, "plain", "a=b", '{"x": "' + SAS + '"}']:
        assert con.execute(f"SELECT {redact_sql('v')} FROM (SELECT ?::VARCHAR AS v)", [text]).fetchone()[0] == \
            redact(text), text


# ---- dependencies -----------------------------------------------------------------------------------------

def test_every_dependency_has_a_lower_bound():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += [r for r in extra if not r.startswith(project["name"])]
    unbounded = [r for r in requirements if not re.search(r"(>=|~=|==)\s*\d", r)]
    assert requirements and unbounded == []
    assert any(r.startswith("pip-audit") for r in project["optional-dependencies"]["test"])


# ---- control characters from input never act in an output (auditor/text.py) -------------------------------

FORGED = "\n::error file=src/app.py,line=1::forged annotation"
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\u202e\x9b2J\x0b\x0c\r"  # NUL makes a CSV binary: in manifests
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _hostile_manifest(folder: Path, name: str = "job.yaml") -> Path:
    text = (REPO / "fixtures" / "manifests" / "kubernetes" / "job-bad.yaml").read_text(encoding="utf-8")
    text = text.replace("name: resnet-train", f"name: {json.dumps('resnet-train' + FORGED + ESCAPES + chr(0))}", 1)
    text = text.replace("labels: {team: vision, owner: bo}", f"labels: {{team: vision, owner: {json.dumps(ESCAPES)}}}")
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gate_outputs(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("gate-control")
    manifest = _hostile_manifest(tmp)
    out = {}
    for fmt in ("text", "json", "sarif", "junit", "github", "markdown"):
        result = invoke("gate", "--policy", REPO / "fixtures" / "manifests" / "policy.yml", "--format", fmt, manifest)
        assert result.exit_code == 1, result.output  # the SPOT001 finding blocks: the job was read, name and all
        out[fmt] = result.stdout
    return out


def test_a_job_name_cannot_forge_a_workflow_command_in_gate_text(gate_outputs):
    """A job name with a line break printed a line starting `::error` in the default output, which GitHub
    Actions runs as a workflow command: a pull request could forge CI annotations."""
    text = gate_outputs["text"]
    assert not [line for line in text.splitlines() if line.lstrip().startswith("::")], text
    assert "resnet-train\\n::error file=src/app.py" in text  # shown, escaped, on its own line
    assert not CONTROL.search(text)


def test_github_annotations_are_only_the_gates_own(gate_outputs):
    lines = gate_outputs["github"].splitlines()
    commands = [line for line in lines if line.startswith("::")]
    assert len(commands) == 1 and commands[0].startswith("::error file="), lines
    assert "::error file=src/app.py" not in commands[0].split("::", 2)[1]  # not in the command's properties
    assert not CONTROL.search(gate_outputs["github"])


def test_gate_markdown_carries_no_command_control_character_or_broken_row(gate_outputs):
    """The Action appends the Markdown to the job summary: a job name's line break, escapes and pipes stay text."""
    md = gate_outputs["markdown"]
    assert not [line for line in md.splitlines() if line.lstrip().startswith("::")], md
    assert not CONTROL.search(md)
    rows = [line for line in md.splitlines() if line.startswith("| blocks |")]
    assert rows and all(row.count(" | ") == 6 for row in rows), rows


def test_junit_with_escapes_in_job_names_always_parses(gate_outputs):
    """ESC from a job name made `--format junit` invalid XML: XML 1.0 allows no C0 character but TAB, LF, CR."""
    from xml.dom import minidom
    from xml.etree import ElementTree

    root = ElementTree.fromstring(gate_outputs["junit"].encode())
    minidom.parseString(gate_outputs["junit"].encode())
    names = [case.get("name") for case in root.iter("testcase")]
    assert any("resnet-train\\n::error" in n and "\\x1b]0;pwned\\x07" in n for n in names), names
    assert not CONTROL.search(gate_outputs["junit"])


def test_sarif_and_json_carry_no_raw_control_character(gate_outputs):
    sarif = json.loads(gate_outputs["sarif"])
    strings = []

    def walk(v):
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, dict):
            [walk(x) for x in (*v.keys(), *v.values())]
        elif isinstance(v, list):
            [walk(x) for x in v]
    walk(sarif["runs"][0]["results"])
    assert strings and not any(CONTROL.search(s) or "\n" in s for s in strings)
    assert not CONTROL.search(gate_outputs["json"])  # JSON escapes every control character it keeps as data
    assert json.loads(gate_outputs["json"])["jobs"][0]["name"].startswith("resnet-train" + FORGED)


@pytest.fixture(scope="module")
def control_report(tmp_path_factory) -> Path:
    """An audit of an export whose tags, resource ids and team carry ANSI escapes, BEL, NUL, C1 and bidi
    characters, and its e-mails (dry run)."""
    tmp = tmp_path_factory.mktemp("control")
    billing = write_cur(tmp / "cur.csv", [{"resource": "i-0esc" + ESCAPES, "owner": "bo" + ESCAPES},
                                          {"resource": "i-0tag", "team": "vision", "project": ESCAPES}])
    policy = tmp / "policy.yml"
    policy.write_text(f"policy: {json.dumps('Control' + ESCAPES)}\nowner: finops@example.com\n"
                      "teams:\n  vision: {lead: lead@example.com}\n", encoding="utf-8")
    out = tmp / "out"
    result = invoke("audit", "--policy", policy, "--out", out, billing)
    assert result.exit_code == 0, result.output
    assert not CONTROL.search(result.output), result.output  # the terminal summary too
    assert invoke("email", "--dry-run", "--policy", policy, out).exit_code == 0
    return out


@pytest.mark.heavy
def test_ansi_escapes_from_tags_reach_no_report(control_report):
    """`cat report.md` retitled and cleared the terminal."""
    for name in ("report.md", "report.html", "findings.csv", "audit.json"):
        text = (control_report / name).read_text(encoding="utf-8")
        assert not CONTROL.search(text), (name, CONTROL.search(text))
    assert "i-0esc\\\\x1b\\]0;pwned" in (control_report / "report.md").read_text(encoding="utf-8")
    doc = json.loads((control_report / "audit.json").read_text(encoding="utf-8"))
    assert "i-0esc" + ESCAPES in {f["resource"] for f in doc["findings"]}  # the data, kept as data
    emails = sorted((control_report / "outbox").glob("*.eml"))
    assert emails
    for eml in emails:
        assert not CONTROL.search(eml.read_bytes().decode("utf-8", "replace").replace("\r\n", "\n")), eml.name


def test_a_file_name_with_line_breaks_forges_no_error_line(tmp_path):
    bad = tmp_path / "export\r\ngpu-auditor: error: forged.csv"
    bad.write_bytes(b"\x00\x01binary")
    result = invoke("inspect", bad)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "\r" not in result.stderr, repr(result.stderr)
    assert result.stderr.startswith("gpu-auditor: error: ") and "export\\r\\ngpu-auditor: error: forged.csv" \
        in result.stderr


# ---- secrets in tags, labels, names and descriptions are masked in every output -----------------------------

TOKENS = {
    "aws-access-key-id": "AKIAZ7EXAMPLEKEY0123",
    "aws-session-key-id": "ASIAZ7EXAMPLEKEY0123",
    "github-token": "ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3",
    "github-pat": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
    "slack-token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "google-api-key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
}
ASSIGNED = {  # (text, the secret part)
    "aws-secret": ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG"),
    "password": ("db password: hunter2hunter2", "hunter2hunter2"),
    "token": ('{"api_token": "tok-0123456789abcdef"}', "tok-0123456789abcdef"),
    "azure": ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;"
              "EndpointSuffix=core.windows.net", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA"),
    "sas": ("sv=2022-11-02&ss=b&sig=c2lnbmF0dXJlMDEyMzQ1Njc4OQ%3D%3D", "c2lnbmF0dXJlMDEyMzQ1Njc4OQ"),
    "url-password": ("https://trainer:s3cretpassw0rd@registry.example.com/v2", "s3cretpassw0rd"),
}


@pytest.mark.parametrize("kind", list(TOKENS))
def test_token_shapes_are_masked(kind):
    from auditor.secret_patterns import mask

    masked = mask(f"ckpt={TOKENS[kind]} (rotated)") if kind != "private-key" else mask(f"key: {TOKENS[kind]} x")
    assert TOKENS[kind] not in masked and "[masked:" in masked, masked


@pytest.mark.parametrize("kind", list(ASSIGNED))
def test_credential_assignments_are_masked(kind):
    from auditor.secret_patterns import mask

    text, secret = ASSIGNED[kind]
    assert secret not in mask(text) and "[masked:" in mask(text), mask(text)


@pytest.mark.parametrize("text", [
    "i-0abc123def4567890", "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc", "p4d.24xlarge", "max_tokens: 4096",
    "sha256 " + "ab" * 32, "fingerprint: " + "0123456789abcdef" * 2 + "01234567", "resnet-train-2026-07-01",
    "s3://bucket/ckpt/model.pt", "token_count=12", "gs://team-vision/checkpoints/step-1000",
    "projects/ml-prod/locations/us-central1/customJobs/1234567890123456789",
])
def test_ordinary_values_are_not_masked(text):
    from auditor.secret_patterns import mask

    assert mask(text) == text


def test_a_secret_under_a_credential_named_key_is_masked_whole():
    from auditor.secret_patterns import mask_deep

    doc = {"tags": {"aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "db_password": "x1", "team": "vision",
                    "s3-key": "checkpoints/model.pt"}}
    assert mask_deep(doc) == {"tags": {"aws_secret": "[masked:secret]", "db_password": "[masked:secret]",
                                       "team": "vision", "s3-key": "checkpoints/model.pt"}}


@pytest.fixture(scope="module")
def secret_tags(tmp_path_factory) -> dict:
    """An audit (and its e-mail, and a gate) over tags, resource ids and job labels that hold credentials,
    with masking on (the default) and off (`outputs: {mask_secrets: false}`)."""
    tmp = tmp_path_factory.mktemp("secret-tags")
    billing = write_cur(tmp / "cur.csv", [
        {"resource": "i-0key " + TOKENS["aws-access-key-id"], "owner": TOKENS["github-token"]},  # TAG001: no team
        {"resource": "i-0jwt", "team": "vision", "owner": TOKENS["slack-token"], "project": TOKENS["jwt"]},
    ])
    runs = {}
    for mode, extra in (("masked", ""), ("unmasked", "outputs: {mask_secrets: false}\n")):
        policy = tmp / f"{mode}.yml"
        policy.write_text("policy: Secret tags\nowner: finops@example.com\nteams:\n  vision: {lead: lead@example.com}\n"
                          + extra, encoding="utf-8")
        out = tmp / mode
        audit = invoke("audit", "--policy", policy, "--out", out, billing)
        assert audit.exit_code == 0, audit.output
        mail = invoke("email", "--dry-run", "--policy", policy, out)
        report = invoke("report", out / "audit.json", "--format", "md")
        manifest = _hostile_manifest(tmp, f"{mode}.yaml")
        manifest.write_text(manifest.read_text().replace("owner: ", f"token: {TOKENS['github-pat']}, owner: "))
        gates = {fmt: invoke("gate", "--policy", policy, "--format", fmt, manifest).stdout
                 for fmt in ("text", "json", "sarif", "junit", "github")}
        runs[mode] = {"out": out, "printed": audit.output + mail.output + report.output, "gates": gates,
                      "doc": json.loads((out / "audit.json").read_text(encoding="utf-8"))}
    return runs


def _everything(run: dict) -> str:
    files = "".join(p.read_bytes().decode("utf-8", "replace") for p in sorted(run["out"].rglob("*")) if p.is_file())
    return files + run["printed"] + "".join(run["gates"].values())


@pytest.mark.heavy
def test_secrets_in_tags_are_masked_in_every_output(secret_tags):
    everything = _everything(secret_tags["masked"])
    for kind in ("aws-access-key-id", "github-token", "slack-token", "jwt", "github-pat"):
        assert TOKENS[kind] not in everything, kind
    assert "[masked:github-token]" in everything and "[masked:aws-access-key-id]" in everything


@pytest.mark.heavy
def test_mask_secrets_false_shows_them_and_report_keeps_to_it(secret_tags):
    run = secret_tags["unmasked"]
    assert TOKENS["aws-access-key-id"] in (run["out"] / "report.md").read_text(encoding="utf-8")
    assert TOKENS["github-token"] in {f["owner"] for f in run["doc"]["findings"]}
    assert TOKENS["aws-access-key-id"] in run["printed"]  # `gpu-auditor report` re-rendered it unmasked too
    assert TOKENS["github-pat"] in run["gates"]["json"]
    assert run["doc"]["policy"]["mask_secrets"] is False


def test_rules_and_fingerprints_are_the_same_masked_or_not(secret_tags):
    """Masking is at the output boundary: the rules read the real values, the fingerprints come from them."""
    masked, unmasked = secret_tags["masked"]["doc"], secret_tags["unmasked"]["doc"]
    assert [(f["rule"], f["fingerprint"]) for f in masked["findings"]] == \
        [(f["rule"], f["fingerprint"]) for f in unmasked["findings"]]
    assert {f["rule"] for f in masked["findings"]} >= {"TAG001"}


@pytest.mark.heavy
def test_an_audit_masked_as_it_is_encoded_is_masked_as_mask_deep_masks(tmp_path):
    """audit_doc masks an audit in the walk that encodes it (Audit.to_dict(masked=True)): the same document as
    masking the encoded one whole, down to a Decimal or a 40-character key under a credential-named key."""
    from dataclasses import replace
    from datetime import datetime
    from decimal import Decimal

    from auditor.core import run_audit
    from auditor.model import Finding, Severity
    from auditor.policy import load_policy
    from auditor.secret_patterns import mask_deep

    billing = write_cur(tmp_path / "cur.csv", [
        {"resource": "i-0key " + TOKENS["aws-access-key-id"], "owner": TOKENS["github-token"]},
        {"resource": "i-0jwt", "team": "vision", "owner": TOKENS["slack-token"], "project": TOKENS["jwt"]}])
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: Secret tags\nowner: finops@example.com\n", encoding="utf-8")
    audit = run_audit(load_policy(policy), [billing])
    odd = Finding(rule="TAG001", name="missing-required-tags", severity=Severity.LOW, resource=TOKENS["jwt"],
                  message=f"token={TOKENS['github-pat']}", entity_type="ResourceSpend", key="odd",
                  evidence={"password": Decimal("12.5"), "aws_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                            TOKENS["aws-access-key-id"]: [("api_key", TOKENS["slack-token"])],
                            "nested": {"client_secret": "x1", "api_key": TOKENS["aws-access-key-id"],
                                       "at": datetime(2026, 7, 1)}, "token": None})
    audit = replace(audit, findings=[*audit.findings, odd],
                    jobs=[{"id": "j1", "name": f"run {TOKENS['github-token']}", "secret": 3}])
    masked = audit.to_dict(masked=True)
    assert masked == mask_deep(audit.to_dict())
    assert json.dumps(masked) == json.dumps(mask_deep(audit.to_dict()))  # the same keys in the same order
    assert masked["findings"][-1]["evidence"]["password"] == "[masked:secret]"
    assert TOKENS["jwt"] not in json.dumps(masked) and TOKENS["jwt"] in json.dumps(audit.to_dict())


# ---- output paths: never through a symbolic link nobody asked to follow ----------------------------------

def _demo_audit(out: Path, *extra: str):
    demo = REPO / "fixtures" / "demo"
    return invoke("audit", "-q", "--policy", demo / "policy.yml", "--inventory", demo / "inventory.json",
                  "--quarter", "2026-Q3", "--out", out, *extra, demo / "billing")


@pytest.mark.heavy
def test_audit_out_through_a_symlink_is_refused(tmp_path):
    """A checked-out repository could plant `audit-report -> /etc`; run as root in CI, that was anywhere."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "audit-report").symlink_to(elsewhere)
    result = _demo_audit(tmp_path / "audit-report")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"gpu-auditor: error: {tmp_path / 'audit-report'}: is a symbolic link (to {elsewhere}); refusing to write "
        "through it (give the real path, or add --follow-symlinks to write where it points)"]
    assert list(elsewhere.iterdir()) == []
    (tmp_path / "dir-link").symlink_to(elsewhere)
    result = _demo_audit(tmp_path / "dir-link" / "report")
    assert result.exit_code == 2 and "goes through a symbolic link: " in result.stderr
    assert list(elsewhere.iterdir()) == []
    assert _demo_audit(tmp_path / "audit-report", "--follow-symlinks").exit_code == 0
    assert (elsewhere / "audit.json").is_file() and (tmp_path / "audit-report").is_symlink()


def test_report_out_and_gate_output_through_a_symlink_are_refused(demo_folder, tmp_path):
    shutil.copytree(demo_folder, tmp_path / "audit")  # an audit's folder: the session's demo (conftest.demo_run)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "gate.sarif").symlink_to(victim)
    manifests = REPO / "fixtures" / "manifests"
    gate = ["gate", "--policy", manifests / "policy.yml", "--format", "sarif", "--output", tmp_path / "gate.sarif",
            manifests / "kubernetes" / "job-good.yaml"]
    result = invoke(*gate)
    assert result.exit_code == 2 and "is a symbolic link" in result.stderr and "--follow-symlinks" in result.stderr
    assert victim.read_text() == "precious\n"
    assert invoke(*gate, "--follow-symlinks").exit_code == 0
    assert json.loads(victim.read_text())["version"] == "2.1.0" and (tmp_path / "gate.sarif").is_symlink()
    (tmp_path / "report-link").symlink_to(tmp_path / "audit")
    result = invoke("report", tmp_path / "audit" / "audit.json", "--out", tmp_path / "report-link")
    assert result.exit_code == 2 and "is a symbolic link" in result.stderr
    result = invoke("email", "--dry-run", "--policy", REPO / "fixtures" / "demo" / "policy.yml", "--outbox",
                    tmp_path / "report-link", tmp_path / "audit")
    assert result.exit_code == 2 and "is a symbolic link" in result.stderr


@pytest.mark.heavy
def test_one_atomic_writer():
    """report.py, ci_formats.py, mail/ and pull.py write through auditor/atomic.py: no other rename."""
    for path in _shipped_modules():
        if path.name == "atomic.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = {_name(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        assert not calls & {"os.replace", "os.rename"}, path


def test_policy_init_through_a_symlink_is_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "gpu-policy.yml").symlink_to(victim)
    result = invoke("policy", "init", "--force", tmp_path / "gpu-policy.yml")
    assert result.exit_code == 2 and "is a symbolic link" in result.stderr
    assert victim.read_text() == "precious\n"


BAD = REPO / "fixtures" / "bad"


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit", "github"])
def test_the_forged_annotation_manifest_of_the_corpus(fmt):
    result = invoke("gate", "--policy", REPO / "fixtures" / "manifests" / "policy.yml", "--format", fmt,
                    BAD / "manifest-forged-annotation.yaml")
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert not CONTROL.search(out) and "ghp_" not in out
    assert [line for line in out.splitlines() if line.startswith("::")] == \
        ([line for line in out.splitlines() if line.startswith("::error file=")] if fmt == "github" else [])
    if fmt == "junit":
        from xml.etree import ElementTree
        ElementTree.fromstring(out.encode())


@pytest.mark.heavy
def test_the_secret_and_escape_tags_export_of_the_corpus(tmp_path):
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: p\nowner: finops@example.com\n", encoding="utf-8")
    result = invoke("audit", "--policy", policy, "--out", tmp_path / "out", BAD / "cur-secret-and-escape-tags.csv")
    assert result.exit_code == 0, result.output
    for path in [*(tmp_path / "out").iterdir()]:
        text = path.read_text(encoding="utf-8")
        assert not CONTROL.search(text), path.name
        for secret in ("AKIAZ7EXAMPLEKEY0123", "xoxb-1234", "ghp_a1B2", "eyJhbGciOiJIUzI1NiJ9."):
            assert secret not in text, (path.name, secret)
    assert not CONTROL.search(result.output)


@settings(max_examples=300, deadline=None)
@given(words=st.sets(st.text("abk_-.:/é", min_size=1, max_size=5), min_size=1, max_size=12),
       text=st.text("abk_-.:/éx ", max_size=30))
def test_a_tree_of_words_matches_what_their_alternation_matches(words, text):
    """secret_patterns.literal_trie: the words' tree of prefixes finds a word where the plain alternation does,
    at the same place (a word that is a prefix of another, one letter, repeated letters included)."""
    from auditor.secret_patterns import literal_trie

    tree = re.compile(literal_trie(words))
    alternation = re.compile("|".join(sorted(map(re.escape, words), key=len, reverse=True)))
    found, expected = tree.search(text), alternation.search(text)
    assert (found is None) == (expected is None)
    if found and expected:
        assert found.start() == expected.start()


def test_the_triggers_are_found_as_before():
    """Each trigger alone, inside a word, and text with none."""
    from auditor.secret_patterns import _ANY_TRIGGER, _TRIGGERS

    for trigger in {t for ts in _TRIGGERS.values() for t in ts}:
        assert _ANY_TRIGGER.search(trigger) and _ANY_TRIGGER.search(f"x{trigger}y")
    assert _ANY_TRIGGER.search("i-0abc lacks tags owner") is None

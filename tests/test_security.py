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
import tomllib
from email import policy as email_policy
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

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
    assert {f["resource"] for f in doc["findings"]} == {line["resource"] for line in HOSTILE_LINES}
    assert ATTRIBUTE in {f["team"] for f in doc["findings"]}


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
        safe = {"SafeLoader", "CSafeLoader"} | {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                                                and {_name(b) for b in node.bases} & {"yaml.SafeLoader",
                                                                                       "yaml.CSafeLoader"}}
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

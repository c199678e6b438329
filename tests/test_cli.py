"""The command line, driven in-process with click's CliRunner: help, rules, policy, and the demo audit."""

from __future__ import annotations

import csv
import gzip
import json
import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from auditor import __version__
from auditor.cli import cli

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo"
POLICIES = REPO / "fixtures" / "policies"
RULE_IDS = ("GPU001", "GPU002", "TAG001", "NET001", "SPOT001")
DOC_SECTIONS = ("What it does", "Why it matters", "Example", "How to fix")
KNOWN_COMMANDS = {("inspect",), ("audit",), ("rules",), ("rules", "list"), ("rules", "explain"), ("policy",),
                  ("policy", "validate"), ("policy", "init")}


def run(*args: str, **kwargs):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, **kwargs)


def demo_args(out: Path, *extra: str) -> list[str]:
    return ["audit", "--policy", str(DEMO / "policy.yml"), "--inventory", str(DEMO / "inventory.json"),
            "--out", str(out), *extra, str(DEMO / "billing")]


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gpu-auditor: error: ")
    assert "Traceback" not in result.output
    return lines[0]


# ---- help and version -------------------------------------------------------------------------------


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # a command's module is imported when asked for (cli/__init__.py)
        cmd = group.get_command(ctx, name)
        out.append(prefix + (name,))
        if isinstance(cmd, click.Group):
            out.extend(_commands(cmd, prefix + (name,)))
    return out


COMMANDS = _commands(cli)


def test_every_known_command_is_registered():
    assert KNOWN_COMMANDS <= set(COMMANDS)


@pytest.mark.parametrize("path", [()] + COMMANDS, ids=lambda p: " ".join(p) or "gpu-auditor")
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(path, flag):
    result = run(*path, flag)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: ")
    assert " ".join(("cli",) + path) in result.stdout.splitlines()[0]
    assert result.stderr == ""


def test_audit_help_lists_the_required_options_first_and_the_live_pull_apart():
    out = run("audit", "--help").stdout
    sections = [line for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert sections[-3:] == ["Required:", "Options:", "Live pull (audit --live):"], sections
    required = out[out.index("Required:"):out.index("Options:")]
    assert "--policy" in required and "--quarter" not in required
    live = out[out.index("Live pull (audit --live):"):]
    assert "--provider" in live and "--kubeconfig" in live and "--policy" not in live
    assert "--provider" not in out[out.index("Options:"):out.index("Live pull")]


def test_top_level_help_lists_commands_and_exit_codes():
    out = run("--help").stdout
    for name in ("inspect", "audit", "rules", "policy"):
        assert re.search(rf"^\s+{name}\s", out, re.M), name
    assert "Exit codes" in out


def test_version():
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"gpu-auditor, version {__version__}"


def test_no_command_shows_usage():
    result = CliRunner().invoke(cli, [])
    assert result.exit_code in (0, 2)
    assert "Usage:" in result.output


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(cli, ["audti"])
    assert result.exit_code == 2
    assert "No such command" in result.output


# ---- rules --------------------------------------------------------------------------------------------


def test_rules_list():
    result = run("rules", "list")
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    ids = [ln.split()[0] for ln in lines if not ln.startswith(" ")]
    assert set(RULE_IDS) <= set(ids)
    assert ids == sorted(ids)
    for name in ("idle-gpu", "oversized-gpu", "missing-required-tags", "cross-region-egress",
                 "spot-without-checkpoint"):
        assert name in result.stdout


def test_rules_list_json():
    result = run("rules", "list", "--json")
    assert result.exit_code == 0
    items = json.loads(result.stdout)
    by_id = {r["id"]: r for r in items}
    assert set(RULE_IDS) <= set(by_id)
    assert by_id["GPU001"]["name"] == "idle-gpu"
    assert by_id["GPU001"]["severity"] == "high"
    assert by_id["GPU001"]["clause"] == "idle"
    assert by_id["GPU001"]["entity"] == "GpuAsset"
    assert by_id["GPU001"]["options"] == {"max_mean_util_pct": 10, "min_hours": 24}
    assert by_id["SPOT001"]["clause"] == "spot_checkpoint"
    for r in items:
        assert r["summary"]
        assert set(r) >= {"id", "name", "severity", "clause", "entity", "summary", "options"}


@pytest.mark.parametrize("key", ["GPU001", "idle-gpu", "gpu001", " GPU001 "])
def test_rules_explain(key):
    result = run("rules", "explain", key)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("GPU001 idle-gpu (high; policy clause 'idle'")
    for section in DOC_SECTIONS:
        assert f"\n{section}\n{'-' * len(section)}\n" in out, section
    assert "max_mean_util_pct (default 10)" in out


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rules_explain_every_rule(rule_id):
    result = run("rules", "explain", rule_id)
    assert result.exit_code == 0
    assert result.stdout.startswith(rule_id + " ")
    for section in DOC_SECTIONS:
        assert f"\n{section}\n" in result.stdout


def test_rules_explain_unknown():
    result = run("rules", "explain", "NOPE")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "'NOPE'" in line
    assert "GPU001" in line
    assert result.stdout == ""


# ---- policy -------------------------------------------------------------------------------------------


def test_policy_init_then_validate(tmp_path):
    target = tmp_path / "gpu-policy.yml"
    result = run("policy", "init", target)
    assert result.exit_code == 0, result.output
    assert target.is_file()
    assert f"wrote {target}" in result.stdout
    checked = run("policy", "validate", target)
    assert checked.exit_code == 0, checked.output
    assert f"{target}: ok:" in checked.stdout
    from auditor.registry import iter_clauses

    assert f"{len(list(iter_clauses()))} clauses" in checked.stdout


def test_policy_init_default_name(tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli, ["policy", "init"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "gpu-policy.yml").is_file()
    assert runner.invoke(cli, ["policy", "validate", "gpu-policy.yml"]).exit_code == 0


def test_policy_init_refuses_to_overwrite(tmp_path):
    target = tmp_path / "policy.yml"
    target.write_text("my own policy\n")
    result = run("policy", "init", target)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert str(target) in line and "--force" in line
    assert target.read_text() == "my own policy\n"
    forced = run("policy", "init", "--force", target)
    assert forced.exit_code == 0
    assert target.read_text().startswith("# The team's written GPU policy")
    assert run("policy", "validate", target).exit_code == 0


def test_policy_validate_valid_fixture():
    result = run("policy", "validate", POLICIES / "valid.yml")
    assert result.exit_code == 0
    assert "'Test ML GPU policy' version 2026.3, 5 clauses, 2 teams, 2 waivers" in result.stdout
    # the idle-gpu waiver in valid.yml expired on 2026-06-30
    assert re.search(r"valid\.yml:47: waiver for GPU001 on i-0old expired on 2026-06-30", result.stderr)


def test_policy_validate_demo():
    result = run("policy", "validate", DEMO / "policy.yml")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", ["wrong_type.yml", "out_of_range.yml", "unknown_option.yml",
                                  "missing_owner.yml", "bad_waiver_date.yml", "unknown_waiver_rule.yml",
                                  "duplicate_key.yml", "alias.yml", "not_yaml.yml", "top_level_list.yml",
                                  "unknown_top_key.yml", "unknown_clause.yml"])
def test_policy_validate_invalid(name):
    path = POLICIES / name
    result = run("policy", "validate", path)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert re.match(rf"gpu-auditor: error: {re.escape(str(path))}:\d+: ", line), line
    assert result.stdout == ""


def test_policy_validate_names_the_line():
    result = run("policy", "validate", POLICIES / "wrong_type.yml")
    assert f"{POLICIES / 'wrong_type.yml'}:7: clauses.idle.min_hours: expected a number" in result.stderr
    result = run("policy", "validate", POLICIES / "unknown_option.yml")
    assert f"{POLICIES / 'unknown_option.yml'}:6: " in result.stderr
    assert "did you mean 'max_mean_util_pct'" in result.stderr


def test_policy_validate_empty_and_missing(tmp_path):
    result = run("policy", "validate", POLICIES / "empty.yml")
    assert result.exit_code == 2
    assert "empty" in one_error_line(result)
    result = run("policy", "validate", tmp_path / "none.yml")
    assert result.exit_code == 2
    assert "not found" in one_error_line(result)


def test_policy_validate_impossible_date(tmp_path):
    p = tmp_path / "feb30.yml"
    p.write_text("policy: P\nowner: o@example.com\nwaivers:\n"
                 "  - {rule: GPU001, resource: x, reason: r, owner: o, expires: 2027-02-30}\n")
    result = run("policy", "validate", p)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"{p}:4: waivers[0].expires: " in line
    assert "internal error" not in line


# ---- the demo audit -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(demo_run):
    """The session's demo audit (conftest.demo_run: `audit -q`, 2026-Q3, as of 2026-10-15, with the inventory)."""
    return demo_run, demo_run.folder, json.loads((demo_run.folder / "audit.json").read_text(encoding="utf-8"))


def test_demo_audit_exits_clean_and_writes_its_files(demo):
    result, out, _ = demo
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert names == {"audit.json", "report.html", "report.md", "findings.csv", "jobs.csv",
                     "actions.csv"}  # and no temp files left
    for p in out.iterdir():
        assert p.stat().st_size > 0
    assert "GPU spend audit 2026-Q3 · Example ML GPU policy" in result.stdout
    assert "total spend       $341,964.32" in result.stdout
    assert re.search(r"wrote .*audit\.json, .*report\.html, .*report\.md, .*findings\.csv", result.stdout)
    assert "Traceback" not in result.output


def test_report_with_no_flags_prints_the_markdown_its_help_promises(demo):
    """`report audit.json` alone: the Markdown report printed (what `--format md` prints), nothing written."""
    _, out, _ = demo
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    result = run("report", str(out / "audit.json"))
    assert result.exit_code == 0, result.output
    assert result.stdout == run("report", str(out / "audit.json"), "--format", "md").stdout
    assert result.stdout.startswith("# GPU spend audit 2026-Q3")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert "md printed without" in run("report", "--help").stdout


def test_demo_audit_json_header(demo):
    _, _, doc = demo
    assert doc["schema"] == "gpu-auditor/audit@1"
    assert doc["tool"] == {"name": "gpu-auditor", "version": __version__}
    assert doc["window"] == {"start": "2026-07-01T00:00:00Z", "end": "2026-10-01T00:00:00Z", "label": "2026-Q3"}
    assert doc["policy"]["name"] == "Example ML GPU policy"
    assert doc["partial"] is False
    assert len(doc["inputs"]["billing"]) == 4
    assert {b["format"] for b in doc["inputs"]["billing"]} == {"aws-cur", "focus-1.0"}


@pytest.mark.heavy
@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_demo_finds_every_rule_with_dollars(demo, rule_id):
    _, _, doc = demo
    found = [f for f in doc["findings"] if f["rule"] == rule_id]
    assert found, f"no {rule_id} finding in the demo audit"
    for f in found:
        amounts = [f[k] for k in ("cost", "monthly_savings") if f[k] is not None]
        assert amounts, f
        for a in amounts:
            assert re.fullmatch(r"-?\d+\.\d{2}", a), a
            assert Decimal(a) > 0
        assert f["currency"] == "USD"


def test_demo_planted_findings(demo):
    _, _, doc = demo
    flagged = {(f["rule"], f["resource"]) for f in doc["findings"]}
    assert ("GPU001", "i-0a1f3c5e7b9d24680") in flagged
    assert ("GPU002", "i-0c2e4a6b8d0f13579") in flagged
    for r in ("i-0e5a7c9b1d3f57924", "i-0f6b8d0a2c4e68035", "vol-07c3e9a1b5d2f4e68", "ml-scratch-7f3a9c",
              "i-0a7c9e1b3d5f79146"):
        assert ("TAG001", r) in flagged, r
    assert any(rule == "NET001" and "us-east-1->us-west-2" in res for rule, res in flagged)
    for job in ("nlp-llama-ft-spot-0814", "vision-sam-ft-spot-0909"):
        assert ("SPOT001", f"arn:aws:sagemaker:us-east-1:444455556666:training-job/{job}") in flagged, job
    # not to be flagged
    for r in ("i-0d4f6a8c0e2b46813", "i-0b8d0f2a4c6e8a257", "i-0c9e1a3b5d7f9b368"):
        assert not any(res == r for _, res in flagged), r
    assert not any("summarizer-v4" in res or "eval-harness" in res for _, res in flagged)


def test_demo_waived_benchmark_finding(demo):
    _, _, doc = demo
    bench = [f for f in doc["findings"] if f["resource"] == "i-0bench4f1a2b3c4d5"]
    assert len(bench) == 1
    assert bench[0]["rule"] == "GPU002"
    assert bench[0]["waived"] is True
    assert bench[0]["waiver"]["expires"] == "2027-03-31"
    assert bench[0]["waiver"]["owner"] == "lead-platform@example.com"
    assert doc["summary"]["findings"]["waived"] == 1
    assert doc["summary"]["findings"]["total"] == sum(1 for f in doc["findings"] if not f["waived"])


def test_demo_expired_waiver(demo):
    result, _, doc = demo
    by_rule = {w["rule"]: w for w in doc["waivers"]}
    assert by_rule["GPU002"]["status"] == "active"
    expired = by_rule["GPU001"]
    assert expired["status"] == "expired"
    assert expired["resource"] == "i-0a1f3c5e7b9d24680"
    assert expired["expires"] == "2026-08-31"
    assert isinstance(expired["line"], int)
    idle = [f for f in doc["findings"] if f["rule"] == "GPU001" and f["resource"] == "i-0a1f3c5e7b9d24680"]
    assert idle and idle[0]["waived"] is False
    warning = "waiver for GPU001 on i-0a1f3c5e7b9d24680 expired on 2026-08-31"
    assert f"warning: {warning}" in result.stderr
    assert any(warning in w for w in doc["warnings"])


@pytest.mark.heavy
def test_demo_as_of_before_expiry_keeps_the_waiver(tmp_path):
    result = run(*demo_args(tmp_path, "-q", "--quarter", "2026-Q3", "--as-of", "2026-08-15", "--rule", "GPU001"))
    assert result.exit_code == 0
    doc = json.loads((tmp_path / "audit.json").read_text())
    assert [f["waived"] for f in doc["findings"]] == [True]
    assert "expired" not in result.stderr


@pytest.mark.heavy
def test_demo_fail_on_high(tmp_path):
    result = run(*demo_args(tmp_path, "-q", "--quarter", "2026-Q3", "--as-of", "2026-10-15", "--fail-on", "high"))
    assert result.exit_code == 1
    assert (tmp_path / "report.html").is_file()  # the report is written before the exit code is decided
    doc = json.loads((tmp_path / "audit.json").read_text())
    high = sum(1 for f in doc["findings"] if f["severity"] in ("high", "critical") and not f["waived"])
    assert result.stderr.strip().splitlines()[-1] == f"fail on high: {high} finding(s) at or above high"


@pytest.mark.heavy
def test_demo_fail_on_critical(demo, tmp_path):
    _, _, doc = demo
    assert doc["summary"]["findings"]["by_severity"]["critical"] == 0
    result = run(*demo_args(tmp_path, "-q", "--quarter", "2026-Q3", "--as-of", "2026-10-15",
                            "--fail-on", "critical"))
    assert result.exit_code == 0


def test_demo_fail_on_bad_choice(tmp_path):
    result = CliRunner().invoke(cli, demo_args(tmp_path, "--quarter", "2026-Q3", "--fail-on", "severe"))
    assert result.exit_code == 2
    assert not (tmp_path / "audit.json").exists()


@pytest.mark.heavy
def test_demo_rule_selects_only_that_rule(tmp_path):
    result = run(*demo_args(tmp_path, "-q", "--quarter", "2026-Q3", "--rule", "TAG001"))
    assert result.exit_code == 0
    doc = json.loads((tmp_path / "audit.json").read_text())
    assert doc["findings"]
    assert {f["rule"] for f in doc["findings"]} == {"TAG001"}
    status = {c["rule"]: c["status"] for c in doc["clauses"]}
    assert status["TAG001"] == "broken"
    assert {status[r] for r in RULE_IDS if r != "TAG001"} == {"disabled"}


@pytest.mark.heavy
def test_demo_rule_repeatable_and_by_name(tmp_path):
    result = run(*demo_args(tmp_path, "-q", "--quarter", "2026-Q3", "--rule", "idle-gpu", "--rule", "net001"))
    assert result.exit_code == 0
    doc = json.loads((tmp_path / "audit.json").read_text())
    assert {f["rule"] for f in doc["findings"]} == {"GPU001", "NET001"}


@pytest.mark.heavy
def test_demo_unknown_rule_is_an_input_error(tmp_path):
    result = run(*demo_args(tmp_path, "-q", "--quarter", "2026-Q3", "--rule", "TAG01"))
    assert result.exit_code == 2
    assert "TAG01" in one_error_line(result)


def test_bad_quarter(tmp_path):
    result = run(*demo_args(tmp_path, "--quarter", "2026-Q5"))
    assert result.exit_code == 2
    assert "2026-Q5" in one_error_line(result)
    assert not (tmp_path / "audit.json").exists()


@pytest.mark.parametrize("extra", [
    ["--quarter", "2026-Q3", "--since", "2026-07-01"],
    ["--quarter", "2026-Q3", "--until", "2026-10-01"],
    ["--quarter", "2026-Q3", "--since", "2026-07-01", "--until", "2026-10-01"],
    ["--since", "2026-07-01"],
])
def test_window_options_conflict(tmp_path, extra):
    result = CliRunner().invoke(cli, demo_args(tmp_path, *extra))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "--since" in result.stderr  # one line naming the options
    assert "Traceback" not in result.output
    assert not (tmp_path / "audit.json").exists()


@pytest.mark.heavy
def test_since_until_window(tmp_path):
    result = run(*demo_args(tmp_path, "-q", "--since", "2026-07-01", "--until", "2026-08-01"))
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "audit.json").read_text())
    assert doc["window"]["start"] == "2026-07-01T00:00:00Z"
    assert doc["window"]["end"] == "2026-08-01T00:00:00Z"
    july = next(b for b in doc["inputs"]["billing"] if b["path"].endswith("aws-cur-2026-07.csv"))
    # July's CUR file is wholly inside the window; the quarter's FOCUS file adds its July lines
    assert Decimal(doc["summary"]["billed_cost"]["USD"]) > Decimal(july["billed_cost"]["USD"])


@pytest.mark.parametrize("extra", [["--since", "2026-08-01", "--until", "2026-07-01"],
                                   ["--since", "someday", "--until", "2026-07-01"],
                                   ["--quarter", "2026-Q3", "--as-of", "someday"],
                                   # billing is summed per UTC day, so a window is whole days
                                   ["--since", "2026-07-01T12:00", "--until", "2026-08-01"]])
def test_bad_dates(tmp_path, extra):
    result = run(*demo_args(tmp_path, *extra))
    assert result.exit_code == 2
    one_error_line(result)
    assert ("--until must be after --since" if extra[1] == "2026-08-01" else "use a date like 2026-07-01") \
        in result.output


def test_audit_with_invalid_policy(tmp_path):
    args = demo_args(tmp_path, "--quarter", "2026-Q3")
    args[args.index("--policy") + 1] = str(POLICIES / "wrong_type.yml")
    result = run(*args)
    assert result.exit_code == 2
    assert f"{POLICIES / 'wrong_type.yml'}:7: " in one_error_line(result)
    assert not (tmp_path / "audit.json").exists()


def test_audit_missing_billing(tmp_path):
    result = run(*demo_args(tmp_path, "--quarter", "2026-Q3")[:-1], tmp_path / "nothing-here")
    assert result.exit_code == 2
    assert "no such file" in one_error_line(result)


def _csv_rows(path: Path):
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
        yield from csv.DictReader(fh)


COST_COLUMNS = ("lineItem/UnblendedCost", "line_item_unblended_cost", "BilledCost")


def independent_total(folder: Path) -> Decimal:
    """The billed total over the demo exports, read with the csv module and Decimal only."""
    total = Decimal(0)
    files = sorted(p for p in folder.iterdir() if p.name.endswith((".csv", ".csv.gz")))
    assert any(p.name.endswith(".gz") for p in files)
    for path in files:
        rows = list(_csv_rows(path))
        column = [c for c in COST_COLUMNS if c in rows[0]]
        assert len(column) == 1, (path, column)
        total += sum((Decimal(r[column[0]]) for r in rows if r[column[0]]), Decimal(0))
    return total


def _window_and_files(doc):
    def t(text):
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    start, end = t(doc["window"]["start"]), t(doc["window"]["end"])
    inside = [b for b in doc["inputs"]["billing"] if start <= t(b["period_start"]) and t(b["period_end"]) <= end]
    return inside


def test_demo_summary_total_equals_the_exports(demo):
    _, _, doc = demo
    inside = _window_and_files(doc)
    assert len(inside) == 4  # the demo's four files each lie wholly inside 2026-Q3
    summary = Decimal(doc["summary"]["billed_cost"]["USD"])
    exact = independent_total(DEMO / "billing")
    assert summary == exact.quantize(Decimal("0.01"))  # rounded once, from the exact sum
    assert summary == Decimal("341964.32")  # the demo README's total
    per_file = sum(Decimal(b["billed_cost"]["USD"]) for b in inside)
    # each file's amount is rounded once on its own, so their sum may differ by half a cent a file
    assert abs(per_file - summary) <= Decimal("0.005") * len(inside)


@pytest.mark.heavy
def test_inspect_demo_json():
    result = run("inspect", "--json", DEMO / "billing")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert len(doc["files"]) == 4
    assert {f["format"] for f in doc["files"]} == {"aws-cur", "focus-1.0"}
    assert sum(f["rows"] for f in doc["files"]) == 3991
    for f in doc["files"]:
        assert re.fullmatch(r"\d+\.\d{2}", f["billed_cost"]["USD"])


@pytest.mark.parametrize("end", ["", ",ChargePeriodEnd"])
def test_inspect_an_export_whose_lines_state_no_end(tmp_path, end):
    """FOCUS without ChargePeriodEnd (or with it empty on every line): inspect stopped with an internal error."""
    path = tmp_path / "focus.csv"
    path.write_text(f"BilledCost,ChargePeriodStart,BillingCurrency{end}\n1.50,2026-07-01T00:00:00Z,USD{end and ','}\n"
                    f"2.25,2026-07-02T00:00:00Z,USD{end and ','}\n")
    result = run("inspect", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[3:5] == ["  period      from 2026-07-01 00:00 UTC (no line states its end)",
                                               "  billed      $3.75  (sum of BilledCost, per currency)"]


@pytest.mark.parametrize(("command", "out", "what", "option"), [
    ("audit", "billing/report", "report", "--out"), ("audit", "billing", "report", "--out"),
    ("export", "billing/chargeback", "FOCUS export", "--focus")])
def test_an_output_folder_inside_the_billing_folder_is_refused(tmp_path, command, out, what, option):
    """The next run read the report's CSVs back as billing (refused), or the FOCUS export as more billing (counted
    twice): refused before anything is read or written."""
    billing = tmp_path / "billing"
    billing.mkdir()
    (billing / "cur.csv").write_bytes((REPO / "fixtures" / "billing" / "cur-gpu-spot.csv").read_bytes())
    before = sorted(p.name for p in billing.rglob("*"))
    args = ["audit", "--out"] if command == "audit" else ["export", "--focus"]
    result = run(*args, tmp_path / out, "--policy", DEMO / "policy.yml", billing)
    assert result.exit_code == 2
    assert one_error_line(result) == (f"gpu-auditor: error: {tmp_path / out}: is inside the billing folder {billing}, "
                                      f"where the next run would read the {what} as billing: give {option} a folder "
                                      "outside it")
    assert sorted(p.name for p in billing.rglob("*")) == before


def test_policy_init_into_missing_folder(tmp_path):
    target = tmp_path / "no-such-folder" / "gpu-policy.yml"
    result = run("policy", "init", target)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "internal error" not in line
    assert str(target) in line


@pytest.mark.parametrize("command", [["policy", "validate"], ["gate", "--policy"]])
def test_a_malformed_option_is_refused_alike_by_validate_and_the_gate(tmp_path, command):
    """A regular expression that does not compile is refused when the policy loads, by `policy validate` and by
    the gate alike, naming the file and the option's line; the gate checks no manifest."""
    policy = tmp_path / "policy.yml"
    policy.write_text("policy: p\nowner: o@example.com\nclauses:\n  tagging:\n    text: jobs carry an owner\n"
                      "    label_patterns:\n      owner: '[A-Z+-('\n", encoding="utf-8")
    manifests = [str(REPO / "fixtures" / "manifests" / "kubernetes")] if command[0] == "gate" else []
    result = run(*command, policy, *manifests)
    assert result.exit_code == 2
    assert one_error_line(result) == (
        f"gpu-auditor: error: {policy}:7: clauses.tagging.label_patterns.owner: '[A-Z+-(' is not a valid regular "
        "expression: bad character range +-( at position 4")

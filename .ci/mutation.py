"""Mutation testing of the core with mutmut: small deliberate bugs in the modules where a wrong line means a wrong
dollar or a wrong verdict, each run against the fast tests that state that module's behaviour.

    python .ci/mutation.py                 # the core modules a change touches (since HEAD's first parent)
    python .ci/mutation.py --ci            # of those, the gated ones (CI, on every run)
    python .ci/mutation.py --all           # every core module (weekly, or on demand)
    python .ci/mutation.py auditor/window.py rules/GPU001_idle_gpu.py
    python .ci/mutation.py --all --write   # and write the scores into docs/mutation.md

A mutant that survives is a line no test looks at: kill it with a test that states the behaviour, or, where the
mutant cannot change what the code does (an equivalent mutant), record it in .ci/mutation-equivalents.yml with
the reason. The run fails on a survivor that is neither. Each module is mutated in a copy of the tree with rules/
and reports/ moved under auditor/ (where the installed package has them), so the mutated copy is the one imported.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EQUIVALENTS = REPO / ".ci" / "mutation-equivalents.yml"
DOC = REPO / "docs" / "mutation.md"
BEGIN, END = "<!-- scores: written by .ci/mutation.py --write -->", "<!-- end of scores -->"

# Each core module and the fast tests that state its behaviour (the tests mutmut runs against its mutants).
CORE: dict[str, list[str]] = {
    "auditor/window.py": ["tests/test_window.py"],
    "auditor/figures.py": ["tests/test_figures.py"],
    "auditor/policy.py": ["tests/test_policy.py", "tests/test_policy_refusals.py", "tests/test_policy_markdown.py",
                          "tests/test_policy_rates.py", "tests/test_policy_build.py"],
    "auditor/core.py": ["tests/test_core.py", "tests/test_policy.py", "tests/test_tag_keys_read.py"],
    "auditor/gate.py": ["tests/test_gate.py", "tests/test_gate_waivers.py"],
    "auditor/tables/shared_gpus.py": ["tests/test_shared_gpus.py"],
    "auditor/tables/breakdown.py": ["tests/test_breakdown.py", "tests/test_summary.py"],
    "auditor/tables/summary.py": ["tests/test_summary.py"],
    "auditor/providers/billing/aws.py": ["tests/test_readers_cur2.py", "tests/test_readers_cur_lines.py"],
    "auditor/providers/billing/gcp.py": ["tests/test_readers_gcp.py"],
    "auditor/providers/billing/azure.py": ["tests/test_readers_azure_lines.py"],
    "auditor/providers/billing/focus.py": ["tests/test_readers.py", "tests/test_readers_focus_lines.py"],
    "auditor/providers/billing/avro.py": ["tests/test_readers_avro.py"],
    "auditor/providers/billing/csv_dialect.py": ["tests/test_csv_dialect.py"],
    "auditor/providers/billing/detect.py": ["tests/test_detect.py"],
}
# Every rule, against its own YAML cases (fixtures/rules/<ID>.yml, run by tests/test_rule_cases.py).
for path in sorted((REPO / "rules").glob("[A-Z]*[0-9]_*.py")):
    CORE[f"rules/{path.name}"] = ["tests/test_rule_cases.py", "-k", path.name.split("_")[0]]
# TAG001's SQL narrows to what its candidates() says (tests/test_tag_candidates.py states it, in a test named for it).
CORE["rules/TAG001_missing_required_tags.py"][1:1] = ["tests/test_tag_candidates.py"]
# GPU006's too (tests/test_gpu_candidates.py, its tests named for it).
CORE["rules/GPU006_forgotten_gpu_in_billing.py"][1:1] = ["tests/test_gpu_candidates.py"]

# The modules CI mutates when a change touches them (.ci/run: --ci): those whose every surviving mutant is killed or
# explained in .ci/mutation-equivalents.yml. A module joins when its survivors are dealt with; --all measures the rest.
GATED = [
    "auditor/window.py",
    "auditor/figures.py",
    "auditor/policy.py",
    "auditor/gate.py",
    "auditor/tables/shared_gpus.py",
    "rules/GPU001_idle_gpu.py",
    "rules/GPU004_unknown_gpu_type.py",
    "rules/NET001_cross_region_egress.py",
    "rules/OFF001_interactive_gpu_off_hours.py",
    "rules/POL001_expired_waiver.py",
    "rules/REG001_region_not_allowed.py",
    "rules/REG002_training_far_from_data.py",
    "rules/SPOT001_spot_without_checkpoint.py",
    "rules/SPOT002_spot_opportunity.py",
    "rules/SPOT003_spot_configuration.py",
    "rules/SPOT004_spot_server_unprotected.py",
    "rules/STO001_checkpoint_storage_growth.py",
    "rules/TAG002_job_missing_labels.py",
    "rules/TAG003_untagged_spend_share.py",
    "auditor/providers/billing/aws.py",
    "auditor/providers/billing/gcp.py",
    "auditor/providers/billing/azure.py",
    "rules/BUD001_team_over_budget.py",
    "rules/COM001_unused_commitment.py",
    "rules/GPU006_forgotten_gpu_in_billing.py",
    "rules/GPU007_stopped_gpu_still_billed.py",
    "rules/GPU002_oversized_gpu.py",
    "rules/GPU005_forgotten_gpu_capacity.py",
    "rules/COM002_unused_capacity_reservation.py",
    "rules/COM004_uncommitted_gpu_baseline.py",
    "rules/COM003_commitment_expiring.py",
    "rules/KUBE003_unallocated_gpu.py",
    "rules/KUBE002_oversized_gpu_slice.py",
    "rules/KUBE001_idle_gpu_slice.py",
    "rules/GPU003_disallowed_gpu_type.py",
    "rules/HPO001_sweep_without_limits.py",
    "rules/BUD002_job_cost_cap.py",
    "rules/ANOM001_gpu_spend_anomaly.py",
    "rules/TAG001_missing_required_tags.py",
    "auditor/tables/breakdown.py",
    "auditor/core.py",
    "auditor/providers/billing/focus.py",
    "auditor/providers/billing/csv_dialect.py",
    "auditor/providers/billing/avro.py",
    "auditor/tables/summary.py",
    "auditor/providers/billing/detect.py",
]

COMMAND = ".venv/bin/python .ci/mutation.py"  # how a row of the scores table is measured again
LINE = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+)$")


def touched_by(module: str) -> set[str]:
    """The files whose change can change a module's score: the module, its tests, and a rule's YAML cases."""
    files = {module, *(t for t in CORE[module] if t.startswith("tests/"))}
    if module.startswith("rules/"):
        files.add(f"fixtures/rules/{Path(module).name.split('_')[0]}.yml")
    return files


def changed_modules(base: str) -> list[str]:
    """The core modules a change touches: those whose module, tests or cases differ between `base` and HEAD."""
    out = subprocess.run(["git", "diff", "--name-only", base, "HEAD"], cwd=REPO, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"mutation: cannot compare with {base}: {out.stderr.strip()}")
    changed = set(out.stdout.split())
    return [m for m in CORE if touched_by(m) & changed]


def tree_copy(into: Path, module: str, tests: list[str]) -> str:
    """A copy of the tree in which `module` is mutated; returns its path in the copy."""
    skip = shutil.ignore_patterns(".git", ".venv*", "mutants", "__pycache__", "*.egg-info", "demo-report")
    shutil.copytree(REPO, into, ignore=skip)
    for folder in ("rules", "reports"):  # where the package has them, so that mutants/auditor/rules is imported
        shutil.rmtree(into / "auditor" / folder, ignore_errors=True)
        (into / folder).rename(into / "auditor" / folder)
        shutil.copytree(into / "auditor" / folder, into / folder)  # tests that read rules/ or reports/ by path
    target = f"auditor/{module}" if module.startswith(("rules/", "reports/")) else module
    config = ("\n[tool.mutmut]\n"
              f"source_paths = [{target!r}]\n"
              f"pytest_add_cli_args_test_selection = {tests!r}\n"
              "pytest_add_cli_args = ['-p', 'no:cacheprovider', '-n', '0', '-m', 'not slow or heavy', '-x', '-q']\n"
              "also_copy = ['auditor', 'rules', 'reports', 'fixtures', 'benchmarks']\n")
    pyproject = into / "pyproject.toml"
    pyproject.write_text(re.sub(r"\n\[tool\.mutmut\][^\[]*", "", pyproject.read_text()) + config)
    return target


def equivalents() -> list[dict]:
    return yaml.safe_load(EQUIVALENTS.read_text()) or [] if EQUIVALENTS.exists() else []


def mutant_sources(tree: Path, target: str) -> dict[str, list[str]]:
    """Every function of mutmut's mutated copy of `target` by name, as source lines (its mutants and the original,
    `x_<function>__mutmut_<n>` and `..._orig`): read once, where `mutmut show` starts mutmut for each mutant."""
    path = tree / "mutants" / target
    text = path.read_text()
    lines = text.splitlines()
    return {n.name: lines[n.lineno - 1:n.end_lineno] for n in ast.walk(ast.parse(text))
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in n.name}


def diff_of(sources: dict[str, list[str]], name: str) -> tuple[str, str]:
    """The line a mutant changes: (before, after), stripped. `name` is mutmut's (module.x_function__mutmut_n)."""
    func = name.rsplit(".", 1)[-1]
    mutant, orig = sources.get(func, []), sources.get(func.rsplit("__mutmut_", 1)[0] + "__mutmut_orig", [])
    diff = list(difflib.unified_diff(orig[1:], mutant[1:], lineterm="", n=0))  # the def lines differ by name
    before = [ln[1:].strip() for ln in diff if ln.startswith("-") and not ln.startswith("---")]
    after = [ln[1:].strip() for ln in diff if ln.startswith("+") and not ln.startswith("+++")]
    return " ".join(before), " ".join(after)


def run_module(module: str, mutmut: str, known: list[dict]) -> dict:
    tests = CORE[module]
    missing = [t for t in tests if t.startswith("tests/") and not (REPO / t).exists()]
    if missing:
        return {"module": module, "error": f"no test file {', '.join(missing)}"}
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        tree = Path(tmp) / "tree"
        target = tree_copy(tree, module, tests)
        # The copy has no ../shared beside it: its tests read the samples and reference files from where the
        # tree's own tests do, through the variables tests/conftest.py reads.
        beside = {f"GPU_AUDITOR_{name.upper()}": str(REPO.parent / "shared" / name) for name in ("samples", "reference")
                  if (REPO.parent / "shared" / name).is_dir()}
        env = {**beside, **os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        started = time.monotonic()
        run = subprocess.run([mutmut, "run", "--max-children", str(os.cpu_count() or 1)], cwd=tree, env=env,
                             capture_output=True, text=True)
        seconds = time.monotonic() - started
        listed = subprocess.run([mutmut, "results", "--all", "true"], cwd=tree, capture_output=True, text=True)
        statuses = {m["name"]: m["status"] for m in (LINE.match(x) for x in listed.stdout.splitlines()) if m}
        if run.returncode or not statuses:
            tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
            return {"module": module, "error": "mutmut failed: " + " / ".join(tail)}
        survivors, explained = [], []
        sources = mutant_sources(tree, target)
        for name, status in sorted(statuses.items()):
            if status not in ("survived", "no tests"):
                continue
            before, after = diff_of(sources, name)
            reason = next((e["reason"] for e in known if e["module"] == module and e["before"] == before
                           and e["after"] == after), None)
            (explained if reason else survivors).append({"name": name, "before": before, "after": after,
                                                         "status": status, "reason": reason})
        killed = sum(s in ("killed", "timeout", "segfault") for s in statuses.values())
        return {"module": module, "mutants": len(statuses), "killed": killed, "explained": explained,
                "survivors": survivors, "seconds": seconds}


def write_scores(results: list[dict]) -> None:
    """Each run module's row of the scores table replaced (the others kept as measured before); every core module
    has a row, "not measured" until it is."""
    text = DOC.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    rows = {m.group(1): line for line in text[start:end].splitlines() if (m := re.match(r"\| `([^`]+)` \|", line))}
    today = time.strftime("%Y-%m-%d", time.gmtime())
    for r in results:
        if "error" in r:
            rows[r["module"]] = (f"| `{r['module']}` | | | | | not run: {r['error']} | {today} | "
                                 f"`{COMMAND} {r['module']}` |")
            continue
        score = (r["killed"] + len(r["explained"])) / r["mutants"] if r["mutants"] else 1
        rows[r["module"]] = (f"| `{r['module']}` | {r['mutants']} | {r['killed']} | {len(r['explained'])} | "
                             f"{len(r['survivors'])} | {score:.1%} | {today} | `{COMMAND} {r['module']}` |")
    table = ["| module | mutants | killed | equivalent (explained) | surviving | score | measured | command |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    table += [rows.get(m, f"| `{m}` | | | | | not measured | | |") for m in CORE]
    DOC.write_text(text[:start] + "\n" + "\n".join(table) + "\n" + text[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="core modules to mutate (default: those changed since --base)")
    parser.add_argument("--all", action="store_true", help="every core module")
    parser.add_argument("--ci", action="store_true", help="the gated modules (GATED) a change touches, as CI runs "
                        "them")
    parser.add_argument("--gated", action="store_true", help="every gated module")
    parser.add_argument("--base", default="HEAD^1", help="compare with this revision to find changed modules")
    parser.add_argument("--write", action="store_true", help="write the scores into docs/mutation.md")
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in CORE]
    if unknown:
        parser.error(f"not a core module: {', '.join(unknown)} (the modules are listed in .ci/mutation.py CORE)")
    if args.all or args.gated:
        modules = list(CORE) if args.all else GATED
    elif args.ci:
        modules = [m for m in changed_modules(args.base) if m in GATED]
    else:
        modules = args.modules or changed_modules(args.base)
    if not modules:
        print("mutation: the change touches no module to mutate")
        return 0
    mutmut = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or shutil.which("mutmut")
    if not mutmut:
        sys.exit("mutation: mutmut not found (it is in the test extras: pip install -e '.[test]')")
    known, results, failed = equivalents(), [], False
    for module in modules:
        r = run_module(module, mutmut, known)
        results.append(r)
        if "error" in r:
            print(f"mutation: {module}: {r['error']}")
            failed = True
            continue
        print(f"mutation: {module}: {r['mutants']} mutants, {r['killed']} killed, {len(r['explained'])} equivalent, "
              f"{len(r['survivors'])} surviving ({r['seconds']:.0f} s)")
        for s in r["survivors"]:
            print(f"  survived {s['name']}: {s['before']!r} -> {s['after']!r}")
            failed = True
    if args.write:
        write_scores(results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

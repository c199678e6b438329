"""Mutation testing of the core with mutmut: small deliberate bugs in the modules where a wrong line means a wrong
dollar or a wrong verdict, each run against the fast tests that state that module's behaviour.

    python .ci/mutation.py                 # the core modules changed since HEAD's first parent (CI)
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
    "auditor/policy.py": ["tests/test_policy.py", "tests/test_policy_refusals.py"],
    "auditor/core.py": ["tests/test_policy.py", "tests/test_rule_cases.py", "tests/test_rules_pack.py"],
    "auditor/gate.py": ["tests/test_gate.py"],
    "auditor/tables/shared_gpus.py": ["tests/test_shared_gpus.py"],
    "auditor/tables/breakdown.py": ["tests/test_rollup.py", "tests/test_reconcile.py"],
    "auditor/tables/summary.py": ["tests/test_rollup.py", "tests/test_reconcile.py"],
    "auditor/providers/billing/aws.py": ["tests/test_readers.py", "tests/test_readers_cur2.py"],
    "auditor/providers/billing/gcp.py": ["tests/test_readers_gcp.py"],
    "auditor/providers/billing/azure.py": ["tests/test_readers_azure.py"],
    "auditor/providers/billing/focus.py": ["tests/test_readers.py"],
}
# Every rule, against its own YAML cases (fixtures/rules/<ID>.yml, run by tests/test_rule_cases.py).
for path in sorted((REPO / "rules").glob("[A-Z]*[0-9]_*.py")):
    CORE[f"rules/{path.name}"] = ["tests/test_rule_cases.py", "-k", path.name.split("_")[0]]

# The modules CI mutates on every run (.ci/run: --ci): those whose every surviving mutant is killed or explained in
# .ci/mutation-equivalents.yml. A module joins when its survivors are dealt with; the rest are measured with --all.
GATED = ["auditor/window.py"]

LINE = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+)$")


def changed_modules(base: str) -> list[str]:
    """The core modules a change touches: those differing between `base` and HEAD."""
    out = subprocess.run(["git", "diff", "--name-only", base, "HEAD"], cwd=REPO, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"mutation: cannot compare with {base}: {out.stderr.strip()}")
    return [p for p in out.stdout.split() if p in CORE]


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
              "pytest_add_cli_args = ['-p', 'no:cacheprovider', '-n', '0', '-m', 'not slow', '-x', '-q']\n"
              "also_copy = ['auditor', 'rules', 'reports', 'fixtures', 'benchmarks']\n")
    pyproject = into / "pyproject.toml"
    pyproject.write_text(re.sub(r"\n\[tool\.mutmut\][^\[]*", "", pyproject.read_text()) + config)
    return target


def equivalents() -> list[dict]:
    return yaml.safe_load(EQUIVALENTS.read_text()) or [] if EQUIVALENTS.exists() else []


def diff_of(mutmut: str, cwd: Path, name: str) -> tuple[str, str]:
    """The line a mutant changes: (before, after), stripped."""
    out = subprocess.run([mutmut, "show", name], cwd=cwd, capture_output=True, text=True).stdout
    before = [ln[1:].strip() for ln in out.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    after = [ln[1:].strip() for ln in out.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return " ".join(before), " ".join(after)


def run_module(module: str, mutmut: str, known: list[dict]) -> dict:
    tests = CORE[module]
    missing = [t for t in tests if t.startswith("tests/") and not (REPO / t).exists()]
    if missing:
        return {"module": module, "error": f"no test file {', '.join(missing)}"}
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        tree = Path(tmp) / "tree"
        tree_copy(tree, module, tests)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
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
        for name, status in sorted(statuses.items()):
            if status not in ("survived", "no tests"):
                continue
            before, after = diff_of(mutmut, tree, name)
            reason = next((e["reason"] for e in known if e["module"] == module and e["before"] == before
                           and e["after"] == after), None)
            (explained if reason else survivors).append({"name": name, "before": before, "after": after,
                                                         "status": status, "reason": reason})
        killed = sum(s in ("killed", "timeout", "segfault") for s in statuses.values())
        return {"module": module, "mutants": len(statuses), "killed": killed, "explained": explained,
                "survivors": survivors, "seconds": seconds}


def write_scores(results: list[dict]) -> None:
    rows = ["| module | mutants | killed | equivalent (explained) | surviving | score |",
            "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        if "error" in r:
            rows.append(f"| `{r['module']}` | | | | | not run: {r['error']} |")
            continue
        score = (r["killed"] + len(r["explained"])) / r["mutants"] if r["mutants"] else 1
        rows.append(f"| `{r['module']}` | {r['mutants']} | {r['killed']} | {len(r['explained'])} | "
                    f"{len(r['survivors'])} | {score:.1%} |")
    text = DOC.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + "\n".join(rows) + "\n" + text[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="core modules to mutate (default: those changed since --base)")
    parser.add_argument("--all", action="store_true", help="every core module")
    parser.add_argument("--ci", action="store_true", help="the gated modules (GATED), as CI runs them")
    parser.add_argument("--base", default="HEAD^1", help="compare with this revision to find changed modules")
    parser.add_argument("--write", action="store_true", help="write the scores into docs/mutation.md")
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in CORE]
    if unknown:
        parser.error(f"not a core module: {', '.join(unknown)} (the modules are listed in .ci/mutation.py CORE)")
    modules = list(CORE) if args.all else GATED if args.ci else args.modules or changed_modules(args.base)
    if not modules:
        print("mutation: no core module changed; nothing to mutate")
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

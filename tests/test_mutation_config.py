"""The mutation run's own configuration (.ci/mutation.py, .ci/mutation-equivalents.yml): what it names exists, and
CI mutates the gated modules a change touches."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mutation", REPO / ".ci" / "mutation.py")
mutation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutation)


def test_every_core_module_and_its_tests_exist():
    for module, tests in mutation.CORE.items():
        assert (REPO / module).is_file(), module
        for t in tests:
            if t.startswith("tests/"):
                assert (REPO / t).is_file(), f"{module}: no test file {t}"
    assert set(mutation.GATED) <= set(mutation.CORE)
    assert {"auditor/window.py", "auditor/figures.py", "rules/GPU001_idle_gpu.py"} <= set(mutation.GATED)


def test_every_equivalent_names_a_core_module_the_line_and_why():
    entries = yaml.safe_load((REPO / ".ci" / "mutation-equivalents.yml").read_text())
    for e in entries:
        assert set(e) == {"module", "before", "after", "reason"}, e
        assert e["module"] in mutation.CORE, e
        assert e["before"] != e["after"] and e["after"] is not None, e
        assert len(e["reason"].split()) >= 3, e  # a reason, not a word
    keys = [(e["module"], e["before"], e["after"]) for e in entries]
    assert len(set(keys)) == len(keys), "an equivalent mutant is recorded twice"


def test_a_change_touches_a_module_through_its_code_its_tests_or_its_cases():
    assert mutation.touched_by("auditor/figures.py") == {"auditor/figures.py", "tests/test_figures.py"}
    rule = "rules/GPU001_idle_gpu.py"
    assert mutation.touched_by(rule) == {rule, "tests/test_rule_cases.py", "fixtures/rules/GPU001.yml"}

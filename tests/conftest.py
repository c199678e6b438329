"""Shared fixtures for the test suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# --- the rule registry, restored after a test that registers throwaway rules ---------------------------------


@pytest.fixture
def rule_registry() -> Iterator[dict]:
    """The rule registry with the whole pack loaded; whatever a test registers is gone afterwards."""
    from auditor import registry as rule_module

    rule_module.all_rules()
    saved = dict(rule_module._REGISTRY)
    retired = dict(rule_module.RETIRED)
    try:
        yield rule_module._REGISTRY
    finally:
        rule_module._REGISTRY.clear()
        rule_module._REGISTRY.update(saved)
        rule_module.RETIRED.clear()
        rule_module.RETIRED.update(retired)


# --- one local Spark session for the --engine spark tests ------------------------------------------------------


@pytest.fixture(scope="session")
def spark():
    from auditor.tables import spark as engine

    s = engine.session("local[2]")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()

"""Meta tests of the rule pack (the checkov and sqlfluff way): every rule keeps the pack's conventions."""

from __future__ import annotations

import inspect
import re
import typing
from collections import Counter
from pathlib import Path

import pytest
import yaml

from auditor.errors import InputError
from auditor.model import Entity, Finding, GpuAsset, Severity
from auditor.registry import DOC_SECTIONS, ID_RE, NAME_RE, RETIRED, RuleError, all_rules, get_rule, register
from auditor.rule import Rule
from auditor.schema import Field, Validator
from auditor.testing import load_cases, make_entity

REPO = Path(__file__).resolve().parents[1]
RULES_DIR = REPO / "rules"
CASES_DIR = REPO / "fixtures" / "rules"
CASES = load_cases(CASES_DIR)  # read once: every rule's test looks for its own among them
RULES = all_rules()
IDS = [r.id for r in RULES]
ENTITIES = typing.get_args(Entity)  # every entity class a rule may read

YAML_FENCE = re.compile(r"```yaml\n(.*?)```", re.S)


def example_items(rule: type[Rule]) -> list[dict]:
    m = YAML_FENCE.search(rule.doc().get("Example", ""))
    assert m, f"{rule.id}: the Example section has no ```yaml fence"
    items = yaml.safe_load(m.group(1))
    assert isinstance(items, list) and items, f"{rule.id}: the Example is not a non-empty YAML list"
    return items


# --- identity -----------------------------------------------------------------------------------------------


def test_pack_is_not_empty() -> None:
    assert {"GPU001", "GPU002", "TAG001", "NET001", "SPOT001"} <= set(IDS)


def test_ids_are_unique_and_well_formed() -> None:
    assert [k for k, n in Counter(IDS).items() if n > 1] == []
    for rid in IDS:
        assert ID_RE.match(rid), rid


def test_names_are_kebab_case_and_unique_across_aliases() -> None:
    keys: list[str] = []
    for r in RULES:
        assert NAME_RE.match(r.name), f"{r.id}: name {r.name!r} is not kebab-case"
        for alias in r.aliases:
            assert alias and alias.strip() == alias, f"{r.id}: alias {alias!r}"
        # get_rule looks rules up by ID, name or alias, case-insensitively: none may stand for two rules
        keys += {r.id.lower(), r.name.lower(), *(a.lower() for a in r.aliases)}
    assert [k for k, n in Counter(keys).items() if n > 1] == []


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_get_rule_finds_a_rule_by_id_name_and_alias(rule: type[Rule]) -> None:
    for key in (rule.id, rule.id.lower(), rule.name, rule.name.upper(), *rule.aliases):
        assert get_rule(key) is rule


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_module_file_is_named_by_id_and_name(rule: type[Rule]) -> None:
    path = Path(inspect.getfile(rule))
    assert path.name == f"{rule.id}_{rule.name.replace('-', '_')}.py"


def test_every_module_in_rules_holds_a_registered_rule() -> None:
    """A module that forgets @register would silently drop its rule from the pack."""
    files = {p.name for p in RULES_DIR.glob("*.py") if p.name != "__init__.py"}
    registered = {Path(inspect.getfile(r)).name for r in RULES}
    assert files == registered


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_no_retired_id_in_use(rule: type[Rule]) -> None:
    assert rule.id not in RETIRED, f"{rule.id} is retired: {RETIRED.get(rule.id)}"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_declarations(rule: type[Rule]) -> None:
    assert rule.entity in ENTITIES
    assert isinstance(rule.severity, Severity)
    assert isinstance(rule.clause, str) and re.fullmatch(r"[a-z][a-z0-9_]*", rule.clause), rule.clause
    assert "check" in vars(rule), f"{rule.id} does not define check()"


# --- documentation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_docstring_has_every_section(rule: type[Rule]) -> None:
    doc = rule.doc()
    assert doc["summary"], f"{rule.id}: no summary line"
    for section in DOC_SECTIONS:
        assert section in doc, f"{rule.id}: docstring lacks ## {section}"
        assert doc[section].strip(), f"{rule.id}: ## {section} is empty"
    assert rule.summary() == doc["summary"]
    assert rule.remediation()


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_example_builds_entities(rule: type[Rule]) -> None:
    for item in example_items(rule):
        assert isinstance(item, dict), f"{rule.id}: example item {item!r} is not a mapping"
        assert isinstance(make_entity(rule.entity, item), rule.entity)


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_options_are_documented_and_defaults_valid(rule: type[Rule]) -> None:
    doc = rule.__doc__ or ""
    for key, spec in rule.options.items():
        assert isinstance(spec, Field), f"{rule.id}.{key}"
        assert re.fullmatch(r"[a-z][a-z0-9_]*", key), f"{rule.id}: option {key!r} is not snake_case"
        assert spec.doc.strip(), f"{rule.id}: option {key} has no doc"
        assert f"`{key}`" in doc, f"{rule.id}: option {key} is not named in the docstring"
        try:
            Validator(f"<{rule.id} option {key}>").check(spec.default, spec, (key,))
        except InputError as err:
            pytest.fail(f"{rule.id}: default of {key} fails its own field: {err}")
    assert rule().opts == {k: f.default for k, f in rule.options.items()}


# --- test cases ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_every_rule_has_failing_and_passing_cases(rule: type[Rule]) -> None:
    path = CASES_DIR / f"{rule.id}.yml"
    assert path.is_file(), f"{rule.id}: no case file {path.relative_to(REPO)}"
    cases = [c for c in CASES if c.rule == rule.id]
    assert cases and all(c.path == str(path) for c in cases)
    assert any(c.fail for c in cases), f"{rule.id}: no failing case"
    assert any(not c.fail for c in cases), f"{rule.id}: no passing case"


# --- registration -------------------------------------------------------------------------------------------

GOOD_DOC = """Throwaway rule for the registry tests.

    ## What it does
    Nothing.

    ## Why it matters
    It does not.

    ## Example
    ```yaml
    - {id: x, provider: aws}
    ```

    ## How to fix
    Nothing to fix.
    """


def throwaway(rid: str | None = "ZZZ999", name: str = "throwaway-rule", doc: str | None = GOOD_DOC) -> type[Rule]:
    """A rule class that is not registered (yet)."""

    class Throwaway(Rule):
        __doc__ = doc
        entity = GpuAsset
        clause = "throwaway"

        def check(self, entity, ctx):
            return iter(())

    if rid is not None:
        Throwaway.id = rid
    Throwaway.name = name
    return Throwaway


def test_a_good_throwaway_rule_registers(rule_registry: dict) -> None:
    cls = throwaway()
    assert register(cls) is cls
    assert rule_registry["ZZZ999"] is cls
    assert register(cls) is cls, "registering the same class twice is harmless"


@pytest.mark.parametrize("rid", [None, "", "gpu001", "GPU01", "GPU0001", "G001", "TOOLONG001", "GPU-001", "GPU001 ",
                                 "001GPU"])
def test_bad_id_is_refused(rule_registry: dict, rid: str | None) -> None:
    with pytest.raises(RuleError, match="must look like"):
        register(throwaway(rid))
    assert set(rule_registry) == set(IDS)


def test_declared_bad_id_is_refused_at_class_definition(rule_registry: dict) -> None:
    with pytest.raises(RuleError):

        @register
        class BadId(Rule):
            """Bad id.

            ## What it does
            x
            ## Why it matters
            x
            ## Example
            x
            ## How to fix
            x
            """

            id = "bad-1"
            name = "bad-id"
            entity = GpuAsset
            clause = "x"

    assert set(rule_registry) == set(IDS)


@pytest.mark.parametrize("rid", ["GPU001", "SPOT001"])
def test_duplicate_id_is_refused(rule_registry: dict, rid: str) -> None:
    original = rule_registry[rid]
    with pytest.raises(RuleError, match="duplicate"):
        register(throwaway(rid))
    assert rule_registry[rid] is original


def test_retired_id_is_refused(rule_registry: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(RETIRED, "ZZZ998", "split into ZZZ996 and ZZZ997")
    with pytest.raises(RuleError, match="retired"):
        register(throwaway("ZZZ998"))
    assert "ZZZ998" not in rule_registry


@pytest.mark.parametrize("name", ["", "Throwaway", "throwaway_rule", "throwaway rule", "-throwaway", "throwaway-",
                                  "throwaway--rule", "1throwaway"])
def test_bad_name_is_refused(rule_registry: dict, name: str) -> None:
    with pytest.raises(RuleError, match="kebab-case"):
        register(throwaway(name=name))
    assert "ZZZ999" not in rule_registry


@pytest.mark.parametrize("section", DOC_SECTIONS)
def test_missing_doc_section_is_refused(rule_registry: dict, section: str) -> None:
    doc = GOOD_DOC.replace(f"## {section}\n", "")
    assert doc != GOOD_DOC
    with pytest.raises(RuleError, match=re.escape(section)):
        register(throwaway(doc=doc))
    assert "ZZZ999" not in rule_registry


def test_missing_docstring_is_refused(rule_registry: dict) -> None:
    with pytest.raises(RuleError, match="lacks sections"):
        register(throwaway(doc=None))
    assert "ZZZ999" not in rule_registry


def test_registry_holds_only_the_pack_after_the_registration_tests() -> None:
    from auditor.registry import _REGISTRY

    assert set(_REGISTRY) == set(IDS)
    assert all(cls.__name__ != "Throwaway" for cls in all_rules())


def test_finding_fingerprint_depends_on_rule_resource_and_key() -> None:
    base = dict(name="n", severity=Severity.LOW, message="m", entity_type="GpuAsset")
    a = Finding(rule="GPU001", resource="i-1", **base)
    assert a.fingerprint == Finding(rule="GPU001", resource="i-1", **{**base, "message": "other"}).fingerprint
    assert a.fingerprint != Finding(rule="GPU002", resource="i-1", **base).fingerprint
    assert a.fingerprint != Finding(rule="GPU001", resource="i-2", **base).fingerprint
    assert a.fingerprint != Finding(rule="GPU001", resource="i-1", key="USD", **base).fingerprint

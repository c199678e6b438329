"""The typed core: the report's view built one section at a time (each builder short), the summary's typed model
agreeing with the audit it describes and with audit.schema.json, and out of memory an error of its own."""

from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
import types
import typing
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from auditor import audit_model, audit_schema, memory
from auditor.audit_model import AuditDoc, Summary
from auditor.auditfile import read_audit
from auditor.cli import cli
from auditor.errors import EXIT_INPUT, AuditorError, InputError, OutOfMemory, out_of_memory
from auditor.memory import memory_limit
from auditor.outputs import view
from auditor.outputs.audit_json import write_json

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "auditor" / "data" / "audit.schema.json").read_text(encoding="utf-8"))
DEMO = REPO / "fixtures" / "demo"


# ---- the view, section by section -------------------------------------------------------------------------------

def _builders() -> list[typing.Callable[..., typing.Any]]:
    source = inspect.getsource(view.build_view)
    return [getattr(view, name) for name in dir(view) if name.startswith("_") and f"{name}(c)" in source]


def test_build_view_is_its_sections_each_under_60_lines():
    builders = _builders()
    assert len(builders) >= 10
    for fn in [view.build_view, *builders]:
        lines = len(inspect.getsource(fn).splitlines())
        assert lines < 60, f"{fn.__name__}: {lines} lines"


def test_every_name_a_section_makes_is_in_the_view_and_typed(demo_folder):
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    for team in (None, "vision"):
        shown = view.build_view(doc, team)
        assert set(shown) == set(typing.get_type_hints(view.ReportView)), team
    for fn in _builders():  # each builder makes exactly the names of its own section
        section = typing.get_type_hints(fn)["return"]
        assert set(fn(view._scope(doc, None))) == set(typing.get_type_hints(section)), fn.__name__


# ---- the summary's model, the audit and the schema ------------------------------------------------------------

def _typed_dict(tp: typing.Any) -> typing.Any:
    """The TypedDict `tp` is, holds (dict values, list items) or may be (X | None); None for any other type."""
    if typing.is_typeddict(tp):
        return tp
    for arg in typing.get_args(tp):
        found = _typed_dict(arg) if not isinstance(arg, types.NoneType) else None
        if found is not None:
            return found
    return None


def _object(schema: dict[str, typing.Any]) -> dict[str, typing.Any]:
    """The object a schema node describes: through $ref, oneOf (the object branch) and additionalProperties."""
    if "$ref" in schema:
        return _object(SCHEMA["$defs"][schema["$ref"].rsplit("/", 1)[-1]])
    for branch in schema.get("oneOf", []):
        if branch.get("type") == "object" or "$ref" in branch:
            return _object(branch)
    if "properties" not in schema and isinstance(schema.get("additionalProperties"), dict):
        return _object(schema["additionalProperties"])
    if "items" in schema:
        return _object(schema["items"])
    return schema


def _disagreements(model: typing.Any, schema: dict[str, typing.Any], where: str) -> list[str]:
    hints = typing.get_type_hints(model)
    props = _object(schema).get("properties")
    if props is None:  # the schema says only "an object": nothing to compare
        return []
    out = [f"{where}.{k}: in the model, not in the schema" for k in set(hints) - set(props)]
    out += [f"{where}.{k}: in the schema, not in the model" for k in set(props) - set(hints)]
    for key in set(hints) & set(props):
        inner = _typed_dict(hints[key])
        if inner is not None:
            out += _disagreements(inner, props[key], f"{where}.{key}")
    return out


def test_the_audit_model_and_audit_schema_name_the_same_keys():
    assert _disagreements(AuditDoc, SCHEMA, "(top level)") == []
    assert _disagreements(Summary, SCHEMA["properties"]["summary"], "summary") == []


def test_the_comparison_finds_a_key_on_one_side_only():
    class Lacks(typing.TypedDict):
        basis: str

    schema = {"properties": {"basis": {}, "next": {}}}
    assert _disagreements(Lacks, schema, "forecast") == ["forecast.next: in the schema, not in the model"]


def test_audit_json_read_back_into_the_model_writes_the_same_bytes(demo_folder):
    saved = read_audit(demo_folder / "audit.json")
    assert set(saved.doc) == set(typing.get_type_hints(AuditDoc))
    buf = io.StringIO()
    write_json(saved.doc, buf)
    assert buf.getvalue() == (demo_folder / "audit.json").read_text(encoding="utf-8")


def test_the_demo_summary_has_exactly_the_model_keys_and_validates(demo_folder):
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    summary = doc["summary"]
    assert set(summary) == set(typing.get_type_hints(Summary))
    assert set(summary["forecast"]) == set(typing.get_type_hints(audit_model.Forecast))
    assert set(summary["fleet"]) == set(typing.get_type_hints(audit_model.Fleet))
    for detail in summary["team_spend"].values():
        assert set(detail) <= set(typing.get_type_hints(audit_model.TeamDetail))
    for budget in summary["teams"].values():
        assert set(budget) == set(typing.get_type_hints(audit_model.TeamBudget))
    jsonschema.validate(doc, SCHEMA)


def test_the_schema_refuses_a_summary_section_of_the_wrong_type(demo_folder):
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    doc["summary"]["jobs"]["count"] = "many"
    try:
        jsonschema.validate(doc, SCHEMA)
    except jsonschema.ValidationError as e:
        assert list(e.absolute_path) == ["summary", "jobs", "count"]
    else:
        raise AssertionError("a job count that is text was accepted")


# ---- out of memory: its own error, still one line and exit 2 ----------------------------------------------------

def test_out_of_memory_is_not_bad_input():
    error = out_of_memory("bills/cur.csv")
    assert isinstance(error, OutOfMemory) and isinstance(error, AuditorError)
    assert not isinstance(error, InputError)
    assert str(error).startswith("bills/cur.csv: ran out of memory reading the file")


@pytest.mark.heavy
def test_an_audit_out_of_memory_says_so_in_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_AUDITOR_MEMORY_LIMIT", "2MB")
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["audit", "-q", "--policy", str(DEMO / "policy.yml"), "--inventory",
                                      str(DEMO / "inventory.json"), "--quarter", "2026-Q3", "--out", str(out),
                                      str(DEMO / "billing")])
    assert result.exit_code == EXIT_INPUT
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "ran out of memory reading the file (the database may use 2MB" in lines[0]
    assert lines[0].startswith("gpu-auditor: error: ") and "Traceback" not in result.output
    assert not out.exists()


def test_the_store_memory_limit_is_a_third_of_a_small_machine_or_container(monkeypatch):
    monkeypatch.delenv("GPU_AUDITOR_MEMORY_LIMIT", raising=False)
    for room, limit in ((None, "768MB"), (64 << 30, "768MB"), (3 << 30, "768MB"), (2 << 30, "682MB"),
                        (1 << 30, "341MB"), (256 << 20, "128MB")):
        monkeypatch.setattr(memory, "memory_available", lambda room=room: room)
        assert memory_limit() == limit, room
    monkeypatch.setenv("GPU_AUDITOR_MEMORY_LIMIT", "2GB")
    assert memory_limit() == "2GB"


V1 = "4:memory:/ci/job-7\n3:cpu:/ci/job-7\n"  # /proc/self/cgroup under cgroup v1: a job's cgroup in a CI's
V2 = "0::/ci/job-7\n"  # and under v2, one hierarchy


@pytest.mark.parametrize(("files", "expected"), [
    ({"/proc/self/cgroup": V2, "/sys/fs/cgroup/ci/job-7/memory.max": "536870912\n"}, 512 << 20),
    ({"/proc/self/cgroup": V2, "/sys/fs/cgroup/ci/job-7/memory.max": "max\n",  # a limit on a parent holds
      "/sys/fs/cgroup/ci/memory.max": "1073741824\n"}, 1 << 30),
    ({"/proc/self/cgroup": V2, "/sys/fs/cgroup/ci/job-7/memory.max": "max\n"}, None),  # no limit: the machine's
    ({"/proc/self/cgroup": V1, "/sys/fs/cgroup/memory/ci/job-7/memory.limit_in_bytes": "1073741824\n"}, 1 << 30),
    ({"/proc/self/cgroup": V1,  # v1 without a limit: a number past any machine's memory
      "/sys/fs/cgroup/memory/ci/job-7/memory.limit_in_bytes": "9223372036854771712\n"}, None),
    ({"/proc/self/cgroup": V1, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30),  # root
    ({}, None),  # no /proc: the machine's memory
])
def test_the_memory_available_is_the_least_of_the_cgroups_limits(monkeypatch, files, expected):
    monkeypatch.setattr(memory, "_read", lambda path: files.get(path, ""))
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory.memory_available() == min(expected or machine, machine)


def test_an_audit_in_a_cgroup_of_a_gibibyte_gives_its_store_a_third(tmp_path):
    """For real: this test's cgroup (v1 or v2) with a child limited to 1 GiB, a process moved into it (CI, as root,
    requires it: GPU_AUDITOR_REQUIRE names cgroup)."""
    from conftest import _missing

    own = next((line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                if line.split(":", 2)[1] in ("memory", "")), None) if Path("/proc/self/cgroup").exists() else None
    v1 = Path(f"/sys/fs/cgroup/memory{own}")
    base, limit = (v1, "memory.limit_in_bytes") if v1.is_dir() else (Path(f"/sys/fs/cgroup{own}"), "memory.max")
    child = base / f"gpu-auditor-test-{os.getpid()}"
    try:
        child.mkdir()
    except OSError as e:
        _missing(f"no cgroup of our own to make here ({e.strerror}): the cases above read recorded ones", "cgroup")
    try:
        try:
            (child / limit).write_text(str(1 << 30))
        except OSError as e:  # v2 without the memory controller delegated to our cgroup's children
            _missing(f"no memory limit to set on a cgroup here ({e.strerror})", "cgroup")
        code = ("import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
                "from auditor.memory import memory_limit; print(memory_limit())")
        env = {k: v for k, v in os.environ.items() if k != "GPU_AUDITOR_MEMORY_LIMIT"}
        out = subprocess.run([sys.executable, "-c", code, str(child / "cgroup.procs")], capture_output=True,
                             text=True, env=env, check=True).stdout
        assert out.strip() == "341MB"
    finally:
        child.rmdir()


# ---- the schema generated from the model ------------------------------------------------------------------------

GENERATED = REPO / "docs" / "audit.schema.json"


def test_the_checked_in_schema_is_the_one_the_model_generates():
    assert audit_schema.text() == GENERATED.read_text(encoding="utf-8"), \
        "regenerate it: python -m auditor.audit_schema > docs/audit.schema.json"


def test_the_demo_audit_validates_against_the_generated_schema(demo_folder):
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(json.loads(GENERATED.read_text(encoding="utf-8"))).validate(doc)


def _errors(doc: dict[str, typing.Any]) -> list[list[typing.Any]]:
    validator = jsonschema.Draft202012Validator(json.loads(GENERATED.read_text(encoding="utf-8")))
    return [list(e.absolute_path) for e in validator.iter_errors(doc)]


def test_the_generated_schema_refuses_what_the_model_does_not_say(demo_folder):
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    doc["summary"]["surprise"] = 1  # a key added to the summary and not to its model
    doc["summary"]["forecast"]["savings"]["USD"] = "12.5"  # money is cents
    doc["summary"]["fleet"]["machines_total"] = "7"
    doc["window"]["start"] = "2026-07-01"  # a time is UTC with its Z
    del doc["summary"]["coverage"]["missing"]
    assert sorted(_errors(doc), key=str) == sorted([
        ["summary"], ["summary", "forecast"], ["summary", "fleet", "machines_total"],  # forecast: its object or null
        ["window", "start"], ["summary", "coverage"]], key=str)


def test_an_earlier_audit_without_the_newer_keys_still_validates(demo_folder):
    doc = json.loads((demo_folder / "audit.json").read_text(encoding="utf-8"))
    for key in ("actions", "savings_by_team", "jobs", "unit_costs"):
        del doc["summary"][key]
    for key in ("as_of", "baseline", "trend", "jobs"):
        del doc[key]
    assert _errors(doc) == []

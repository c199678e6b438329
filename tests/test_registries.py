"""Every extension point has one registry, and what the CLI offers, docs/architecture.md and the README list
agree with it: a reader, platform, kind, adapter or rule added in its own module shows up everywhere, and one
the docs name that is not registered fails here."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from auditor.cli import cli
from auditor.providers.billing import registry as billing
from auditor.providers.catalog import load_catalog
from auditor.providers.live.pull import ADAPTERS
from auditor.providers.manifests import registry as manifests
from auditor.registry import all_rules

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
CATALOG = load_catalog()


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start:end if end >= 0 else None]


def _choices(command: str, option: str) -> list[str]:
    cmd = cli.get_command(click.Context(cli), command)
    opt = next(p for p in cmd.params if option in getattr(p, "opts", []))
    assert isinstance(opt.type, click.Choice)
    return list(opt.type.choices)


# ---- billing readers ------------------------------------------------------------------------------------------

# The formats detect.py tells apart (its docstring and the README's format table): each must have its reader.
FORMATS = {"aws-cur", "aws-cur2", "focus-1.0", "focus-1.1", "focus-1.2", "focus-1.3", "gcp-billing", "azure-cost"}


def test_every_billing_format_has_one_registered_reader():
    assert set(billing.readers()) == FORMATS


def test_a_format_registered_twice_is_refused():
    reader = billing.readers()["aws-cur"]
    with pytest.raises(ValueError, match="two billing readers for the format aws-cur"):
        billing.reads("aws-cur")(lambda cols, catalog: ({}, []))
    assert billing.readers()["aws-cur"] is reader


def test_architecture_names_every_billing_reader_module():
    modules = {fn.__module__.rsplit(".", 1)[1] for fn in billing.readers().values()}
    assert modules == {"aws", "gcp", "azure", "focus"}
    row = next(line for line in ARCHITECTURE.splitlines() if line.startswith("| Billing files |"))
    for m in modules:
        assert f"`{m}.py`" in row, f"docs/architecture.md's Billing files row does not name {m}.py"


def test_readme_lists_every_focus_version_registered():
    versions = sorted(f.removeprefix("focus-") for f in billing.readers() if f.startswith("focus-"))
    assert f"| FOCUS {', '.join(versions)} (" in README


# ---- manifest readers ------------------------------------------------------------------------------------------

def test_platforms_are_tried_kubernetes_first():
    names = [p.name for p in manifests.platforms()]
    assert names[0] == "kubernetes"  # apiVersion and kind: the most general signature
    assert {"kubernetes", "sagemaker", "vertex", "azureml", "skypilot"} <= set(names)


def test_architecture_names_every_manifest_module_that_registers():
    modules = {p.parse.__module__ for p in manifests.platforms()} | {fn.__module__ for fn in manifests.KINDS.values()}
    row = next(line for line in ARCHITECTURE.splitlines() if line.startswith("| Manifests |"))
    for m in sorted(modules):
        assert f"`{m.rsplit('.', 1)[1]}.py`" in row, f"docs/architecture.md's Manifests row does not name {m}"


def test_readme_gate_table_lists_every_registered_kind_and_no_other():
    table = [line for line in _section(README, "## Gate deployments in CI").splitlines()
             if line.startswith("| ") and not line.startswith(("| Platform", "|---"))]
    listed = {k for row in table for k in re.findall(r"`([A-Z][A-Za-z]+)`", row.split(" | ")[1])}
    registered = {kind for _, kind in manifests.KINDS}
    # Kinds read without a reader of their own: Katib's Experiment wraps a trial, Kueue's place other workloads,
    # the SageMaker and Vertex requests are whole platforms.
    without_reader = {"Experiment", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload",
                      "CreateTrainingJob", "CreateHyperParameterTuningJob", "CustomJob", "HyperparameterTuningJob"}
    assert registered <= listed, f"registered kinds missing from the README: {sorted(registered - listed)}"
    assert listed - registered <= without_reader, f"README kinds with no reader: {sorted(listed - registered)}"


def test_a_group_with_a_reader_passes_its_other_kinds_only_when_it_says_so():
    from auditor.providers.manifests import Document, UnknownKind, parse

    def doc(api: str, kind: str) -> Document:
        return Document({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "spec": {}}, "m.yaml", 1)

    assert parse(doc("batch.volcano.sh/v1alpha1", "Command"), CATALOG) == []  # Volcano: others_pass
    assert parse(doc("trainer.kubeflow.org/v1alpha1", "Other"), CATALOG) == []
    with pytest.raises(UnknownKind, match=r"unknown manifest kind RayThing \(ray.io/v1\)"):
        parse(doc("ray.io/v1", "RayThing"), CATALOG)  # KubeRay: a kind not read is named


def test_a_kind_registered_twice_is_refused():
    with pytest.raises(ValueError, match=r"two manifest readers for RayJob \(ray.io\)"):
        manifests.kinds("ray.io", "RayJob")(lambda doc, spec, ctx: [])


def test_the_unknown_document_message_names_every_platform():
    from auditor.providers.manifests import Document, UnknownKind, parse

    with pytest.raises(UnknownKind) as e:
        parse(Document({"hello": "world"}, "m.yaml", 3), CATALOG)
    for p in manifests.platforms():
        assert p.what in str(e.value)


# ---- live adapters --------------------------------------------------------------------------------------------

def test_cli_provider_choices_are_the_adapters():
    assert _choices("pull", "--provider") == list(ADAPTERS)
    assert _choices("audit", "--provider") == list(ADAPTERS)


def test_docs_name_every_adapter():
    assert f"--provider {'|'.join(ADAPTERS)} " in README
    row = next(line for line in ARCHITECTURE.splitlines() if line.startswith("| Live sources |"))
    for module in ADAPTERS.values():
        assert f"`{module}.py`" in row
        assert (REPO / "auditor" / "providers" / "live" / f"{module}.py").is_file()


# ---- rules -----------------------------------------------------------------------------------------------------

RULE_ROW = re.compile(r"^\| ([A-Z]{2,5}\d{3}) \| ([a-z0-9-]+) \| (\w+) \| `(\w+)` \|", re.M)


def test_readme_rule_tables_agree_with_the_rule_registry():
    rows: dict[str, tuple[str, str, str]] = {}
    for rid, name, severity, clause in RULE_ROW.findall(README):
        assert rows.setdefault(rid, (name, severity, clause)) == (name, severity, clause), f"{rid} listed twice"
    registered = {r.id: (r.name, r.severity.label, r.clause) for r in all_rules()}
    assert rows == registered


def test_a_new_platform_is_read_by_its_registration_alone(monkeypatch):
    """What docs/architecture.md promises a newcomer: the decorator is the only place a platform is named."""
    from auditor.model import Job
    from auditor.providers.manifests import Document, parse, platform_of

    monkeypatch.setattr(manifests, "PLATFORMS", dict(manifests.PLATFORMS))

    @manifests.platform("acme", detect=lambda d: "acmeJob" in d, what="Acme job", rank=5)
    def acme(doc, ctx):
        return [Job(id=f"acme:{doc.data['acmeJob']}", platform="acme", source_file=doc.path,
                    source_line=doc.line)]

    doc = Document({"acmeJob": "train"}, "acme.yaml", 7)
    assert platform_of(doc) == "acme"
    assert [(j.id, j.source_file, j.source_line) for j in parse(doc, CATALOG)] == [("acme:train", "acme.yaml", 7)]
    with pytest.raises(Exception, match=r"SkyPilot task, or Acme job$"):
        parse(Document({"other": 1}, "x.yaml", 1), CATALOG)


# ---- outputs ---------------------------------------------------------------------------------------------------

def test_cli_format_choices_are_the_outputs():
    from auditor.outputs.report import FORMATS

    assert sorted(_choices("report", "--format")) == sorted(FORMATS)


def test_every_output_is_written_and_documented(demo_folder):
    from auditor.outputs.registry import outputs
    from auditor.outputs.report import FILE_NAMES, FORMATS

    assert tuple(outputs()) == FORMATS
    files = set(FILE_NAMES.values())
    assert files <= {p.name for p in demo_folder.iterdir()}  # `audit --out` writes every registered format
    for name in files:
        assert f"`{name}`" in README or name in README, name
    assert "`@output(" in _section(ARCHITECTURE, "## Where to add")


def test_gate_format_choices_are_the_gate_outputs():
    from auditor.outputs.ci_formats import FORMATS

    assert sorted(_choices("gate", "--format")) == sorted(FORMATS)
    assert set(FORMATS) == {"text", "json", "sarif", "junit", "github", "markdown"}  # the six the README names
    for fmt in FORMATS:
        assert f"`{fmt}`" in README or fmt in README, fmt

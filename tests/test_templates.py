"""The templates' compiled form kept beside them (auditor/outputs/templates.py): read back by the next run, the
same report byte for byte; each environment's apart from another's; never written under PYTHONDONTWRITEBYTECODE,
and a folder that cannot be written stops nothing."""

from __future__ import annotations

import importlib
import sys

import jinja2
import pytest

from auditor.outputs import report, templates
from auditor.outputs.view import build_view

compose = importlib.import_module("auditor.outputs.mail.compose")  # the package's `compose` is the function


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The compiled templates' folder, in tmp_path, with bytecode written (conftest.py writes it too)."""
    where = tmp_path / "__pycache__"
    monkeypatch.setattr(templates, "compiled_folder", lambda: where)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return where


def rendered(doc) -> tuple[str, str]:
    """The demo's HTML and Markdown reports through an environment made now (report._env makes one a process)."""
    env, view = report._env.__wrapped__(), build_view(doc, None)
    return env.get_template("report.html.j2").render(**view), env.get_template("report.md.j2").render(**view)


@pytest.mark.heavy
def test_compiled_templates_are_read_back_and_render_the_same_report(folder, demo_audit_result, monkeypatch):
    doc = demo_audit_result.to_dict()
    first = rendered(doc)
    assert first == (report.render_html(doc), report.render_md(doc))
    # report.html.j2 and report.md.j2, and what they import and include
    assert sorted(p.name.split("-")[1] for p in folder.iterdir()) == ["report"] * 9

    def compile_again(*args, **kwargs):
        raise AssertionError("a template compiled again")

    monkeypatch.setattr(jinja2.Environment, "compile", compile_again)
    assert rendered(doc) == first


def test_each_environment_keeps_its_own(folder):
    """The report and the e-mail both import charts.html.j2, compiled with other options (the e-mail keeps a
    template's last line break): each reads back its own."""
    report._env.__wrapped__().get_template("charts.html.j2")
    compose._env.__wrapped__(True).get_template("charts.html.j2")
    compose._env.__wrapped__(False).get_template("email.txt.j2")
    names = sorted(p.name.rsplit("-", 1)[0] for p in folder.iterdir())
    assert names == ["jinja2-email-html", "jinja2-email-text", "jinja2-report"]


def test_nothing_is_written_where_python_writes_no_bytecode(folder, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert report._env.__wrapped__().get_template("report.md.j2")
    assert not folder.exists()


@pytest.mark.heavy
def test_a_folder_that_cannot_be_written_stops_nothing(tmp_path, monkeypatch, demo_audit_result):
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.setattr(templates, "compiled_folder", lambda: tmp_path / "a-file" / "__pycache__")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    doc = demo_audit_result.to_dict()
    assert rendered(doc) == (report.render_html(doc), report.render_md(doc))

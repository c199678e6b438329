"""Every output format is a view of one audit: the JSON-able dict of `Audit.to_dict()` (audit.json). The
templates see one view-model built from that dict alone (`build_view`), so `gpu-auditor report audit.json`
re-renders a saved audit byte for byte as `audit` wrote it, and `render_html(doc, team=...)` gives one team's
own report (its findings and its spend) for the e-mail. Outputs are rendered in memory first, then written
atomically (temp file, then rename), so a failed run never leaves half a report."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import markupsafe

from auditor.atomic import target, write_files
from auditor.audit_model import AuditDoc
from auditor.model import fmt_money
from auditor.outputs import audit_json
from auditor.outputs.actions import ACTIONS_CSV, write_actions_csv
from auditor.outputs.jobs import JOBS_CSV, write_jobs_csv
from auditor.outputs.registry import output, outputs
from auditor.outputs.templates import environment
from auditor.outputs.view import audit_doc, build_view, fmt_num, team_of
from auditor.text import md_escape, one_line, safe_row, template_value

if TYPE_CHECKING:
    from auditor.audit import Audit



CSV_FIELDS = ("severity", "rule", "name", "resource", "team", "owner", "provider", "account", "region",
              "currency", "cost", "monthly_savings", "waived", "message", "remediation", "fingerprint",
              "clause", "evidence", "waiver_reason", "waiver_owner", "waiver_expires", "counted_under", "wasted",
              "still_running", "confidence")


def inline_code(value: Any) -> markupsafe.Markup:
    """Rule text written in Markdown (`CheckpointConfig.S3Uri`) for HTML: escaped, then `x` as <code>x</code>.
    It is made one line first (one_line), as every other value is by the finaliser (text.template_value): a
    Markup result is not finalized again, and a finding's message shown with it carries the billing's text."""
    parts = str(markupsafe.escape(one_line(value))).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: no pairs to trust
        return markupsafe.Markup("`".join(parts))
    return markupsafe.Markup("".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)))


@cache
def _env() -> jinja2.Environment:
    """One environment per process, so each template is compiled once (and read compiled where it was before:
    templates.py)."""
    env = environment("report", autoescape=jinja2.select_autoescape(["html", "html.j2"]), trim_blocks=True,
                      lstrip_blocks=True, undefined=jinja2.StrictUndefined, finalize=template_value)
    env.filters["money"] = fmt_money
    env.filters["num"] = fmt_num
    env.filters["md"] = md_escape
    env.filters["code"] = inline_code
    return env


@output("json", "audit.json", per_team=False)
def render_json(audit: Audit | AuditDoc) -> str:
    buf = io.StringIO()
    write_json(audit, buf)
    return buf.getvalue()


@output("html", "report.html")
def render_html(audit: Audit | AuditDoc, team: str | None = None) -> str:
    """The e-mail-safe HTML report; with `team`, that team's own report: its findings, spend and machines."""
    return _render("html", build_view(audit, team))


@output("md", "report.md")
def render_md(audit: Audit | AuditDoc, team: str | None = None) -> str:
    return _render("md", build_view(audit, team))


def _render(fmt: str, view: Mapping[str, Any]) -> str:
    """A report template over a view (build_view), which the HTML and the Markdown of one run share."""
    return _env().get_template(f"report.{fmt}.j2").render(**view)


_EVIDENCE = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode  # json.dumps's text, one encoder made


def _csv_row(f: dict[str, Any]) -> dict[str, Any]:
    waiver = f.get("waiver") or {}
    return {**f, "evidence": _EVIDENCE(f.get("evidence") or {}),
            "waiver_reason": waiver.get("reason"), "waiver_owner": waiver.get("owner"),
            "waiver_expires": waiver.get("expires")}


@output("csv", "findings.csv")
def render_csv(audit: Audit | AuditDoc, team: str | None = None) -> str:
    buf = io.StringIO()
    write_csv(audit, buf, team)
    return buf.getvalue()


def write_csv(audit: Audit | AuditDoc, fh: Any, team: str | None = None) -> None:
    """findings.csv, a row at a time into `fh`."""
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for f in audit_doc(audit)["findings"]:
        if team is None or team_of(f) == team:
            w.writerow(safe_row(list(map(_csv_row(f).get, CSV_FIELDS))))


def write_json(audit: Audit | AuditDoc, fh: Any) -> None:
    """audit.json into `fh`, finding by finding (audit_json.py)."""
    audit_json.write_json(audit_doc(audit), fh)


def load_audit(path: Path) -> AuditDoc:
    """A saved audit.json, to re-render (`gpu-auditor report`)."""
    from auditor.auditfile import read_audit

    return read_audit(path).doc


# the registry (outputs/registry.py), as the names the rest of the code reads
FORMATS = tuple(outputs())
FILE_NAMES = {o.name: o.file for o in outputs().values()}


def render(audit: Audit | AuditDoc, fmt: str, team: str | None = None) -> str:
    """One format of the audit; with `team`, that team's view (audit.json is always the whole audit)."""
    out = outputs()[fmt]
    return out.render(audit, team) if out.per_team and team is not None else out.render(audit)


def teams_of(audit: Audit | AuditDoc) -> list[str]:
    """Every team the audit knows: the policy's, those spend is attributed to, and those findings name."""
    doc = audit_doc(audit)
    s = doc["summary"]
    names = set(s.get("teams") or {}) | set(s.get("by_team") or {}) | {team_of(f) for f in doc["findings"]}
    return sorted(names)


def write_outputs(audit: Audit | AuditDoc, out_dir: Path, formats: tuple[str, ...] = FORMATS,
                  team: str | None = None, follow_symlinks: bool = False) -> list[Path]:
    """Render the formats asked for, then write them into `out_dir` as one (atomic.write_files); a symbolic
    link on the way to `out_dir` is refused unless `follow_symlinks`."""
    doc = audit_doc(audit)  # built (and masked) once, for every format
    # audit.json and findings.csv, which hold every finding, are written straight to their files; the reports
    # (a rule's costliest findings, the rest summed) are rendered first, from one view. All of them land together
    # (atomic.write_files).
    streamed: dict[str, Any] = {"json": lambda fh: write_json(doc, fh), "csv": lambda fh: write_csv(doc, fh, team)}
    view: Mapping[str, Any] = build_view(doc, team) if {"html", "md"} & set(formats) else {}
    rendered = {FILE_NAMES[f]: streamed.get(f) or _render(f, view) for f in formats}
    if "csv" in formats:  # the jobs and the actions beside the findings, written row by row
        rendered[JOBS_CSV] = lambda fh: write_jobs_csv(doc, fh, team)
        rendered[ACTIONS_CSV] = lambda fh: write_actions_csv(doc, fh, team)
    return write_files(target(out_dir, follow_symlinks, folder=True), rendered, "report")


# ---- the view-model: what the templates see, built from the audit.json dict alone -------------------------

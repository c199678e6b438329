"""Every output format is a view of one Audit. Outputs are rendered in memory first, then written
atomically (temp file, then rename), so a failed run never leaves half a report."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import jinja2

from auditor.engine import Audit
from auditor.errors import InputError
from auditor.model import fmt_money

_UMASK = os.umask(0)
os.umask(_UMASK)

FORMATS = ("json", "html", "md", "csv")
FILE_NAMES = {"json": "audit.json", "html": "report.html", "md": "report.md", "csv": "findings.csv"}
CSV_FIELDS = ("severity", "rule", "name", "resource", "team", "owner", "provider", "account", "region",
              "currency", "cost", "monthly_savings", "waived", "message", "remediation", "fingerprint")


def md_escape(value: Any) -> str:
    """Text from exports and tags, made inert in Markdown: no tables broken, no links or HTML injected."""
    text = "" if value is None else " ".join(str(value).split())
    for ch in "\\`*_{}[]<>()#+!|":
        text = text.replace(ch, "\\" + ch)
    return text


def fmt_num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{float(value):,.{digits}f}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("auditor.reports", "."),
                             autoescape=jinja2.select_autoescape(["html", "html.j2"]),
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["money"] = fmt_money
    env.filters["num"] = fmt_num
    env.filters["md"] = md_escape
    return env


def render_json(audit: Audit) -> str:
    return json.dumps(audit.to_dict(), indent=2, ensure_ascii=False) + "\n"


def render_html(audit: Audit) -> str:
    return _env().get_template("report.html.j2").render(**_view(audit))


def render_md(audit: Audit) -> str:
    return _env().get_template("report.md.j2").render(**_view(audit))


def safe_cell(value: Any) -> str:
    """Neutralise spreadsheet formulas: a cell that starts with = + - @ (or a tab or CR) gets a quote."""
    text = "" if value is None else str(value)
    if text and text[0] in "=+-@\t\r" and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
        return True
    except ArithmeticError:
        return False


def render_csv(audit: Audit) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for f in audit.findings:
        d = f.to_dict()
        w.writerow([safe_cell(d[k]) for k in CSV_FIELDS])
    return buf.getvalue()


RENDERERS = {"json": render_json, "html": render_html, "md": render_md, "csv": render_csv}


def write_outputs(audit: Audit, out_dir: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    rendered = {FILE_NAMES[f]: RENDERERS[f](audit) for f in formats}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the output folder: {e.strerror}", path=str(out_dir)) from None
    temps: list[tuple[str, Path]] = []
    backups: list[tuple[str, Path]] = []  # the previous report, kept until every new file is in place
    replaced: list[Path] = []
    try:
        for name, text in rendered.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out_dir)
            temps.append((tmp, out_dir / name))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a report is as readable as any file
        for _, final in temps:
            if final.exists():
                backup = tempfile.mktemp(prefix=f".{final.name}.old.", dir=out_dir)
                os.link(final, backup)
                backups.append((backup, final))
        for tmp, final in temps:
            os.replace(tmp, final)
            replaced.append(final)
    except OSError as e:
        for backup, final in backups:  # put the previous report back as it was
            if final in replaced:
                os.replace(backup, final)
        for final in replaced:
            if not any(f == final for _, f in backups) and final.exists():
                final.unlink()
        raise InputError(f"cannot write the report: {e.strerror}; the previous report is left as it was",
                         path=str(out_dir)) from None
    finally:
        for tmp, _ in temps + backups:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return [out_dir / n for n in rendered]


def _view(audit: Audit) -> dict[str, Any]:
    """The names the templates see."""
    findings = audit.findings
    by_rule: dict[str, list] = {}
    for f in findings:
        by_rule.setdefault(f.rule, []).append(f)
    return {
        "a": audit, "s": audit.summary, "window": audit.window, "policy": audit.policy,
        "findings": findings, "active": audit.active(), "by_rule": by_rule, "clauses": audit.clauses,
        "waivers": audit.waivers, "sources": audit.sources, "warnings": audit.warnings,
        "top": sorted((f for f in audit.active() if f.monthly_savings), key=lambda f: -f.monthly_savings)[:5],
    }

"""The audit's actions (audit.json `summary.actions`, figures.actions: one per resource, every finding on it
folded in, ranked by severity then dollars) as `actions.csv`, written row by row: its `saving` column adds up to
the savings headline, to the cent, and `to_check` to the savings to check."""

from __future__ import annotations

import csv
import json
from typing import TextIO

from auditor.audit_model import AuditDoc
from auditor.model import UNATTRIBUTED
from auditor.text import safe_row

ACTIONS_CSV = "actions.csv"
ACTIONS_FIELDS = ("rank", "severity", "resource", "team", "owner", "currency", "saving", "to_check", "wasted",
                  "cost", "still_running", "confidence", "rule", "name", "message", "reasons", "findings")


def write_actions_csv(doc: AuditDoc, fh: TextIO, team: str | None = None) -> None:
    """Every action (with `team`, that team's), in rank order, one row each."""
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(ACTIONS_FIELDS)
    rank = 0
    for a in doc["summary"].get("actions") or []:
        if team is None or (a.get("team") or UNATTRIBUTED) == team:
            rank += 1
            row = {**a, "rank": rank, "reasons": "; ".join(f"{r['rule']} {r['name']}" for r in a["reasons"]),
                   "findings": json.dumps([r["fingerprint"] for r in a["reasons"]])}
            w.writerow(safe_row(list(map(row.get, ACTIONS_FIELDS))))

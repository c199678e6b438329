"""Quarter over quarter: this audit against last quarter's audit.json (`gpu-auditor audit --previous FILE`).

Findings are matched by fingerprint (rule, resource and what was recommended), so a finding that is still
there is recognised whatever its cost did: resolved (open last quarter, not open now), new (open now, not
open last quarter) and still open (open in both, with the quarter it was first seen in).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from auditor.audit_model import Amount
from auditor.auditfile import read_audit


def load_previous(path: Path) -> dict[str, Any]:
    """Read last quarter's audit.json: {"path", "sha256", "doc"}; a file that is not one is an InputError."""
    saved = read_audit(path)
    return {"path": str(path), "sha256": saved.sha256, "doc": saved.doc}


def change_of(previous: Mapping[str, Amount] | None, current: Mapping[str, Amount] | None) -> dict[str, Any]:
    """Per currency: previous, current, the change and the change in percent (None where there was nothing)."""
    previous, current = previous or {}, current or {}
    change, pct = {}, {}
    for cur in sorted(set(previous) | set(current)):
        p, c = Decimal(previous.get(cur, "0")), Decimal(current.get(cur, "0"))
        change[cur] = str(c - p)
        pct[cur] = round(float((c - p) / p * 100), 1) if p else None
    return {"previous": previous, "current": current, "change": change, "change_pct": pct}


def _brief(f: dict[str, Any]) -> dict[str, Any]:
    return {k: f.get(k) for k in ("fingerprint", "rule", "name", "severity", "resource", "team", "owner", "message",
                                  "cost", "monthly_savings", "currency")}


def compare(current: Mapping[str, Any], previous: Mapping[str, Any]) -> dict[str, Any]:
    """The trend from `previous` to `current`, both audit.json dicts."""
    label = previous["window"].get("label") or previous["window"].get("start", "")
    prev_all = {f["fingerprint"]: f for f in previous["findings"]}
    prev_open = {fp: f for fp, f in prev_all.items() if not f.get("waived")}
    now_all = {f["fingerprint"]: f for f in current["findings"]}
    now_open = {fp: f for fp, f in now_all.items() if not f.get("waived")}
    # when a finding still open last quarter was first seen: as last quarter's own trend said, else then
    since = {f["fingerprint"]: f.get("since", label)
             for f in (previous.get("trend") or {}).get("findings", {}).get("still_open", [])}
    new = [{**_brief(f), "was_waived": fp in prev_all} for fp, f in now_open.items() if fp not in prev_open]
    still = [{**_brief(f), "since": since.get(fp, label)} for fp, f in now_open.items() if fp in prev_open]
    resolved = [{**_brief(f), "now": "waived" if fp in now_all else "gone"}
                for fp, f in prev_open.items() if fp not in now_open]
    ps, cs = previous["summary"], current["summary"]
    return {
        "previous": {"label": label, "start": previous["window"].get("start"), "end": previous["window"].get("end"),
                     "generated_at": previous.get("generated_at"), "policy_version": previous["policy"].get("version")},
        "billed_cost": change_of(ps.get("billed_cost"), cs.get("billed_cost")),
        "gpu_cost": change_of(ps.get("gpu_cost"), cs.get("gpu_cost")),
        "monthly_savings": change_of(ps.get("monthly_savings"), cs.get("monthly_savings")),
        "by_team": {t: change_of((ps.get("by_team") or {}).get(t), (cs.get("by_team") or {}).get(t))
                    for t in sorted(set(ps.get("by_team") or {}) | set(cs.get("by_team") or {}))},
        "findings": {"new": new, "still_open": still, "resolved": resolved,
                     "counts": {"previous_open": len(prev_open), "open": len(now_open), "new": len(new),
                                "still_open": len(still), "resolved": len(resolved)}},
        "clauses": [{"clause": c["clause"], "rule": c["rule"], "previous": was.get(c["rule"]), "current": c["status"]}
                    for was in [{p["rule"]: p["status"] for p in previous.get("clauses", [])}]
                    for c in current.get("clauses", [])],
    }

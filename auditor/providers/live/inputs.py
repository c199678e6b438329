"""Snapshot folders read back as audit inputs: their billing files, their inventories merged, their windows
joined, the sources their manifests list as failed (a partial audit), and files changed since the pull."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from auditor.errors import InputError
from auditor.files import sha256_of as sha256
from auditor.providers.live.pull import MANIFEST_SCHEMA, utc
from auditor.window import Window


@dataclass
class AuditInputs:
    """The audit's inputs once snapshot folders among the billing paths are opened."""

    billing: list[Path]
    inventory: dict[str, Any] | None = None
    inventory_label: str | None = None
    window: Window | None = None
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _manifest(path: Path) -> dict[str, Any] | None:
    """The snapshot manifest of a folder, or None when the folder is not a snapshot (a bare inventory.json
    beside billing files makes one too)."""
    m = path / "manifest.json"
    if os.path.isfile(m):
        try:
            doc = json.loads(m.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read the snapshot manifest: {e}", path=str(m)) from None
        if isinstance(doc, dict) and doc.get("schema") == MANIFEST_SCHEMA:
            return doc
        return None
    return {} if os.path.isfile(path / "inventory.json") else None


def audit_inputs(paths: list[Path], inventory: Path | None = None) -> AuditInputs:
    """Split snapshot folders out of the billing paths: their billing files are read as billing, their
    inventories merged, their windows joined, and the sources their manifests list as failed reported."""
    from auditor.providers.billing.detect import is_data
    from auditor.providers.live.snapshot import load_snapshot
    from auditor.readable import files_under

    out = AuditInputs(billing=[])
    docs, labels = [], []
    starts: list[datetime] = []
    ends: list[datetime] = []
    for p in map(Path, paths):
        manifest = _manifest(p) if os.path.isdir(p) else None  # not Path.is_dir: raises on EACCES
        if manifest is None:
            out.billing.append(p)
            continue
        billing = p / "billing"
        if billing.is_dir() and files_under(billing, is_data, "billing file"):  # an unreadable one: named
            out.billing.append(billing)
        if (p / "inventory.json").is_file():
            docs.append(load_snapshot(p / "inventory.json"))
            labels.append(str(p / "inventory.json"))
        if manifest.get("window"):
            starts.append(utc(manifest["window"]["start"]))
            ends.append(utc(manifest["window"]["end"]))
        for f in manifest.get("failed", []):
            out.missing.append(f"{p}: {f['name']}")
            out.warnings.append(f"partial audit: {p} lacks {f['name']} ({f['reason']}); "
                                "what that source holds is missing from this audit")
        out.warnings += _check_files(p, manifest)
    if inventory is not None:
        if docs:
            out.warnings.append(f"--inventory {inventory} is used instead of the snapshots' inventory.json")
        docs, labels = [load_snapshot(inventory)], [str(inventory)]
    if docs:
        out.inventory = merge_inventories(docs)
        out.inventory_label = ", ".join(labels)
    if starts:
        start, end = min(starts), max(ends)
        out.window = Window.of(start, end)
    return out


def _check_files(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """Warn where a file changed since the pull: the snapshot is evidence, and its hashes say so."""
    warnings = []
    for f in manifest.get("files", []):
        path = folder / f["path"]
        if not path.is_file():
            warnings.append(f"{path}: listed in the snapshot manifest but missing")
        elif path.stat().st_size != f.get("bytes") or sha256(path) != f.get("sha256"):
            warnings.append(f"{path}: changed since the pull (SHA-256 differs from the snapshot manifest)")
    return warnings


def merge_inventories(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several snapshots as one: an asset or job seen twice (an EKS node is an EC2 instance too) is kept
    once, the first sighting's fields completed by the later ones."""
    if len(docs) == 1:
        return docs[0]
    merged: dict[str, Any] = {"version": 1, "assets": [], "gpu_usage": [], "jobs": []}
    for key in ("assets", "jobs"):
        by_id: dict[str, dict] = {}
        for doc in docs:
            for item in doc[key]:
                have = by_id.setdefault(item["id"], dict(item))
                for k, v in item.items():
                    if have.get(k) in (None, {}, []) and v not in (None, {}, []):
                        have[k] = v
        merged[key] = list(by_id.values())
    merged["gpu_usage"] = [u for doc in docs for u in doc["gpu_usage"]]
    for key in ("prices", "gpu_units", "gpu_allocations", "slice_usage"):
        merged[key] = [x for doc in docs for x in doc.get(key, [])]
    return merged

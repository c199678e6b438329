"""Training-job manifests to `Job` entities, for the gate: one parser per platform, and their registry.

Each platform module reads its own manifests and registers its `parse` with `registry.platform`, with how a
document is known to be written for it; `platform_of` asks each in turn (Cloud Custodian keeps one name->class
map per kind the same way). Kubernetes readers register by API group and kind (`registry.kinds`).
Every job keeps its file and the line its document starts on. Nothing here reaches a cloud.

A run reads every file it is given: a file that cannot be read (not YAML, a bad value, a kind the gate does not
read) is recorded as a failure naming the file and line, and the other files are still read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from auditor.errors import InputError
from auditor.model import Job
from auditor.providers.catalog import Catalog
from auditor.providers.manifests import kubernetes, registry, skypilot
from auditor.providers.manifests.common import (
    ANNOTATION_PREFIX,
    INTERVAL_KEY,
    RUNTIME_KEY,
    Context,
    checkpoint_of,
    gpu_model_named,
    runtime_hours,
)
from auditor.providers.manifests.documents import Document, UnknownKind, expand, read_documents, unrendered

__all__ = ["ANNOTATION_PREFIX", "INTERVAL_KEY", "Context", "Document", "Loaded", "UnknownKind",
           "checkpoint_of", "expand", "gpu_model_named", "load_jobs", "parse", "platform_of", "read_documents"]



def platform_of(doc: Document) -> str:
    """The platform a document is written for, from the keys that only that platform's manifests carry."""
    d = doc.data
    known = registry.platforms()
    if isinstance(d, dict):
        for p in known:
            if p.detect(d):
                return p.name
    whats = [p.what for p in known]
    raise doc.error(f"unknown manifest kind: not a {', '.join(whats[:-1])}, or {whats[-1]}", UnknownKind)


def parse(doc: Document, ctx: Context | Catalog) -> list[Job]:
    """The jobs of one document; [] for a Kubernetes object that runs nothing on a GPU."""
    ctx = ctx if isinstance(ctx, Context) else Context(ctx)
    platform = platform_of(doc)
    unrendered(doc)
    return registry.PLATFORMS[platform].parse(doc, ctx)


@dataclass
class Loaded:
    """What a run read: the jobs, every file found, the files that could not be read (one error each, naming the
    file and line), and the documents of kinds the gate does not read that --skip-unknown let pass."""

    jobs: list[Job] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    failures: list[InputError] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def load_jobs(paths: Iterable[str | Path], catalog: Catalog, skip_unknown: bool = False) -> Loaded:
    """Jobs from manifest files and folders. Every file is read first, so that a TrainJob finds the runtime and
    a server the disruption budget that another file holds; then each file is parsed on its own."""
    out, ctx = Loaded(), Context(catalog)
    files: list[tuple[str, list[Document]]] = []
    seen: set[str] = set()
    for given in paths:
        try:
            found = expand([given])
        except InputError as e:  # InputErrors: every unreadable folder and link under it, each a failure
            out.failures.extend(getattr(e, "errors", [e]))
            continue
        for path in found:
            if (real := os.path.realpath(path)) in seen:  # named twice (a folder and a file in it): one file
                continue
            seen.add(real)
            out.files.append(str(path))
            try:
                docs = read_documents(path)
            except InputError as e:
                out.failures.append(e)
                continue
            files.append((str(path), docs))
            for doc in docs:
                kubernetes.collect(doc, ctx)
    for _, docs in files:
        try:
            jobs, skipped = _file_jobs(docs, ctx, skip_unknown)
        except InputError as e:
            out.failures.append(e)
            continue
        out.jobs += jobs
        out.skipped += skipped
    return out


def _file_jobs(docs: list[Document], ctx: Context, skip_unknown: bool) -> tuple[list[Job], list[str]]:
    """The jobs of one file, all or nothing: a file with a bad document is a failure of its own."""
    pipeline = skypilot.pipeline_name(docs)
    jobs, skipped = [], []
    for doc in docs[1:] if pipeline is not None else docs:
        try:
            if pipeline is not None:  # a SkyPilot pipeline or job group: its tasks, less those on no GPU
                unrendered(doc)
                parsed = [j for j in skypilot.parse(doc, ctx, pipeline) if j.accelerator or j.gpu_model]
            else:
                parsed = parse(doc, ctx)
        except UnknownKind as e:
            if not skip_unknown:
                raise
            skipped.append(str(e))
            continue
        for job in parsed:
            if job.max_runtime_s is None and RUNTIME_KEY in job.annotations and job.kind != "sweep":
                job.max_runtime_s = runtime_hours(job.annotations[RUNTIME_KEY], doc)
            jobs.append(job)
    return jobs, skipped

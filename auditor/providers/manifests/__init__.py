"""Training-job manifests to `Job` entities, for the gate: one parser per platform, and their registry.

Each platform module reads its own manifests; `PARSERS` maps a platform's name to its `parse`, and `platform_of`
says which platform a document is written for (Cloud Custodian keeps one name->class map per kind the same way).
Every job keeps its file and the line its document starts on. Nothing here reaches a cloud.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from auditor.catalog import Catalog
from auditor.model import Job
from auditor.providers.manifests import azureml, kubernetes, sagemaker, skypilot, vertex
from auditor.providers.manifests.common import (
    ANNOTATION_PREFIX,
    INTERVAL_KEY,
    RUNTIME_KEY,
    checkpoint_of,
    gpu_model_named,
    runtime_hours,
)
from auditor.providers.manifests.documents import Document, UnknownKind, expand, read_documents

__all__ = ["ANNOTATION_PREFIX", "INTERVAL_KEY", "PARSERS", "Document", "UnknownKind", "checkpoint_of", "expand",
           "gpu_model_named", "load_jobs", "parse", "platform_of", "read_documents"]

Parser = Callable[[Document, Catalog], list[Job]]

PARSERS: dict[str, Parser] = {
    "kubernetes": kubernetes.parse,
    "sagemaker": lambda doc, catalog: [sagemaker.parse(doc, catalog)],
    "vertex": lambda doc, catalog: [vertex.parse(doc, catalog)],
    "azureml": lambda doc, catalog: [azureml.parse(doc, catalog)],
    "skypilot": lambda doc, catalog: [skypilot.parse(doc, catalog)],
}


def platform_of(doc: Document) -> str:
    """The platform a document is written for, from the keys that only that platform's manifests carry."""
    d = doc.data
    if isinstance(d, dict):
        if "apiVersion" in d and "kind" in d:
            return "kubernetes"
        if "TrainingJobName" in d or "AlgorithmSpecification" in d:
            return "sagemaker"
        if any(k in d for k in ("jobSpec", "job_spec", "workerPoolSpecs", "worker_pool_specs")):
            return "vertex"
        if "azureml" in str(d.get("$schema", "")).lower() or \
                (d.get("type") in ("command", "sweep") and any(k in d for k in ("command", "trial", "compute"))):
            return "azureml"
        if set(d) <= skypilot.SKYPILOT_KEYS and ("resources" in d or "run" in d):
            return "skypilot"
    raise doc.error("unknown manifest kind: not a Kubernetes or Kubeflow object, SageMaker CreateTrainingJob "
                    "request, Vertex AI CustomJob, Azure ML command or sweep job, or SkyPilot task", UnknownKind)


def parse(doc: Document, catalog: Catalog) -> list[Job]:
    """The jobs of one document; [] for a Kubernetes object that runs nothing on a GPU."""
    return PARSERS[platform_of(doc)](doc, catalog)


def load_jobs(paths: Iterable[str | Path], catalog: Catalog,
              skipped: list[str] | None = None) -> tuple[list[Job], list[str]]:
    """Jobs from manifest files and folders, and the files read. With a `skipped` list, a document of a kind
    the gate does not read is noted there instead of stopping the run."""
    jobs, files = [], []
    for path in expand(paths):
        files.append(str(path))
        for doc in read_documents(path):
            try:
                parsed = parse(doc, catalog)
            except UnknownKind as e:
                if skipped is None:
                    raise
                skipped.append(str(e))
                continue
            for job in parsed:
                if job.max_runtime_s is None and RUNTIME_KEY in job.annotations:
                    job.max_runtime_s = runtime_hours(job.annotations[RUNTIME_KEY], doc)
                jobs.append(job)
    return jobs, files

"""`gpu-auditor pull`: read billing and live GPU inventory from one provider into a snapshot folder, and
read snapshot folders back as audit inputs.

A snapshot folder holds what the clouds said at one moment, so an audit on it is reproducible and can be
reviewed later as evidence:

    SNAPSHOT/
      billing/...       billing export files as the provider delivered them (CUR parts, BigQuery rows, ...)
      inventory.json    GPU assets, their utilisation and training jobs (schema: auditor/providers/live/snapshot.py)
      manifest.json     the window, the sources asked, what each returned, the SHA-256 of every file, and
                        every source that failed with its reason

Each provider adapter (`auditor/providers/live/<provider>.py` and its `<provider>_*.py` modules, the only ones
that import a cloud SDK) registers its sources with `Pull.run`: a source that fails (no credentials, access
denied, endpoint down) is recorded and the others still run. The folder is written under a temporary name and
renamed into place, so a failed pull never leaves half a snapshot. No credential or token is written: adapters
register the secrets they hold with `Pull.secret`, every recorded message is redacted, and the written JSON is
checked.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, overload
from urllib.parse import urlsplit

from auditor import __version__
from auditor.atomic import Staging, target
from auditor.errors import InputError
from auditor.files import sha256_of as sha256  # the snapshot's hashes are the audit's
from auditor.retry import Retry  # throttled calls back off 1, 2, 4, 8, 16 s
from auditor.secret_patterns import mask
from auditor.window import Window

MANIFEST_SCHEMA = "gpu-auditor/snapshot-manifest@1"
# Each provider's adapter module in this package; its SDKs are the package extra of the same name.
ADAPTERS = {"aws": "aws", "gcp": "gcp", "azure": "azure", "k8s": "k8s"}

# Environment variables whose values are credentials: never written, even inside an error message.
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AZURE_CLIENT_SECRET",
              "AZURE_PASSWORD", "AZURE_CLIENT_CERTIFICATE_PASSWORD", "GOOGLE_OAUTH_ACCESS_TOKEN")

# ---- time ---------------------------------------------------------------------------------------------

@overload
def utc(value: None) -> None: ...


@overload
def utc(value: datetime | date | str) -> datetime: ...


def utc(value: datetime | date | str | None) -> datetime | None:
    """A naive UTC datetime from an aware or naive datetime, a date or ISO-8601 text (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day)
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def iso(value: datetime | None) -> str | None:
    return None if value is None else utc(value).isoformat() + "Z"


# ---- retries and pages ----------------------------------------------------------------------------------

def pages(call: Callable[..., dict], retry: Retry, throttled: Callable[[BaseException], bool],
          token_in: str = "NextToken", token_out: str = "NextToken", **kwargs: Any) -> Iterator[dict]:
    """Every page of a token-paginated API, each call retried when throttled."""
    token, seen = None, set()
    while True:
        args = {**kwargs, token_in: token} if token else kwargs
        page = retry.call(call, throttled=throttled, **args)
        yield page
        token = page.get(token_out) if isinstance(page, dict) else getattr(page, token_out, None)
        if not token:
            return
        if token in seen:
            raise RuntimeError(f"the API returned the page token {token_out} twice; stopped paging")
        seen.add(token)


# ---- the pull -----------------------------------------------------------------------------------------

@dataclass
class PullOptions:
    provider: str
    window: Window
    regions: list[str] = field(default_factory=list)
    profile: str | None = None  # AWS named profile
    assume_role: str | None = None  # AWS: role name assumed in each account of the organisation
    accounts: list[str] = field(default_factory=list)  # AWS accounts, GCP projects or Azure subscriptions
    billing: str | None = None  # s3://bucket/prefix of a CUR, or project.dataset.table of a BigQuery export
    kubeconfig: str | None = None
    context: str | None = None
    prometheus: str | None = None  # base URL of the Prometheus HTTP API holding DCGM exporter metrics
    prices: bool = False  # also read on-demand prices of the GPU types seen from the provider's price API
    # Kubernetes with Prometheus: the policy's counters of a job's tokens and samples ({"tokens": [metric, ...]})
    # and the series labels that may name the job (attribution.token_series, sample_series, series_job_labels)
    unit_series: dict[str, list[str]] = field(default_factory=dict)
    series_job_labels: list[str] = field(default_factory=list)


class Pull:
    """What one pull collected, and the record of every source it asked."""

    def __init__(self, options: PullOptions, root: Path, retry: Retry | None = None,
                 progress: Callable[[str], None] | None = None):
        self.options = options
        self.root = root
        self.retry = retry or Retry()
        self._progress = progress
        self.assets: list[dict] = []
        self.gpu_usage: list[dict] = []
        self.jobs: list[dict] = []
        self.prices: list[dict] = []
        # Kubernetes GPU sharing (optional in the snapshot): units per node, pods holding them, DCGM per slice
        self.gpu_units: list[dict] = []
        self.gpu_allocations: list[dict] = []
        self.slice_usage: list[dict] = []
        self.sources: list[dict] = []
        self._notes: list[str] = []  # what the running source checked or noticed, said in its line
        self._unread: dict[str, int] = {}  # why -> how many items of the running source could not be read
        self._secrets: set[str] = {os.environ[k] for k in SECRET_ENV if len(os.environ.get(k, "")) >= 4}

    # secrets
    def secret(self, *values: Any) -> None:
        """Register credential values (keys, tokens, passwords) so they are never written."""
        self._secrets.update(str(v) for v in values if v is not None and len(str(v)) >= 4)

    def redact(self, text: str) -> str:
        for s in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(s, "***")
        return str(mask(text))

    def progress(self, message: str) -> None:
        if self._progress:
            self._progress(self.redact(message))

    # sources
    def run(self, name: str, kind: str, fn: Callable[[], dict[str, int] | None]) -> bool:
        """Run one source: `fn` adds what it found and returns its counts, and says with `note` and `unread`
        what it checked and what it could not read. A failure is recorded with its reason and the pull goes on.
        True when the source completed."""
        started = time.monotonic()
        self.progress(f"pulling {name}")
        entry: dict[str, Any] = {"name": name, "kind": kind}
        self._notes, self._unread = [], {}
        try:
            counts = fn() or {}
        except Exception as e:  # noqa: BLE001 - any failure of one source is recorded, not fatal
            entry.update(status="failed", reason=self.redact(describe_error(e)))
            self.progress(f"{name}: failed: {entry['reason']}")
        else:
            entry.update(status="ok", counts=counts)
        if self._notes:
            entry["notes"] = [self.redact(n) for n in self._notes]
        if self._unread:
            entry["unread"] = {self.redact(why): n for why, n in sorted(self._unread.items())}
        entry["seconds"] = round(time.monotonic() - started, 3)
        self.sources.append(entry)
        return bool(entry["status"] == "ok")

    def note(self, text: str) -> None:
        """Say in the running source's line what it checked or found (an empty answer, the columns it read)."""
        if text not in self._notes:
            self._notes.append(text)

    def unread(self, why: str, n: int = 1) -> None:
        """Count items of the running source's answer that could not be read, by why: its line says so."""
        self._unread[why] = self._unread.get(why, 0) + n

    def fail(self, name: str, kind: str, reason: str) -> None:
        """Record a source that could not even be asked (no credentials for it, nothing configured)."""
        self.sources.append({"name": name, "kind": kind, "status": "failed", "reason": self.redact(reason),
                             "seconds": 0.0})
        self.progress(f"{name}: failed: {self.redact(reason)}")

    def billing_path(self, relative: str) -> Path:
        """Where a billing file goes inside the snapshot (`billing/<relative>`), its folders made."""
        parts = [p for p in re.split(r"[\\/]+", relative) if p not in ("", ".", "..")]
        if not parts:
            raise ValueError(f"bad billing file name {relative!r}")
        path = self.root.joinpath("billing", *parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def failed(self) -> list[dict]:
        return [{"name": s["name"], "reason": s["reason"]} for s in self.sources if s["status"] == "failed"]


class UnreadableAnswer(RuntimeError):
    """An API answered with a shape the adapter cannot read (a column or field missing, a link that is not a
    URL): the source fails, saying what it got and what it needs, rather than writing what it cannot vouch for."""


def source_line(source: dict[str, Any]) -> str:
    """What a source's line in the pull says: its counts (or why it failed), then what it noted and what it
    could not read."""
    parts = [", ".join(f"{k} {v}" for k, v in source.get("counts", {}).items()) if source["status"] == "ok"
             else source["reason"]]
    parts += source.get("notes", [])
    if source.get("unread"):
        parts.append("not read: " + ", ".join(f"{n} {why}" for why, n in source["unread"].items()))
    return "; ".join(p for p in parts if p)


def http_link(link: Any, key: str, base: str | None = None) -> str:
    """A paging link (`nextLink`, `NextPageLink`) as given, when it is an absolute http(s) URL (and, with
    `base`, on the same scheme and host: the bearer token goes wherever the link points); else the answer is
    refused in one line naming it."""
    parts = urlsplit(link) if isinstance(link, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise UnreadableAnswer(f"the API's {key} {str(link)[:200]!r} is not an http(s) URL; stopped paging")
    if base is not None:
        want = urlsplit(base)
        if (parts.scheme, parts.netloc.lower()) != (want.scheme, want.netloc.lower()):
            raise UnreadableAnswer(f"the API's {key} {link[:200]!r} leaves {want.scheme}://{want.netloc}; "
                                   "not followed")
    return str(link)


def describe_error(e: BaseException) -> str:
    """One line for the manifest: what went wrong, in the SDK's own words where it has them."""
    response = getattr(e, "response", None)
    if isinstance(response, dict) and "Error" in response:  # botocore ClientError
        err = response["Error"]
        return f"{err.get('Code', type(e).__name__)}: {err.get('Message', '')}".strip()
    text = " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {text}"[:500]


def _run_adapter(pull: Pull) -> None:
    provider = pull.options.provider
    if provider not in ADAPTERS:
        raise InputError(f"--provider {provider!r}: use one of {', '.join(ADAPTERS)}")
    try:
        module = importlib.import_module(f"auditor.providers.live.{ADAPTERS[provider]}")
    except ImportError as e:
        raise InputError(f"pulling from {provider} needs its SDK ({e.name} is missing): "
                         f"pip install 'gpu-auditor[{provider}]'") from None
    module.pull(pull)


def pull_snapshot(options: PullOptions, out: Path, force: bool = False, retry: Retry | None = None,
                  progress: Callable[[str], None] | None = None,
                  adapter: Callable[[Pull], None] | None = None, follow_symlinks: bool = False) -> dict[str, Any]:
    """Pull from the provider into the snapshot folder `out`, atomically (a symbolic link on the way refused
    unless `follow_symlinks`). Returns the manifest."""
    out = target(Path(out), follow_symlinks, folder=True)
    if out.exists() and not force and not (out.is_dir() and not any(out.iterdir())):
        raise InputError("already exists; use --force to replace it", path=str(out))
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", path=str(out))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Staging(out, carry=False)  # the previous snapshot is replaced whole, in one step
    except OSError as e:
        raise InputError(f"cannot write the snapshot: {e.strerror}", path=str(out)) from None
    try:
        pull = Pull(options, staging.path, retry, progress)
        (adapter or _run_adapter)(pull)
        manifest = _finish(pull, staging.path)
        try:
            staging.publish()
        except OSError as e:
            raise InputError(f"cannot write the snapshot: {e.strerror}", path=str(out)) from None
    finally:
        staging.close()
    return manifest


def _finish(pull: Pull, root: Path) -> dict[str, Any]:
    from auditor.providers.live.snapshot import SNAPSHOT
    from auditor.schema import Validator

    o = pull.options
    for s in pull.sources:  # again, with every secret the adapter learnt by the end (a token fetched late)
        if "reason" in s:
            s["reason"] = pull.redact(s["reason"])
    window = {"start": iso(o.window.start), "end": iso(o.window.end)}
    inventory = {"version": 1, "generated_at": iso(datetime.now(UTC)), "source": f"gpu-auditor pull --provider "
                 f"{o.provider}", "window": window, "assets": pull.assets, "gpu_usage": pull.gpu_usage,
                 "jobs": pull.jobs, "prices": pull.prices}
    inventory.update({k: v for k, v in (("gpu_units", pull.gpu_units), ("gpu_allocations", pull.gpu_allocations),
                                        ("slice_usage", pull.slice_usage)) if v})
    text = json.dumps(inventory, indent=2, sort_keys=False, default=_json_default)
    Validator("inventory.json (pulled)").check(json.loads(text), SNAPSHOT)  # an adapter bug fails here, not later
    _write(root / "inventory.json", text, pull)
    files: list[dict[str, Any]] = [
        {"path": p.relative_to(root).as_posix(), "bytes": p.stat().st_size, "sha256": sha256(p)}
        for p in sorted(root.rglob("*")) if p.is_file()]
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "tool": {"name": "gpu-auditor", "version": __version__},
        "generated_at": inventory["generated_at"],
        "provider": o.provider,
        "window": {**window, "label": o.window.label},
        "request": {"regions": o.regions, "profile": o.profile, "assume_role": o.assume_role,
                    "accounts": o.accounts, "billing": o.billing, "kubeconfig": o.kubeconfig,
                    "context": o.context, "prometheus": o.prometheus, "prices": o.prices},
        "sources": pull.sources,
        "failed": pull.failed,
        "counts": {"assets": len(pull.assets), "gpu_usage": len(pull.gpu_usage), "jobs": len(pull.jobs),
                   "prices": len(pull.prices), "gpu_allocations": len(pull.gpu_allocations),
                   "slice_usage": len(pull.slice_usage),
                   "billing_files": sum(1 for f in files if f["path"].startswith("billing/"))},
        "retries": pull.retry.retried,
        "files": files,
    }
    _write(root / "manifest.json", json.dumps(manifest, indent=2, default=_json_default), pull)
    return manifest


def _write(path: Path, text: str, pull: Pull) -> None:
    for s in pull._secrets:
        if s in text:  # redaction is applied to messages; this catches a secret an adapter put in a field
            raise RuntimeError(f"refusing to write {path.name}: it would contain a credential")
    path.write_text(text + "\n", encoding="utf-8")


def _json_default(v: Any) -> Any:
    if isinstance(v, datetime):
        return iso(v)
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


# ---- helpers the adapters share --------------------------------------------------------------------------

# GPU names as the APIs spell them (EC2 GpuInfo, GPU feature discovery labels, GCP accelerator types, DCGM
# modelName) -> the catalog's model names. Checked in order; the first pattern that matches wins.
_GPU_NAMES = [
    (r"gb200", "GB200"), (r"b200", "B200"), (r"mi300x", "MI300X"),
    (r"h200", "H200"), (r"h100.*nvl|nvl.*h100", "H100-NVL"), (r"h100", "H100"), (r"\ba30\b", "A30"),
    (r"a100.*80|80.*a100", "A100-80GB"), (r"a100", "A100"), (r"a10g", "A10G"), (r"l40s", "L40S"),
    (r"\bl4\b|nvidia-l4|-l4$|^l4", "L4"), (r"a10\b|a10$|-a10-", "A10"), (r"t4", "T4"),
    (r"v100.*32|32.*v100", "V100-32GB"), (r"v100", "V100"), (r"m60", "M60"), (r"p100", "P100"), (r"p4\b", "P4"),
]


def gpu_model(name: str | None, memory_gb: float | None = None) -> str | None:
    """The catalog's model name for a GPU as an API names it; memory tells A100 40 from 80 GB where the
    name does not."""
    if not name:
        return None
    text = name.lower().replace("_", "-")
    for pattern, model in _GPU_NAMES:
        if re.search(pattern, text):
            if model == "A100" and memory_gb and memory_gb > 48:
                return "A100-80GB"
            if model == "V100" and memory_gb and memory_gb > 20:
                return "V100-32GB"
            return model
    return name


def usage_summary(asset_id: str, series: list[list[tuple[datetime, float]]],
                  memory: list[list[tuple[datetime, float]]], period_s: int, source: str,
                  memory_scale: float = 1 / 1024) -> dict[str, Any] | None:
    """One `gpu_usage` entry from per-GPU utilisation series (percent per period) and per-GPU memory-used
    series (in MiB by default): mean and p95 of the machine's per-period mean utilisation, and the peak
    memory of its fullest GPU, over the span the samples cover."""
    by_time: dict[datetime, list[float]] = {}
    for points in series:
        for ts, value in points:
            by_time.setdefault(utc(ts), []).append(float(value))
    if not by_time:
        return None
    per_period = sorted(sum(v) / len(v) for v in by_time.values())
    p95 = per_period[min(len(per_period) - 1, max(0, -(-95 * len(per_period) // 100) - 1))]
    peaks = [float(v) for points in memory for _, v in points]
    times = sorted(by_time)
    return {"asset_id": asset_id, "window_start": iso(times[0]),
            "window_end": iso(times[-1] + timedelta(seconds=period_s)), "samples": len(per_period),
            "mean_util_pct": round(min(100.0, sum(per_period) / len(per_period)), 3),
            "p95_util_pct": round(min(100.0, p95), 3),
            "peak_mem_gb": round(max(peaks) * memory_scale, 3) if peaks else None, "source": source}

"""The Prometheus HTTP API as `gpu-auditor pull` reads it: `/api/v1/query_range`, a matrix of series."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime

from auditor.providers.live.pull import Pull


def throttled(e: BaseException) -> bool:
    return isinstance(e, urllib.error.HTTPError) and e.code in (429, 503)


def query_range(p: Pull, query: str, start: datetime, end: datetime, step_s: int) -> list[dict]:
    """The series of a range query, each `{"metric": {labels}, "values": [[epoch, "value"], ...]}`."""
    params = urllib.parse.urlencode({"query": query, "start": f"{start.timestamp():.0f}",
                                     "end": f"{end.timestamp():.0f}", "step": str(step_s)})
    if not p.options.prometheus:
        raise ValueError("no Prometheus URL (--prometheus)")
    url = p.options.prometheus.rstrip("/") + "/api/v1/query_range?" + params

    def get() -> dict:
        with urllib.request.urlopen(url, timeout=60) as r:
            answer: dict = json.loads(r.read())
            return answer

    doc: dict = p.retry.call(get, throttled=throttled)
    if doc.get("status") != "success":
        raise RuntimeError(f"Prometheus: {doc.get('errorType')}: {doc.get('error')}")
    result: list[dict] = doc["data"]["result"]
    return result


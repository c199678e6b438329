"""A real Prometheus server (Debian's `prometheus`) on loopback, serving series backfilled with
`promtool tsdb create-blocks-from openmetrics` from an OpenMetrics text the test writes."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(prom: str, promtool: str, root: Path, openmetrics: str) -> Iterator[str]:
    """Prometheus over the series of `openmetrics`, its data in `root`; yields its base URL."""
    (root / "series.om").write_text(openmetrics)
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(root / "series.om"), str(root / "data")],
                   check=True, capture_output=True, timeout=120)
    (root / "prometheus.yml").write_text("global: {}\n")
    port = free_port()
    log = open(root / "prometheus.log", "wb")
    proc = subprocess.Popen([prom, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
                             "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"Prometheus did not start: {(root / 'prometheus.log').read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()

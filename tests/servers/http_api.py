"""A loopback HTTP server that answers like a cloud API: a handler maps each request to a status and a JSON
body (recorded responses, shaped as the APIs document them), and optionally headers; a body of None is an empty
answer (`204 No Content`). Every request is kept for the test to check."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "recorded"


def recorded(name: str) -> Any:
    """A recorded API response from fixtures/recorded/."""
    return json.loads((RECORDED / name).read_text(encoding="utf-8"))


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def arg(self, name: str, default: str | None = None) -> str | None:
        return self.query.get(name, [default])[0]


Handler = Callable[[Request], tuple[int, Any] | tuple[int, Any, dict[str, str]]]


@dataclass
class ApiServer:
    handler: Handler
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self):
        server = self

        class H(BaseHTTPRequestHandler):
            def _serve(self):
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                headers = {k.lower(): v for k, v in self.headers.items()}
                req = Request(self.command, parts.path, parse_qs(parts.query), headers,
                              self.rfile.read(length) if length else b"")
                server.requests.append(req)
                status, body, *more = server.handler(req)
                data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, *args):  # quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

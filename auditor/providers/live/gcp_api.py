"""What the GCP adapter's modules share: the OAuth scope, the page size and timeout asked for, which failures are
throttling, the client options that send a client to `GPU_AUDITOR_GCP_ENDPOINT`, and the pages of a google-cloud
client's list method, one call a page so that the pull's backoff retries each."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions

from auditor.providers.live.pull import Pull, pages

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
PAGE = 500
TIMEOUT = 60


def throttled(e: BaseException) -> bool:
    if isinstance(e, gexc.TooManyRequests | gexc.ServiceUnavailable):
        return True
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None) in (429, 503)


def client_options(endpoint: str | None) -> ClientOptions | None:
    """A client's options for the endpoint named (a private endpoint, the tests' server); None for Google's."""
    return ClientOptions(api_endpoint=endpoint) if endpoint else None


def list_pages(p: Pull, method: Callable[..., Any], call: dict[str, Any] | None = None,
               **request: Any) -> Iterator[Any]:
    """Every page of a google-cloud client's list method, asked one page a call; `call` holds the method's other
    arguments (`retry=None`, a timeout)."""
    def one_page(**req: Any) -> Any:
        return next(iter(method(request=req, **(call or {})).pages))

    return pages(one_page, p.retry, throttled, token_in="page_token", token_out="next_page_token", **request)

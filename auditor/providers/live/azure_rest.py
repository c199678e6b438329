"""What the Azure adapter's modules share: the ARM endpoint, the GPU VM sizes, which failures are throttling, and
GETs on an Azure REST API (Resource Manager, Retail Prices) through azure.core's pipeline, each answer a JSON
object, every page of a list followed (each link checked to be an http(s) URL on the endpoint's host, a link seen
twice stopping the paging)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest, HttpResponse

from auditor.providers.live.pull import Pull, UnreadableAnswer, http_link

ARM = "https://management.azure.com"
GPU_SIZE = re.compile(r"(?i)^Standard_N[CDVG]")


def throttled(e: BaseException) -> bool:
    return isinstance(e, HttpResponseError) and e.status_code in (429, 503)


class Rest:
    """GETs on one Azure REST endpoint through azure.core's pipeline, for the APIs whose SDKs this adapter does
    without (Monitor metrics, Azure ML, Retail Prices); a list's pages are linked by `link` (ARM's `nextLink`).
    No SDK retry policy: the pull's own backoff retries throttling, once, in one place."""

    def __init__(self, p: Pull, base: str, call: dict | None = None, auth: Any = None, link: str = "nextLink",
                 parse_float: Callable[[str], Any] = float):
        from azure.core import PipelineClient
        from azure.core.pipeline import policies

        self.p, self.base, self.call, self.link, self.parse_float = p, base.rstrip("/"), call or {}, link, parse_float
        self.client: PipelineClient[HttpRequest, HttpResponse] = PipelineClient(self.base, policies=[
            policies.RequestIdPolicy(), policies.HeadersPolicy(), policies.UserAgentPolicy(sdk_moniker="gpu-auditor"),
            policies.ProxyPolicy(), policies.RedirectPolicy(), *([auth] if auth else [])])

    @classmethod
    def arm(cls, p: Pull, credential, base: str, call: dict) -> Rest:
        """Azure Resource Manager at `base`, with the ARM bearer-token policy on the credential."""
        from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy

        return cls(p, base, call, auth=ARMChallengeAuthenticationPolicy(credential, f"{ARM}/.default"))

    def get(self, url: str, **params: str) -> dict:
        """One GET (a path under the endpoint, or a link on the endpoint's host), retried when throttled."""
        if not url.startswith("/"):
            url = http_link(url, self.link, self.base)
        request = HttpRequest("GET", self.base + url if url.startswith("/") else url, params=params)

        def send() -> dict:
            response = self.client.send_request(request, **self.call)
            response.raise_for_status()
            return answer(response, self.parse_float)

        return self.p.retry.call(send, throttled=throttled)

    def pages(self, path: str, **params: str) -> Iterator[dict]:
        """Every page of a list, following its links to the end."""
        return follow(self.get(path, **params), self.link, self.get)


def answer(response, parse_float: Callable[[str], Any] = float) -> dict:
    """A response's JSON object; a body that is empty or not a JSON object is refused in one line."""
    try:
        doc = json.loads(response.text() or "null", parse_float=parse_float)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise UnreadableAnswer(f"{response.request.method} {urlsplit(response.request.url).path} answered "
                               f"{response.status_code} without a JSON object ({len(response.text())} characters)")
    return doc


def follow(page: dict, key: str, get: Callable[[str], dict]) -> Iterator[dict]:
    """The pages of a list, each page's `key` linking to the next, to the end (a link seen twice stops it). `get`
    refuses a link that is not an http(s) URL on its endpoint's host."""
    seen: set[str] = set()
    while True:
        yield page
        link = page.get(key)
        if not link:
            return
        if link in seen:
            raise RuntimeError(f"the API returned the {key} {link} twice; stopped paging")
        seen.add(link)
        page = get(http_link(link, key))

"""What the Azure adapter's modules share: the ARM endpoint, the GPU VM sizes, which failures are throttling, and
GETs on Azure Resource Manager through azure.core's pipeline with every `nextLink` followed (each link checked to
be an http(s) URL on the endpoint's host, a link seen twice stopping the paging)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest

from auditor.providers.live.pull import Pull, UnreadableAnswer, http_link

ARM = "https://management.azure.com"
GPU_SIZE = re.compile(r"(?i)^Standard_N[CDVG]")


def throttled(e: BaseException) -> bool:
    return isinstance(e, HttpResponseError) and e.status_code in (429, 503)


class Arm:
    """GETs on Azure Resource Manager through azure.core's pipeline, with the ARM bearer-token policy, for the
    APIs whose SDKs this adapter does without (Monitor metrics, Azure ML). No SDK retry policy: the pull's own
    backoff retries throttling, once, in one place."""

    def __init__(self, p: Pull, credential, base: str, call: dict):
        from azure.core.pipeline import policies
        from azure.mgmt.core import ARMPipelineClient
        from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy

        self.p, self.base, self.call = p, base.rstrip("/"), call
        self.client = ARMPipelineClient(self.base, policies=[
            policies.RequestIdPolicy(), policies.HeadersPolicy(), policies.UserAgentPolicy(sdk_moniker="gpu-auditor"),
            policies.ProxyPolicy(), policies.RedirectPolicy(),
            ARMChallengeAuthenticationPolicy(credential, f"{ARM}/.default")])

    def get(self, url: str, **params: str) -> dict:
        """One GET (a path under the endpoint, or a nextLink on the endpoint's host), retried when throttled."""
        if not url.startswith("/"):
            url = http_link(url, "nextLink", self.base)
        request = HttpRequest("GET", self.base + url if url.startswith("/") else url, params=params)

        def send() -> dict:
            response = self.client.send_request(request, **self.call)
            response.raise_for_status()
            return answer(response)

        return self.p.retry.call(send, throttled=throttled)

    def pages(self, path: str, **params: str) -> Iterator[dict]:
        """Every page of an ARM list, following `nextLink` to the end."""
        return follow(self.get(path, **params), "nextLink", self.get)


def answer(response) -> dict:
    """A response's JSON object; a body that is empty or not a JSON object is refused in one line."""
    try:
        doc = json.loads(response.text() or "null")
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

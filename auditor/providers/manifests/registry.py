"""The one registry of manifest readers, filled as their modules load:

- `@platform(name, detect, what, rank)`: a platform's parser (document -> jobs), and how a document is known to be
  written for it (`detect`, tried in `rank` order: the most general signature, Kubernetes', first);
- `@kinds(group, *kinds, others_pass=False)`: a Kubernetes reader (object -> workloads) for those kinds of one API
  group; `others_pass` says the group's other kinds run nothing of their own, so they pass without a word unless
  one asks for a GPU (as do the groups in `QUIET_GROUPS`, which have no reader).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from auditor.model import Job
    from auditor.providers.manifests.common import Context
    from auditor.providers.manifests.documents import Document
    from auditor.providers.manifests.pods import Workload

Parser = Callable[["Document", "Context"], "list[Job]"]
Reader = Callable[["Document", "dict[str, Any]", "Context"], "list[Workload] | None"]
P = TypeVar("P", bound=Parser)  # a parser may take more (SkyPilot's, the pipeline it is part of)


@dataclass(frozen=True)
class Platform:
    name: str
    parse: Parser
    detect: Callable[[dict[str, Any]], bool]  # the document's top-level mapping is written for this platform
    what: str  # what its manifests are, for the message naming a document no platform reads
    rank: int


PLATFORMS: dict[str, Platform] = {}
KINDS: dict[tuple[str, str], Reader] = {}
# API groups with no reader whose kinds run nothing of their own (NodePool, Ingress, PodGroup, ...). A reader's
# group joins them with `others_pass=True`.
QUIET_GROUPS: set[str] = {"policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
                          "storage.k8s.io", "scheduling.k8s.io", "apiextensions.k8s.io",
                          "admissionregistration.k8s.io", "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io",
                          "certificates.k8s.io", "karpenter.sh", "karpenter.k8s.aws", "scheduling.volcano.sh"}


def platform(name: str, detect: Callable[[dict[str, Any]], bool], what: str,
             rank: int) -> Callable[[P], P]:
    def register(fn: P) -> P:
        if name in PLATFORMS and PLATFORMS[name].parse is not fn:
            raise ValueError(f"two manifest parsers for the platform {name}")
        PLATFORMS[name] = Platform(name, fn, detect, what, rank)
        return fn
    return register


def kinds(group: str, *names: str, others_pass: bool = False) -> Callable[[Reader], Reader]:
    def register(fn: Reader) -> Reader:
        for kind in names:
            if KINDS.get((group, kind), fn) is not fn:
                raise ValueError(f"two manifest readers for {kind} ({group or 'core'})")
            KINDS[(group, kind)] = fn
        if others_pass:
            QUIET_GROUPS.add(group)
        return fn
    return register


@functools.cache
def load() -> None:
    """Every reader module of the package loaded, so that each has registered."""
    import auditor.providers.manifests as package

    for mod in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{mod.name}")


def reader(group: str, kind: str) -> Reader | None:
    load()
    return KINDS.get((group, kind))


def platforms() -> list[Platform]:
    """The platforms in the order their signatures are tried."""
    load()
    return sorted(PLATFORMS.values(), key=lambda p: (p.rank, p.name))

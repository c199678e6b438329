"""Kueue: where a queued workload runs. A workload labelled `kueue.x-k8s.io/queue-name` goes to that LocalQueue (in
its own namespace), which feeds a ClusterQueue, whose ResourceFlavors admit it onto nodes: each flavor's
`nodeLabels` and `tolerations` are added to the workload's pods, as Kueue adds them at admission. Kueue's objects
are read for that (collected before parsing, from every file of the run) and are not workloads themselves."""

from __future__ import annotations

from auditor.providers.manifests.common import Context, lenient_map

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def collect(d: dict, ctx: Context) -> None:
    """Note a ResourceFlavor, ClusterQueue or LocalQueue; lenient, as every collect is."""
    kind = str(d.get("kind"))
    meta = lenient_map(d.get("metadata"))
    spec = lenient_map(d.get("spec"))
    name = str(meta.get("name"))
    if kind == "ResourceFlavor":
        labels = spec.get("nodeLabels") if isinstance(spec.get("nodeLabels"), dict) else {}
        tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
        ctx.flavors[name] = {"nodeSelector": labels, "tolerations": tolerations}
    elif kind == "ClusterQueue":
        flavors = []
        for group in spec.get("resourceGroups") or []:
            for f in (group.get("flavors") or []) if isinstance(group, dict) else []:
                if isinstance(f, dict) and f.get("name") and str(f["name"]) not in flavors:
                    flavors.append(str(f["name"]))
        ctx.cluster_queues[name] = flavors
    elif kind == "LocalQueue" and spec.get("clusterQueue"):
        ctx.local_queues[(str(meta.get("namespace") or "default"), name)] = str(spec["clusterQueue"])


def placements(labels: dict[str, str], namespace: str, ctx: Context) -> list[dict]:
    """The pod placements (nodeSelector, tolerations) of the flavors a workload with these labels may be admitted
    to, in the ClusterQueue's order; [] for a workload not queued, or queued to a queue no file of the run holds."""
    queue = labels.get(QUEUE_LABEL)
    cluster_queue = ctx.local_queues.get((namespace, queue)) if queue else None
    names = ctx.cluster_queues.get(cluster_queue, []) if cluster_queue else []
    return [ctx.flavors[n] for n in names if n in ctx.flavors]

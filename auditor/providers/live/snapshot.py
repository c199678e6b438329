"""The inventory snapshot: a JSON file of GPU assets, their GPU usage and training jobs, so an audit runs
offline and reproducibly. `gpu-auditor pull` writes it from the live clouds; tests and the demo carry one.

Schema (version 1), every time UTC ISO-8601:

    {"version": 1, "generated_at": "...", "source": "...",
     "assets":    [{"id", "provider", "account", "region", "zone", "name", "kind", "instance_type",
                    "gpu_model", "gpu_count", "gpu_memory_gb", "lifecycle", "eviction_policy", "state",
                    "launch_time", "tags"}],
     "gpu_usage": [{"asset_id", "window_start", "window_end", "samples", "mean_util_pct", "p95_util_pct",
                    "peak_mem_gb", "source"}],
     "jobs":      [{"id", "platform", "provider", "account", "region", "name", "state", "instance_type",
                    "instance_count", "gpu_model", "gpu_count", "spot", "checkpoint_uri",
                    "checkpoint_interval_min", "max_runtime_s", "max_wait_s", "training_s", "billable_s",
                    "interruptions", "start_time", "end_time", "tags", "kind", "sweep_max_trials",
                    "sweep_parallel_trials", "sweep_trial_timeout_s", "sweep_algorithm", "sweep_early_stopping",
                    "sweep_objective", "sweep_id", "mean_util_pct"}],
     "prices":    [{"provider", "instance_type", "region", "price_per_hour", "currency", "source"}]}

`prices` is optional (written by `gpu-auditor pull` from the providers' price APIs, as evidence).

Optional too, written by `gpu-auditor pull --provider k8s`, GPUs as Kubernetes shares them
(auditor/providers/live/k8s_gpus.py):

     "gpu_units":       [{"asset_id", "resource", "sharing", "profile", "count", "slices", "slices_per_gpu",
                          "memory_gb", "replicas"}],
     "gpu_allocations": [{"id", "asset_id", "resource", "units", "namespace", "pod", "workload", "state",
                          "start_time", "end_time", "tags", "share"}],
     "slice_usage":     [{"asset_id", "gpu", "uuid", "instance", "profile", "namespace", "pod", "window_start",
                          "window_end", "samples", "mean_active_pct", "p95_active_pct", "peak_mem_gb", "source"}]

A node's `gpu_count` is its physical GPUs; `gpu_units` are what its allocatable offers, one row per resource
(`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`, ...): `sharing` is none, mig, time-slicing or mps, and one unit is
`slices / slices_per_gpu` of a physical GPU (a MIG profile's compute slices of 7, a replica 1 of `replicas`);
the audit counts a MIG unit by what its profile blocks (auditor/providers/mig.py), and `replicas` (default 1)
says how many units time-slicing or MPS makes of each GPU or MIG slice.
`gpu_allocations` are the pods holding units (`end_time` null while running); `share`, where set, is a HAMi
or Run:ai pod's share of each GPU it holds (its cores or memory, whichever is more; its fraction), in place of
the unit's. `slice_usage` is DCGM engine
activity (percent of the slice) and memory per MIG instance, or per GPU the exporter maps to a pod.

`gpu_model`, `gpu_count` and `gpu_memory_gb` may be left out where the catalog knows the instance type. An asset's
`gpu_count` may be a fraction: a fractional GPU type's share of one physical GPU (0.125 on a g6f.xlarge).
`peak_mem_gb` is per GPU (the fullest GPU of the machine).
A job's `kind` is `job` (the default), `sweep` (a hyperparameter search: `instance_type` and `instance_count` are
one trial's, `max_runtime_s` the whole search's) or `server`. A sweep's `sweep_*` fields: the cap on trials in
all and at once, each trial's timeout, the sampling algorithm (`grid`, `random`, `bayesian`, ...), the early
stopping policy (null when none, e.g. `medianstopping`, `bandit`) and the objective (`minimize loss`); all
lower-case as read, null where the provider does not say. A trial of a sweep is a job of its own whose `sweep_id`
is the sweep's `id`; its `state` says how it ended (`completed`, `stopped` when early stopping ended it, `failed`).
A job's `mean_util_pct` is its measured GPU utilisation over its run, where a source reports one (null: not
measured).
`eviction_policy` says what the cloud does to a spot machine it takes back: `deallocate` (stopped, its disks
kept and billed: Azure's Deallocate, GCP's instanceTerminationAction STOP) or `delete` (gone, disks too); null
where not known or not spot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from auditor.errors import InputError
from auditor.providers.redact import redact_deep
from auditor.readable import read_text, unique_keys
from auditor.schema import Field, Validator, record
from auditor.text import one_line

PROVIDERS = ("aws", "gcp", "azure", "kubernetes", "oci", "other")
LIFECYCLES = ("on_demand", "spot", "reserved", "capacity_block")
EVICTION_POLICIES = ("deallocate", "delete")
TAGS = Field("map", item=Field("str"), default={})
INT, BIGINT = 2**31 - 1, 2**63 - 1  # what the INTEGER and BIGINT columns of the tables hold

ASSET = record(
    id=Field("str", required=True), provider=Field("str", required=True, choices=PROVIDERS),
    account=Field("str"), region=Field("str"), zone=Field("str"), name=Field("str"),
    kind=Field("str", default="vm", choices=("vm", "node", "notebook", "endpoint", "cluster")),
    instance_type=Field("str"), gpu_model=Field("str"), gpu_count=Field("number", minimum=0, maximum=INT),
    gpu_memory_gb=Field("number", minimum=0), lifecycle=Field("str", default="on_demand", choices=LIFECYCLES),
    eviction_policy=Field("str", choices=EVICTION_POLICIES), state=Field("str"), launch_time=Field("datetime"),
    tags=TAGS,
)
USAGE = record(
    asset_id=Field("str", required=True), window_start=Field("datetime", required=True),
    window_end=Field("datetime", required=True), samples=Field("int", minimum=0, maximum=BIGINT),
    mean_util_pct=Field("number", minimum=0, maximum=100),
    p95_util_pct=Field("number", minimum=0, maximum=100),
    peak_mem_gb=Field("number", minimum=0), source=Field("str"),
)
JOB = record(
    id=Field("str", required=True), platform=Field("str", required=True), provider=Field("str"),
    account=Field("str"), region=Field("str"), name=Field("str"), state=Field("str"),
    instance_type=Field("str"), instance_count=Field("int", minimum=1, maximum=INT, default=1), gpu_model=Field("str"),
    gpu_count=Field("int", minimum=0, maximum=INT), spot=Field("bool", default=False), checkpoint_uri=Field("str"),
    checkpoint_interval_min=Field("number", minimum=0), max_runtime_s=Field("int", minimum=0, maximum=BIGINT),
    max_wait_s=Field("int", minimum=0, maximum=BIGINT), training_s=Field("int", minimum=0, maximum=BIGINT),
    billable_s=Field("int", minimum=0, maximum=BIGINT), interruptions=Field("int", minimum=0, maximum=INT),
    start_time=Field("datetime"), end_time=Field("datetime"), tags=TAGS,
    kind=Field("str", default="job", choices=("job", "sweep", "server")),
    sweep_max_trials=Field("int", minimum=1, maximum=INT), sweep_parallel_trials=Field("int", minimum=1, maximum=INT),
    sweep_trial_timeout_s=Field("int", minimum=0, maximum=BIGINT), sweep_algorithm=Field("str"),
    sweep_early_stopping=Field("str"), sweep_objective=Field("str"), sweep_id=Field("str"),
    mean_util_pct=Field("number", minimum=0, maximum=100),
)
# Optional: on-demand list prices read from a provider's pricing API by `gpu-auditor pull` (kept as
# evidence beside the bundled catalog; money as text, exact).
PRICE = record(
    provider=Field("str", required=True, choices=PROVIDERS), instance_type=Field("str", required=True),
    region=Field("str"), price_per_hour=Field("str", required=True), currency=Field("str", default="USD"),
    source=Field("str"),
)
SHARINGS = ("none", "mig", "time-slicing", "mps", "hami")
GPU_UNIT = record(
    asset_id=Field("str", required=True), resource=Field("str", required=True),
    sharing=Field("str", default="none", choices=SHARINGS), profile=Field("str"),
    count=Field("int", required=True, minimum=0, maximum=INT), slices=Field("int", default=1, minimum=1, maximum=8),
    slices_per_gpu=Field("int", default=1, minimum=1, maximum=INT), memory_gb=Field("number", minimum=0),
    replicas=Field("int", default=1, minimum=1, maximum=INT),
)
GPU_ALLOCATION = record(
    id=Field("str", required=True), asset_id=Field("str", required=True), resource=Field("str", required=True),
    units=Field("int", required=True, minimum=1, maximum=INT), namespace=Field("str"), pod=Field("str"),
    workload=Field("str"), state=Field("str"), start_time=Field("datetime"), end_time=Field("datetime"), tags=TAGS,
    share=Field("number", minimum=0, maximum=1),
)
SLICE_USAGE = record(
    asset_id=Field("str", required=True), gpu=Field("str"), uuid=Field("str"), instance=Field("str"),
    profile=Field("str"), namespace=Field("str"), pod=Field("str"), window_start=Field("datetime", required=True),
    window_end=Field("datetime", required=True), samples=Field("int", minimum=0, maximum=BIGINT),
    mean_active_pct=Field("number", minimum=0, maximum=100), p95_active_pct=Field("number", minimum=0, maximum=100),
    peak_mem_gb=Field("number", minimum=0), source=Field("str"),
)
SNAPSHOT = record(
    version=Field("int", required=True, minimum=1, maximum=1),
    generated_at=Field("datetime"), source=Field("str"),
    window=record(start=Field("datetime"), end=Field("datetime")),
    assets=Field("list", item=ASSET, default=[]),
    gpu_usage=Field("list", item=USAGE, default=[]),
    jobs=Field("list", item=JOB, default=[]),
    prices=Field("list", item=PRICE, default=[]),
    gpu_units=Field("list", item=GPU_UNIT, default=[]),
    gpu_allocations=Field("list", item=GPU_ALLOCATION, default=[]),
    slice_usage=Field("list", item=SLICE_USAGE, default=[]),
)


def load_snapshot(path: str | Path) -> dict[str, Any]:
    path = str(path)
    try:
        # Presigned and SAS URLs (a checkpoint location, a tag) lose their query strings before anything sees
        # them (redact.py).
        data: Any = redact_deep(json.loads(read_text(path, "inventory"), object_pairs_hook=unique_keys))
    except FileNotFoundError:
        raise InputError("inventory file not found", path=path) from None
    except json.JSONDecodeError as e:
        raise InputError(f"not valid JSON: {e.msg}", path=path, line=e.lineno) from None
    except ValueError as e:  # a key twice
        raise InputError(f"not valid JSON: {e}", path=path) from None
    except OSError as e:
        raise InputError(f"cannot read the inventory: {e.strerror or e}", path=path) from None
    except RecursionError:  # [[[[... thousands deep: Python's parser gives up; say so, not crash
        raise InputError("not valid JSON: nested too deeply", path=path) from None
    doc: dict[str, Any] = Validator(path).check(data, SNAPSHOT)
    for key in ("assets", "jobs"):  # an asset or a job is one machine, one run: its id once (the tables' key)
        first: dict[str, int] = {}
        for i, item in enumerate(doc[key]):
            if first.setdefault(item["id"], i) != i:
                raise InputError(f"{key}[{i}].id: {one_line(item['id'])!r} is the id of {key}[{first[item['id']]}] "
                                 "too; each id once", path=path)
    ids = {a["id"] for a in doc["assets"]}
    for i, u in enumerate(doc["gpu_usage"]):
        if u["asset_id"] not in ids:
            raise InputError(f"gpu_usage[{i}].asset_id: no asset {u['asset_id']!r} in assets", path=path)
        if u["window_end"] <= u["window_start"]:
            raise InputError(f"gpu_usage[{i}]: window_end must be after window_start", path=path)
    for key in ("gpu_units", "gpu_allocations", "slice_usage"):
        for i, row in enumerate(doc[key]):
            if row["asset_id"] not in ids:
                raise InputError(f"{key}[{i}].asset_id: no asset {row['asset_id']!r} in assets", path=path)
    for i, u in enumerate(doc["slice_usage"]):
        if u["window_end"] <= u["window_start"]:
            raise InputError(f"slice_usage[{i}]: window_end must be after window_start", path=path)
    return doc

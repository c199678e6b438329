"""The normalized entities rules read, and the findings they yield.

Rules never see an SDK client or a raw export column: only these dataclasses, built from the DuckDB tables
by tables/entities.py. One module on purpose: it is the vocabulary every rule, builder and view shares, and
each class is a plain record with its field comments; split, a rule would import from half a dozen places.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any, overload

from auditor.providers import mig

CENT = Decimal("0.01")
HOURS_PER_MONTH = Decimal(730)  # the convention AWS, GCP and Azure price calculators use
# The team key of spend and jobs no team owns, in audit.json's summary.by_team, the jobs and every view of them.
UNATTRIBUTED = "(unattributed)"


@overload
def money(amount: None) -> None: ...


@overload
def money(amount: Decimal | int | str) -> Decimal: ...


def money(amount: Decimal | int | str | None) -> Decimal | None:
    """Round once, to the cent, half to even. None stays None."""
    if amount is None:
        return None
    return Decimal(amount).quantize(CENT, rounding=ROUND_HALF_EVEN)


def gpus(count: Decimal | int | None) -> Decimal | int | None:
    """A GPU count as the tables hold it (DECIMAL: a fractional GPU is a share of one): whole GPUs as an int,
    a fraction as its Decimal (0.125 for an eighth of an L4)."""
    if count is None:
        return None
    count = Decimal(count)
    return int(count) if count == count.to_integral_value() else count.normalize()


class Severity(enum.IntEnum):
    INFO = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(s.label for s in cls)
            raise ValueError(f"unknown severity {text!r}; use one of {names}") from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass
class GpuAsset:
    """A GPU-bearing machine with its utilisation in the audit window and its billed cost."""

    id: str
    provider: str
    account: str | None = None
    region: str | None = None
    zone: str | None = None
    name: str | None = None
    kind: str = "vm"
    instance_type: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    gpu_memory_gb: float | None = None  # per GPU
    lifecycle: str = "on_demand"
    state: str | None = None
    launch_time: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # utilisation over the audit window (None when no metrics were collected)
    usage_hours: float | None = None
    usage_samples: int | None = None
    mean_util_pct: float | None = None
    p95_util_pct: float | None = None
    peak_mem_gb: float | None = None  # per GPU, the highest of its GPUs
    usage_source: str | None = None
    # billed cost of this resource id in the audit window, per currency
    cost: dict[str, Decimal] = field(default_factory=dict)
    billed_hours: Decimal | None = None


@dataclass
class Job:
    """A training or batch job, live or from a manifest."""

    id: str
    platform: str
    provider: str | None = None
    account: str | None = None
    region: str | None = None
    name: str | None = None
    state: str | None = None
    instance_type: str | None = None
    instance_count: int = 1
    gpu_model: str | None = None
    gpu_count: int | None = None  # per instance (where replicas ask for different counts: the most one asks)
    spot: bool = False
    checkpoint_uri: str | None = None
    checkpoint_interval_min: float | None = None
    max_runtime_s: int | None = None
    max_wait_s: int | None = None
    training_s: int | None = None
    billable_s: int | None = None
    interruptions: int | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    source_file: str | None = None
    source_line: int | None = None
    cost: dict[str, Decimal] = field(default_factory=dict)
    # from manifests (the gate): what the job is for, what kind of manifest said so, the GPU or instance
    # type as the manifest names it (kept when the catalog does not know it), and the MIG slice it asks for
    workload: str | None = None  # training, fine-tuning, inference, notebook
    manifest_kind: str | None = None  # Job, PyTorchJob, CreateTrainingJob, CustomJob, command, ...
    accelerator: str | None = None
    mig_profile: str | None = None  # e.g. 1g.10gb: gpu_count counts slices of that size
    annotations: dict[str, str] = field(default_factory=dict)  # not tags: inline waivers live here
    kind: str = "job"  # job (runs to an end), server (serves until stopped), sweep (a hyperparameter search)
    # a sweep: trials in all (None: no cap) and at once, its early-stopping or pruning policy (None: none), its
    # search algorithm (grid, random, bayesian, hyperband, ...), and the points of its grid where countable.
    # instance_count counts the instances of all parallel trials, max_runtime_s the whole sweep's longest run
    sweep_max_trials: int | None = None
    sweep_parallel_trials: int | None = None
    sweep_early_stopping: str | None = None
    sweep_algorithm: str | None = None
    sweep_grid_size: int | None = None
    sweep_trial_timeout_s: int | None = None  # each trial's time limit
    sweep_objective: str | None = None  # e.g. `minimize loss`
    sweep_id: str | None = None  # a trial: the id of the sweep that ran it
    mean_util_pct: float | None = None  # measured GPU utilisation over the job's run, where a source reports it
    # a server on Kubernetes: the grace period its pods declare (None: not declared), and the name of the
    # PodDisruptionBudget in the same manifests that covers its pods (None: none found)
    grace_period_s: int | None = None
    disruption_budget: str | None = None
    # GPUs (or other accelerators) of all replicas at once, where they differ by replica type (a PyTorchJob's
    # Master of 1 GPU and 3 Workers of 8: 25); None: instance_count x gpu_count (`gpus_in_all`)
    gpu_total: int | None = None
    # an accelerator that is no NVIDIA GPU (TPU, Trainium, Inferentia, Neuron, Gaudi, AMD-Instinct, Intel-GPU):
    # counted in gpu_count, named in `accelerator` (a TPU by its version where the node selector says)
    accelerator_family: str | None = None

    def gpus_in_all(self) -> int | None:
        """GPUs the job holds at once, every replica counted with its own request."""
        if self.gpu_total is not None:
            return self.gpu_total
        return (self.instance_count or 1) * self.gpu_count if self.gpu_count else None


@dataclass(slots=True)
class ResourceSpend:
    """Spend in the audit window on one resource (or, where the export has no resource id, on one
    account/service/region group), with the tags the billing lines carry."""

    id: str
    provider: str
    account: str | None = None
    region: str | None = None
    service: str | None = None
    category: str | None = None  # gpu_compute, other_compute, storage, transfer, tax, other
    instance_type: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    cost: dict[str, Decimal] = field(default_factory=dict)
    lines: int = 0
    has_resource_id: bool = True
    # (tags, currency, cost) for each distinct tag set the resource's lines carried
    tag_sets: list[tuple[dict[str, str], str, Decimal]] = field(default_factory=list)


@dataclass
class TransferFlow:
    """Data moved between two places in the audit window, summed over billing lines."""

    id: str
    provider: str
    kind: str  # inter_region, internet, intra_region, inter_zone
    source: str | None
    destination: str | None
    account: str | None = None
    gb: Decimal = Decimal(0)
    cost: dict[str, Decimal] = field(default_factory=dict)
    lines: int = 0
    top_resources: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class GpuCapacity(GpuAsset):
    """A GPU machine with what says whether anyone still uses it: when its metrics and its billing last ran,
    the storage billed under its name, and (for nodes and clusters) the jobs seen on its instance type."""

    first_billed_at: datetime | None = None  # first and last billed compute line of the id in the window
    last_billed_at: datetime | None = None
    last_usage_at: datetime | None = None  # end of its last utilisation window
    data_end: datetime | None = None  # end of the last billing line in the window, of any resource
    storage_cost: dict[str, Decimal] = field(default_factory=dict)  # disks named after it (Azure, GCP)
    storage_resources: list[str] = field(default_factory=list)
    jobs_seen: int | None = None  # jobs on its provider, account, region and instance type
    jobs_read: bool = False  # any job was read (inventory, manifests): jobs_seen 0 means something
    billing_tags: dict[str, str] = field(default_factory=dict)  # every tag key of its billing lines, latest value
    split_resources: list[str] = field(default_factory=list)  # pods or tasks the provider split its cost to


@dataclass(slots=True)
class BilledGpuMachine:
    """A GPU machine as the bill alone shows it, inventory or not: the days and hours it was billed, how flat its
    daily cost ran, the tags and jobs seen on it, and (where an inventory was loaded) whether it is in it and what
    its metrics say."""

    id: str  # the billing's resource id
    provider: str
    account: str | None = None
    region: str | None = None
    instance_type: str | None = None
    gpu_model: str | None = None
    gpu_count: int | Decimal | None = None  # `gpus`: a fractional GPU's share of one is a Decimal
    currency: str = "USD"  # the currency it was mostly billed in; the daily figures are in it
    cost: dict[str, Decimal] = field(default_factory=dict)  # every usage line of the id in the window
    billed_hours: Decimal | None = None  # machine-hours: per day, at most 24 and at most its lines' span
    billed_days: int = 0  # UTC days with a line
    data_days: int = 0  # UTC days of the window with any line of its provider
    weekend_days: int = 0  # Saturdays and Sundays it was billed on
    data_weekend_days: int = 0  # Saturdays and Sundays of the window with any line of its provider
    full_days: int = 0  # days billed 23 hours or more: nights included
    full_day_cost_min: Decimal | None = None  # its cheapest and dearest full day, in `currency`
    full_day_cost_max: Decimal | None = None
    first_billed_at: datetime | None = None
    last_billed_at: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)  # of its latest line
    tags_seen: dict[str, list[str]] = field(default_factory=dict)  # every tag key of its lines, up to 5 values
    jobs_seen: int = 0  # jobs (inventory, manifests) on its provider, account, region and instance type
    split_resources: list[str] = field(default_factory=list)  # pods or tasks the provider split its cost to
    inventory_loaded: bool = False  # an inventory (snapshot or pull) was read at all
    in_inventory: bool = False
    scope_pulled: bool = False  # the inventory holds machines of its provider, account and region
    usage_hours: float | None = None  # its utilisation in the inventory (None: not there, or no metrics)
    mean_util_pct: float | None = None
    inventory_tags: dict[str, str] = field(default_factory=dict)  # its tags (a node's labels) in the inventory
    kind: str | None = None  # its kind in the inventory (vm, node, cluster, notebook)
    jobs_read: bool = False  # any job was read (inventory, manifests): jobs_seen 0 means something


@dataclass
class CapacityReservation:
    """Reserved capacity (an On-Demand Capacity Reservation, a Capacity Block for ML, a GCP reservation, an Azure
    capacity reservation): what the hours nothing ran in cost, against the hours something did."""

    id: str  # CapacityReservationId: the reservation's ARN or resource id
    provider: str
    account: str | None = None
    region: str | None = None
    kind: str | None = None  # Capacity Block, On-Demand Capacity Reservation, reservation, capacity reservation
    instance_type: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None  # per instance (where replicas ask for different counts: the most one asks)
    currency: str = "USD"
    used: Decimal = Decimal(0)  # cost of the hours that ran an instance (where the export says so)
    unused: Decimal = Decimal(0)  # cost of the reserved hours nothing ran in
    used_hours: Decimal = Decimal(0)  # instance-hours
    unused_hours: Decimal = Decimal(0)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    data_end: datetime | None = None  # end of the last billing line of its provider in the window
    tags: dict[str, str] = field(default_factory=dict)  # its own lines' tags: who owns it


@dataclass
class TeamSpend:
    """A team's spend in the quarter so far, in the policy's currency (others converted at the policy's rates),
    against its budget in the policy."""

    id: str  # the team's name
    team: str
    lead: str | None = None
    currency: str = "USD"
    budget: Decimal | None = None  # per quarter
    gpu_hours_budget: Decimal | None = None  # per quarter
    spent: Decimal = Decimal(0)
    gpu_spent: Decimal = Decimal(0)
    gpu_hours: Decimal = Decimal(0)
    quarter: str = ""
    quarter_start: datetime | None = None
    quarter_end: datetime | None = None
    data_end: datetime | None = None  # the end of the billing counted: the forecast runs from here
    tags: dict[str, str] = field(default_factory=dict)  # the team and lead as tags, for attribution
    left_out: dict[str, Decimal] = field(default_factory=dict)  # spend in currencies the policy gives no rate for


@dataclass
class UnattributedSpend:
    """Spend in one currency that no team owns (no team tag, no project mapped to a team), against the total."""

    id: str
    scope: str  # gpu: GPU compute only; all: every line
    currency: str = "USD"
    total: Decimal = Decimal(0)
    unattributed: Decimal = Decimal(0)
    lines: int = 0
    top_resources: list[tuple[str, Decimal]] = field(default_factory=list)  # the largest unowned resources


@dataclass
class Commitment:
    """A reservation, savings plan or committed-use discount: what of it was used and what was paid unused."""

    id: str  # CommitmentDiscountId (the reservation or savings plan ARN, the Azure reservation id)
    provider: str
    account: str | None = None
    region: str | None = None
    name: str | None = None
    kind: str | None = None  # CommitmentDiscountType: Reservation, Savings Plan, ...
    instance_type: str | None = None
    gpu_model: str | None = None
    currency: str = "USD"
    used: Decimal = Decimal(0)  # effective cost of the usage it covered
    unused: Decimal = Decimal(0)  # effective cost paid for capacity nobody used
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    ends: datetime | None = None  # when the commitment's term ends, where the billing says (the AWS CUR)
    # FOCUS CommitmentDiscountQuantity of the lines it covered and of its unused capacity, in its unit
    # (CommitmentDiscountUnit: Hours, ...), and the contracts applied (ContractApplied), as the export states them
    used_quantity: Decimal | None = None
    unused_quantity: Decimal | None = None
    quantity_unit: str | None = None
    contracts: list[str] = field(default_factory=list)


@dataclass
class SteadyGpuSpend:
    """On-demand GPU compute of one instance family in one region and currency, hour by hour over the window: the
    floor a commitment would cover (the least spent in any hour) against the total."""

    id: str  # provider:region:family:currency
    provider: str
    region: str | None = None
    family: str | None = None  # the instance family (p4d, a2-highgpu, Standard_NC24ads_A100_v4)
    instance_types: list[str] = field(default_factory=list)
    gpu_model: str | None = None
    currency: str = "USD"
    days: int = 0  # days of billing in the window
    days_billed: int = 0  # of those, days this family ran on demand
    floor_per_hour: Decimal = Decimal(0)  # the least HOUR's on-demand spend (0 when an hour had none)
    on_demand: Decimal = Decimal(0)  # its on-demand spend in the window
    committed: Decimal = Decimal(0)  # its spend already covered by a commitment
    tags: dict[str, str] = field(default_factory=dict)
    hours: int = 0  # hours of the window with billing (of the days with any line, up to the billing's end)
    hours_billed: int = 0  # of those, hours this family ran on demand
    floor_at: datetime | None = None  # the least hour (its start, UTC)


@dataclass
class GpuSpendSeries:
    """GPU compute of one team, account or instance family in one currency, day by day (UTC) over the window,
    with the daily spend of its costliest resources (to name what drove a day) and the jobs among them."""

    id: str  # gpu-spend/<dimension>/<key>/<currency>
    dimension: str  # team, account or family
    key: str  # the team's name, `provider account`, `provider family`
    currency: str = "USD"
    start: date | None = None  # the window's first UTC day: days[0]
    days: list[Decimal | None] = field(default_factory=list)  # spend per day; None: no billing that day at all
    resources: dict[str, dict[int, Decimal]] = field(default_factory=dict)  # resource -> {day index: spend}
    jobs: dict[str, str] = field(default_factory=dict)  # resource -> the name of the job it is
    tags: dict[str, str] = field(default_factory=dict)  # a team's series: the team as a tag, for attribution


@dataclass
class InteractiveGpu:
    """A notebook or dev machine with GPUs (SageMaker notebook instance, Vertex AI Workbench instance, Azure ML
    compute instance, a machine or pod labelled interactive), with the spans in which its GPUs sat at nil
    utilisation, from utilisation samples of an hour or less."""

    id: str
    provider: str
    platform: str  # what makes it interactive: sagemaker-notebook, vertex-workbench, azureml-compute-instance, ...
    account: str | None = None
    region: str | None = None
    name: str | None = None
    instance_type: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    sampled_hours: float = 0.0  # hours covered by samples of an hour or less in the window
    observed_from: datetime | None = None  # the first such sample's start ...
    observed_to: datetime | None = None  # ... and the last one's end
    idle_spans: list[tuple[datetime, datetime]] = field(default_factory=list)  # nil utilisation, merged, UTC
    cost: dict[str, Decimal] = field(default_factory=dict)  # billed in the window
    billed_hours: Decimal | None = None
    node: str | None = None  # a pod's: the node's asset id (whether it still runs is its node's: running.py)


@dataclass
class StorageGrowth:
    """A bucket, volume or storage account, month by month: average GB stored and cost, and what the billing
    says of its storage classes."""

    id: str
    provider: str
    account: str | None = None
    region: str | None = None
    service: str | None = None
    currency: str = "USD"
    months: list[tuple[str, Decimal, Decimal]] = field(default_factory=list)  # (YYYY-MM, average GB, cost)
    storage_classes: list[str] = field(default_factory=list)  # usage types or meters of its storage lines
    tiered: bool = False  # some of it sits in an infrequent-access or archive class
    checkpoint_jobs: list[str] = field(default_factory=list)  # jobs whose checkpoint location is here
    tags: dict[str, str] = field(default_factory=dict)
    cost: dict[str, Decimal] = field(default_factory=dict)


@dataclass
class RemoteDataFlow:
    """Inter-region transfer out of a region, paired with the GPU compute billed in the region it went to."""

    id: str
    provider: str
    source: str | None
    destination: str | None
    account: str | None = None
    gb: Decimal = Decimal(0)
    cost: dict[str, Decimal] = field(default_factory=dict)
    top_resources: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    destination_gpu_cost: dict[str, Decimal] = field(default_factory=dict)
    destination_gpu_hours: Decimal = Decimal(0)
    destination_gpu_resources: list[str] = field(default_factory=list)
    source_gpu_cost: dict[str, Decimal] = field(default_factory=dict)


@dataclass
class WaiverStatus:
    """A waiver of the policy as the audit found it: active, unused or expired, and what it matched."""

    id: str
    rule: str
    resource: str  # the waiver's glob
    reason: str = ""
    owner: str | None = None
    expires: date | None = None
    as_of: date | None = None  # the day the audit judged expiry on
    status: str = "active"  # active, unused, expired
    matched: int = 0
    matched_cost: dict[str, Decimal] = field(default_factory=dict)  # billed cost of the findings it names
    source_file: str | None = None
    source_line: int | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class GpuSlice:
    """GPU units a Kubernetes pod holds (a MIG slice, a time-sliced or MPS replica, whole GPUs), their share of
    the node's cost for the hours held in the window, and the slice's DCGM engine activity."""

    id: str  # namespace/pod
    provider: str = "kubernetes"
    account: str | None = None
    region: str | None = None
    node: str | None = None  # the node's asset id
    node_name: str | None = None
    namespace: str | None = None
    pod: str | None = None
    workload: str | None = None  # namespace/job that owns the pod
    resource: str = "nvidia.com/gpu"
    sharing: str = "none"  # none, mig, time-slicing, mps
    profile: str | None = None  # MIG profile, e.g. 7g.80gb
    units: int = 1
    slices: int = 1  # per unit: a MIG profile's compute slices, else 1
    slices_per_gpu: int = 1  # 7 (4 on an A30) under MIG, the replicas under time-slicing or MPS
    memory_gb: float | None = None  # per unit, of a MIG profile
    gpu_model: str | None = None
    instance_type: str | None = None
    hours: float | None = None  # hours held in the window
    usage_hours: float | None = None
    mean_active_pct: float | None = None  # of the slice
    p95_active_pct: float | None = None
    peak_mem_gb: float | None = None
    cost: dict[str, Decimal] = field(default_factory=dict)  # its share of the node's cost
    cost_basis: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    share: Fraction | None = None  # of one GPU per unit, as the cost model counted it (shared_gpus.unit_shares)

    @property
    def unit_share(self) -> Fraction:
        """One unit's share of a physical GPU: the cost model's, else what its MIG profile blocks, else
        slices / slices_per_gpu (a replica of a shared GPU, a whole GPU)."""
        if self.share is not None:
            return self.share
        if self.sharing == "mig" and self.profile:
            return mig.blocks(self.gpu_model, self.profile)
        return Fraction(self.slices, self.slices_per_gpu)

    @property
    def gpu_share(self) -> Decimal:
        """Physical GPUs' worth it holds."""
        return Decimal(self.units * self.unit_share.numerator) / Decimal(self.unit_share.denominator)


@dataclass
class NodeGpuAllocation:
    """A Kubernetes GPU node: its physical GPUs, the share of their hours pods held in the window, and the cost
    of the rest (paid, allocated to no pod)."""

    id: str
    provider: str = "kubernetes"
    account: str | None = None
    region: str | None = None
    name: str | None = None
    instance_type: str | None = None
    gpu_model: str | None = None
    gpu_count: int | Decimal = 0  # physical GPUs; a fractional GPU's share of one (a g6f node: 0.25)
    sharing: list[str] = field(default_factory=list)
    node_hours: float = 0.0  # hours the node ran in the window
    allocated_gpu_hours: float = 0.0
    free_now: dict[str, int] = field(default_factory=dict)  # resource -> units held by no running pod
    cost: dict[str, Decimal] = field(default_factory=dict)  # the node's cost in the window
    unallocated_cost: dict[str, Decimal] = field(default_factory=dict)
    cost_basis: str | None = None
    pods: int = 0
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def gpu_hours(self) -> float:
        return float(self.gpu_count) * self.node_hours

    @property
    def unallocated_gpu_hours(self) -> float:
        return max(0.0, self.gpu_hours - self.allocated_gpu_hours)


Entity = (GpuAsset | Job | ResourceSpend | TransferFlow | GpuCapacity | TeamSpend | UnattributedSpend | Commitment
          | SteadyGpuSpend | StorageGrowth | RemoteDataFlow | WaiverStatus | GpuSlice | NodeGpuAllocation
          | BilledGpuMachine | CapacityReservation | GpuSpendSeries | InteractiveGpu)


@dataclass
class Finding:
    rule: str
    name: str
    severity: Severity
    resource: str
    message: str
    entity_type: str
    provider: str | None = None
    account: str | None = None
    region: str | None = None
    owner: str | None = None
    team: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    cost: Decimal | None = None  # in the audit window
    monthly_savings: Decimal | None = None  # going forward: only for what still bills at the window's end
    currency: str = "USD"
    remediation: str = ""
    clause: str | None = None
    file: str | None = None
    line: int | None = None
    key: str = ""  # what makes the fingerprint unique beyond rule and resource
    waiver: dict[str, Any] | None = None
    in_baseline: bool = False  # its fingerprint is in the --baseline audit: known, so neither reported nor failing
    counted_under: str | None = None  # its saving is counted under this rule's finding on the same resource
    wasted: Decimal | None = None  # in the audit window: spent on the waste, whether or not it still runs
    still_running: bool | None = None  # running.py: billed in the window's last day or running in the inventory
    confidence: str = "high"  # high: counted in the savings headline; low or medium: savings "to check"
    # the ids whose billing, or state in the inventory, says whether it still runs (running.py)
    billing_ids: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        raw = "\x1f".join((self.rule, self.resource, self.key))
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    @property
    def waived(self) -> bool:
        return self.waiver is not None

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain data: its fields in order (`key` left out), severity as its label, money as
        strings, then its fingerprint and whether it is waived. Written field by field: dataclasses.asdict
        deep-copies every value, which shows at 100,000 findings; `evidence` and `waiver` are the finding's own
        (audit.py copies them as it encodes them)."""
        return {"rule": self.rule, "name": self.name, "severity": self.severity.label, "resource": self.resource,
                "message": self.message, "entity_type": self.entity_type, "provider": self.provider,
                "account": self.account, "region": self.region, "owner": self.owner, "team": self.team,
                "evidence": self.evidence, "cost": _num(self.cost), "monthly_savings": _num(self.monthly_savings),
                "currency": self.currency, "remediation": self.remediation, "clause": self.clause,
                "file": self.file, "line": self.line, "waiver": self.waiver, "in_baseline": self.in_baseline,
                "counted_under": self.counted_under, "wasted": _num(self.wasted),
                "still_running": self.still_running, "confidence": self.confidence,
                "fingerprint": self.fingerprint, "waived": self.waived}


def _num(value: Decimal | None) -> str | None:
    """Money goes to JSON as a string, so no reader turns it into a float."""
    return None if value is None else str(money(value))


def primary(cost: dict[str, Decimal]) -> tuple[str, Decimal] | None:
    """The currency an entity was mostly billed in, and that amount (currencies are never added)."""
    if not cost:
        return None
    currency = max(cost, key=lambda c: abs(cost[c]))
    return currency, cost[currency]


def fmt_money(value: Any, currency: str | None = None) -> str:
    """`$1,234.56` for USD, `1,234.56 EUR` otherwise; a {currency: amount} map shows each currency."""
    if value is None or value == "":
        return "–"
    if isinstance(value, dict):
        if not value:
            return "–"
        return " + ".join(fmt_money(v, c) for c, v in sorted(value.items()))
    amount = money(Decimal(str(value)))
    sign = "-" if amount < 0 else ""
    text = f"{abs(amount):,.2f}"
    if currency in (None, "USD"):
        return f"{sign}${text}"
    return f"{sign}{text} {currency}"

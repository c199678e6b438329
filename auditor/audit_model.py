"""The typed model of what an audit produces: audit.json's summary and its sections (spend, breakdowns, budgets,
the fleet, the forecast, coverage, jobs), as tables/summary.py builds them and as audit.json holds them.

Each section is a TypedDict: the dict the core builds, audit.json encodes (audit._jsonable) and `report` reads back
is the same dict, with the same keys; the types say what each key holds. An amount is a Decimal as computed and
its cent text ("12.34") once written; a time a datetime as computed and its ISO text ("...Z") once written. Keys an
audit.json from an earlier version may lack are NotRequired: the view reads them with a default."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, NotRequired, TypedDict

# Each kind of value audit.json writes as text is Annotated with the name of its definition in the generated
# schema (audit_schema.py), which says how the text looks.
Amount = Annotated[Decimal | str, "money"]  # exact as computed, the cent text ("12.34") in audit.json
PerCurrency = Mapping[str, Amount]  # ISO currency code: amount; currencies are never added together
Hours = Annotated[str, "hours"]  # GPU-hours, one decimal ("12.5")
Time = Annotated[datetime | str, "time"]  # UTC; "2026-07-01T00:00:00Z" in audit.json
Stamp = Annotated[str, "time"]  # a time as audit.json writes it


class FindingCounts(TypedDict):
    total: int
    waived: int
    by_severity: dict[str, int]


class TeamBudget(TypedDict):
    """A policy team's budget and what BUD001 judged against it (entities.TeamSpend), quarter to date."""
    lead: str | None
    quarter: str | None
    budget: Amount | None
    spent: Amount
    share_of_budget: float | None
    left_out: PerCurrency  # spend in currencies the policy gives no rate for: not in `spent`
    gpu_hours: Hours
    gpu_hours_budget: str | None
    gpu_hours_share: float | None


class SpendRow(TypedDict):
    """One row of an organisation breakdown (summary.breakdown[dimension]); `rest`: the rows past the first ones,
    summed."""
    key: str
    billed_cost: PerCurrency
    gpu_cost: PerCurrency
    rest: NotRequired[bool]


class ModelUse(TypedDict):
    gpu_hours: Hours
    billed_cost: PerCurrency


class ModelRow(ModelUse):
    model: str


class TeamDetail(TypedDict):
    """One team's spend (summary.team_spend[team]): by category, provider and project, its GPU compute by
    provider and project, its GPU-hours by pricing and by model, and its utilisation bands."""
    by_category: dict[str, PerCurrency]
    by_provider: dict[str, PerCurrency]
    by_project: dict[str, PerCurrency]
    gpu_by_provider: dict[str, PerCurrency]
    gpu_by_project: dict[str, PerCurrency]
    gpu_hours_by_pricing: dict[str, Hours]
    by_model: dict[str, ModelUse]
    utilisation: NotRequired[dict[str, Hours]]


class Fleet(TypedDict):
    """The GPU fleet: GPU-hours and spend by model, hours by utilisation band, the machines (the first
    fleet.MACHINES of `machines_total`)."""
    by_model: list[ModelRow]
    utilisation: dict[str, Hours]
    machines: list[dict[str, Any]]
    machines_total: int


class Span(TypedDict):
    start: Time
    end: Time
    label: str
    hours: str


class Forecast(TypedDict):
    """Next window's spend at the run rate of `basis`, and the same less the savings found over its hours."""
    basis: Span
    next: Span
    billed_cost: PerCurrency
    gpu_cost: PerCurrency
    by_team: dict[str, PerCurrency]
    savings: PerCurrency
    with_savings: PerCurrency


class PreviousWindow(TypedDict):
    """The window before, when the billing covers it: its spend, for the change over the window."""
    label: str
    start: Time
    end: Time
    rows: int
    billed_cost: PerCurrency
    gpu_cost: PerCurrency


class CoverageMonth(TypedDict):
    month: str
    lines: dict[str, int]


class Coverage(TypedDict):
    months: list[CoverageMonth]
    missing: list[str]


class JobTotals(TypedDict):
    count: int
    unpriced: int
    cost: PerCurrency
    waste: PerCurrency


class Summary(TypedDict):
    """audit.json's `summary` (tables/summary.summarize, with `jobs` and `unit_costs` added by the core)."""
    rows: int
    period_start: Time | None
    period_end: Time | None
    billed_cost: PerCurrency
    effective_cost: PerCurrency
    list_cost: PerCurrency
    gpu_cost: PerCurrency
    spot_cost: PerCurrency
    gpu_spot_cost: PerCurrency
    by_category: dict[str, PerCurrency]
    by_provider: dict[str, PerCurrency]
    transfer_gb_out: dict[str, str]
    lines_by_category: dict[str, int]
    gpu_hours: Hours | None  # None: no GPU usage in the window
    by_team: dict[str, PerCurrency]
    teams: dict[str, TeamBudget]
    findings: FindingCounts
    monthly_savings: PerCurrency
    quarterly_savings: PerCurrency
    savings_to_check: PerCurrency
    wasted: PerCurrency
    actions: NotRequired[list[dict[str, Any]]]  # figures.actions: one per resource, ranked
    savings_by_team: NotRequired[dict[str, PerCurrency]]
    findings_cost: PerCurrency
    breakdown: dict[str, list[SpendRow]]
    gpu_hours_by_pricing: dict[str, Hours]
    team_spend: dict[str, TeamDetail]
    fleet: Fleet
    forecast: Forecast | None
    baseline_left_out: list[str]
    previous_window: PreviousWindow | None
    coverage: Coverage
    kubernetes_gpus: dict[str, Any] | None  # tables/shared_gpus.summary
    allocation: dict[str, Any] | None  # tables/split.provider_split
    weekly: dict[str, Any]  # tables/weekly.weekly
    sparklines: dict[str, Any]  # tables/weekly.sparklines
    jobs: NotRequired[JobTotals]
    unit_costs: NotRequired[dict[str, Any]]


class Tool(TypedDict):
    name: str
    version: str


class WindowText(TypedDict):
    start: Stamp
    end: Stamp
    label: str


class AuditDoc(TypedDict):
    """audit.json (audit.Audit.to_dict, read back by auditfile.read_audit after checking it against
    audit.schema.json): what every output renders."""
    schema: str
    tool: Tool
    generated_at: Stamp
    as_of: NotRequired[str | None]
    window: WindowText
    policy: dict[str, Any]
    partial: bool
    inputs: dict[str, Any]
    summary: Summary
    clauses: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    baseline: NotRequired[dict[str, Any] | None]
    waivers: list[dict[str, Any]]
    warnings: list[str]
    trend: NotRequired[dict[str, Any] | None]
    jobs: NotRequired[list[dict[str, Any]]]

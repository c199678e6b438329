from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from auditor.errors import InputError
from auditor.model import InteractiveGpu, Severity, fmt_money, primary
from auditor.registry import register
from auditor.rule import Rule
from auditor.schema import Field

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
UTC = ZoneInfo("UTC")


def _utc(value) -> datetime:
    """A span's end as a naive UTC datetime (the tables' times; a case file's may be text or aware)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def _clock(text: str, option: str) -> time:
    if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d|24:00", text):
        raise InputError(f"clauses.off_hours.{option}: {text!r} is not a time of day (HH:MM)")
    return time.max if text == "24:00" else time.fromisoformat(text)


def off_hours_overlap(start: datetime, end: datetime, zone: ZoneInfo, work: tuple[time, time],
                      days: set[int], holidays: set[date]) -> float:
    """Hours of [start, end) (naive UTC) outside working hours in `zone`: before `work[0]` and from `work[1]` on
    a working day, all of a weekend day or holiday (local calendar days, daylight saving time included)."""
    total = 0.0
    local = start.replace(tzinfo=UTC).astimezone(zone).date() - timedelta(days=1)
    last = end.replace(tzinfo=UTC).astimezone(zone).date()
    while local <= last:
        def at(t: time, d: date = local) -> datetime:
            return datetime.combine(d, t, zone).astimezone(UTC).replace(tzinfo=None)

        midnight, next_midnight = at(time.min), at(time.min, local + timedelta(days=1))
        if local.weekday() in days and local not in holidays:
            off = [(midnight, at(work[0])), (at(work[1]) if work[1] != time.max else next_midnight, next_midnight)]
        else:
            off = [(midnight, next_midnight)]
        for s, e in off:
            total += max(0.0, (min(e, end) - max(s, start)).total_seconds())
        local += timedelta(days=1)
    return total / 3600


@register
class InteractiveGpuOffHours(Rule):
    """Notebook or dev machine with an owner, billed nights, weekends and holidays while its GPUs sat idle (under 1%).

    ## What it does
    Reads the interactive GPU machines of the inventory: SageMaker notebook instances, Vertex AI Workbench
    instances and Azure ML compute instances (by their ids), machines of the kind `notebook`, and machines
    labelled interactive (`workload: interactive`, `notebook`, `dev` or `devbox`; `interactive: "true"`;
    `role: notebook`), and Kubernetes pods with GPUs labelled so (their cost: their share of the node). From
    their utilisation samples of an hour or less (a pod's: its GPU slice's engine activity), it counts the
    hours at nil GPU utilisation (a mean under 1%) that fall outside working hours in the `time_zone` (IANA
    name) of the policy clause: before `work_start` and from `work_end` on the `work_days`, and all of other
    days and of the `holidays`. Flags a machine with at least `min_idle_off_hours` such hours, an owner
    (`require_owner`: an owner tag, as the policy's attribution reads it) and a saving of at least
    `min_monthly_savings`. The saving is what a schedule that stops it in those hours saves: the idle
    off-hours x its billed hourly rate (billed cost / billed hours), as a monthly run rate over the span its
    samples cover; what it wasted in the window is those idle off-hours x the same rate, not its whole cost.
    Hours nobody measured are not counted.

    ## Why it matters
    A notebook with a GPU is started for a day's work and left running: a SageMaker ml.g5.2xlarge notebook
    costs about $1.50 an hour, nights and weekends are two thirds of the week, and it is neither idle all
    quarter (its owner uses it by day) nor forgotten, so idle-machine checks pass it by.

    ## Example
    ```yaml
    - {id: "arn:aws:sagemaker:us-east-1:111122223333:notebook-instance/ana-nb", provider: aws,
       platform: sagemaker-notebook, instance_type: ml.g5.2xlarge, gpu_count: 1, tags: {owner: ana@example.com},
       sampled_hours: 168, observed_from: "2026-07-06T00:00:00", observed_to: "2026-07-13T00:00:00",
       idle_spans: [["2026-07-10T17:00:00", "2026-07-13T00:00:00"]], cost: {USD: "253.68"}, billed_hours: 168}
    ```

    ## How to fix
    Give it an idle shutdown or a schedule: a SageMaker lifecycle configuration with an idle-shutdown
    script, Vertex AI Workbench's idle shutdown, an Azure ML compute instance's schedule or idle shutdown, a
    CronJob or KEDA cron scaler that scales the interactive pod to zero at night. Keep the work on a volume,
    not on the machine.
    """

    id = "OFF001"
    name = "interactive-gpu-off-hours"
    severity = Severity.MEDIUM
    entity = InteractiveGpu
    clause = "off_hours"
    options = {
        "time_zone": Field("str", default="UTC", doc="IANA time zone of the working hours, e.g. Europe/Berlin"),
        "work_start": Field("str", default="08:00", doc="start of working hours (HH:MM, local)"),
        "work_end": Field("str", default="19:00", doc="end of working hours (HH:MM, local)"),
        "work_days": Field("list", item=Field("str", choices=DAYS), default=list(DAYS[:5]),
                           doc="working days (mon ... sun)"),
        "holidays": Field("list", item=Field("date"), default=[], doc="days off, whole local days"),
        "min_idle_off_hours": Field("number", default=8, minimum=0,
                                    doc="least off-hours at nil utilisation in the window before flagging"),
        "min_monthly_savings": Field("number", default=10, minimum=0,
                                     doc="least monthly saving of a schedule, in the policy's currency"),
        "require_owner": Field("bool", default=True, doc="flag only machines with an owner tag"),
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # checked when the rule is configured, before anything is read or written, not at its first machine
        try:
            self.zone = ZoneInfo(self.opt("time_zone"))
        except (ZoneInfoNotFoundError, ValueError):
            raise InputError(f"clauses.off_hours.time_zone: unknown time zone {self.opt('time_zone')!r} "
                             "(an IANA name such as Europe/Berlin)") from None
        self.work = (_clock(self.opt("work_start"), "work_start"), _clock(self.opt("work_end"), "work_end"))

    def check(self, gpu: InteractiveGpu, ctx):
        zone, work = self.zone, self.work
        owner = ctx.attribute(gpu.tags)[1]
        if (self.opt("require_owner") and not owner) or not gpu.idle_spans or not gpu.observed_from:
            return
        days = {DAYS.index(d) for d in self.opt("work_days")}
        holidays = set(self.opt("holidays"))  # dates: the option's Field("date") reads each one as a date
        idle = sum(off_hours_overlap(_utc(s), _utc(e), zone, work, days, holidays) for s, e in gpu.idle_spans)
        if idle < self.opt("min_idle_off_hours"):
            return
        billed = primary(gpu.cost)
        if not billed or not gpu.billed_hours:
            return  # no billed rate: no saving to state, and no evidence it was billed in those hours
        currency, cost = billed
        rate = cost / Decimal(str(gpu.billed_hours))
        observed = (_utc(gpu.observed_to) - _utc(gpu.observed_from)).total_seconds() / 3600
        idle_cost = rate * Decimal(str(round(idle, 4)))  # the window's spend on idle off-hours
        monthly = ctx.monthly(idle_cost, observed)
        if self.short_of(monthly, currency, "min_monthly_savings", ctx):
            return
        gpus = f"{gpu.gpu_count or '?'}x {gpu.gpu_model or 'GPU'}"
        yield self.finding(
            gpu, ctx,
            f"{gpu.platform} {gpu.name or gpu.id} ({gpu.instance_type or '?'}, {gpus}, owner {owner or 'none'}) sat "
            f"idle (under 1% GPU utilisation) for {idle:,.1f} off-hours (nights, weekends and holidays, "
            f"{self.opt('time_zone')}) of {gpu.sampled_hours:,.0f} h measured in {ctx.window.label}, billed at "
            f"{fmt_money(rate, currency)}/h; a schedule saves {fmt_money(monthly, currency)} a month",
            evidence={"platform": gpu.platform, "idle_off_hours": round(idle, 2),
                      "sampled_hours": round(gpu.sampled_hours, 1), "observed_hours": round(observed, 1),
                      "hourly_rate": str(rate.quantize(Decimal("0.0001"))), "time_zone": self.opt("time_zone"),
                      "work_hours": f"{self.opt('work_start')}-{self.opt('work_end')}",
                      "work_days": self.opt("work_days"), "instance_type": gpu.instance_type,
                      "savings_basis": "idle off-hours x billed hourly rate, as a monthly run rate"},
            cost=cost, monthly_savings=monthly, currency=currency, wasted=idle_cost)

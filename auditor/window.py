"""The audit window: one half-open UTC interval [start, end), and the quarter arithmetic around it.

Every command that takes a window (`audit`, `pull`, the gate's quarter) builds it here, so that the same window
however it is spelled (`--quarter 2026-Q3`, `--since 2026-07-01 --until 2026-10-01`) has the same label, and so
the same fingerprints and email identity.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from auditor.errors import InputError
from auditor.sql import lit, q

MIDNIGHT = datetime.min.time()
# The days a window, a billing line or a date option may fall on: clouds bill from the 2000s, and the quarter
# after any window (trends, forecasts) is still a date Python and DuckDB both hold (Python's end with 9999).
FIRST_DAY, LAST_DAY = datetime(1900, 1, 1), datetime(9998, 12, 31)


@dataclass(frozen=True)
class Window:
    """A half-open UTC interval [start, end) with the label people read (`2026-Q3`, or the dates)."""

    start: datetime
    end: datetime
    label: str = ""

    @classmethod
    def of(cls, start: datetime, end: datetime) -> Window:
        """The window [start, end), labelled by `label_for`."""
        return cls(start, end, label_for(start, end))

    @property
    def hours(self) -> Decimal:
        return Decimal((self.end - self.start).total_seconds()) / 3600

    def where(self, column: str = "ChargePeriodStart") -> str:
        """The SQL condition for a time column falling in the window."""
        return f"{q(column)} >= TIMESTAMP {lit(self.start.isoformat(' '))} " \
               f"AND {q(column)} < TIMESTAMP {lit(self.end.isoformat(' '))}"


def add_months(d: datetime, months: int) -> datetime:
    """The first of the month `months` after d's month."""
    y, m = divmod(d.month - 1 + months, 12)
    return d.replace(year=d.year + y, month=m + 1, day=1)


def quarter_start(day: date) -> datetime:
    return datetime(day.year, 3 * ((day.month - 1) // 3) + 1, 1)


def quarter_of(day: date) -> Window:
    """The calendar quarter that holds a day."""
    start = quarter_start(day)
    return Window(start, add_months(start, 3), f"{start.year}-Q{(start.month + 2) // 3}")


def parse_quarter(text: str) -> Window:
    """`2026-Q3` (or `2026Q3`) as its window."""
    m = re.fullmatch(r"(\d{4})-?Q([1-4])", text.strip(), re.IGNORECASE)
    if not m:
        raise InputError(f"--quarter {text!r}: use the form 2026-Q3")
    start = datetime(int(m.group(1)), 3 * int(m.group(2)) - 2, 1)
    if not FIRST_DAY <= start < LAST_DAY:
        raise InputError(f"--quarter {text!r}: a quarter from {FIRST_DAY.year}-Q1 to {LAST_DAY.year}-Q4")
    return quarter_of(start.date())


def is_quarter(start: datetime, end: datetime) -> bool:
    return start.time() == MIDNIGHT and start == quarter_start(start.date()) and end == add_months(start, 3)


def label_for(start: datetime, end: datetime) -> str:
    """`2026-Q3` for a calendar quarter, else the first and last days."""
    if is_quarter(start, end):
        return quarter_of(start.date()).label
    last = end.date() if end.time() != MIDNIGHT else end.date() - timedelta(days=1)
    return f"{start.date().isoformat()} to {last.isoformat()}"


def parse_day(value: str, option: str) -> datetime:
    """A whole UTC day given as 2026-07-01 (billing is summed per day, so windows are whole days)."""
    try:
        day = datetime.combine(date.fromisoformat(value), MIDNIGHT)
    except ValueError:
        raise InputError(f"{option} {value!r}: use a date like 2026-07-01 (windows are whole UTC days)") from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise InputError(f"{option} {value!r}: a day from {FIRST_DAY.date()} to {LAST_DAY.date()}")
    return day


def from_options(quarter: str | None, since: str | None, until: str | None) -> Window | None:
    """The window of `--quarter` or `--since/--until` (None when neither is given)."""
    if quarter and (since or until):
        raise InputError("use either --quarter or --since/--until, not both")
    if quarter:
        return parse_quarter(quarter)
    if not (since or until):
        return None
    if not (since and until):
        raise InputError("--since and --until go together")
    start, end = parse_day(since, "--since"), parse_day(until, "--until")
    if end <= start:
        raise InputError("--until must be after --since")
    return Window.of(start, end)


def quarter_to_date(today: date | None = None) -> Window:
    """From the start of the current quarter to the end of today (UTC): the pull's default window."""
    today = today or datetime.now(UTC).date()
    return Window.of(quarter_start(today), datetime.combine(today, MIDNIGHT) + timedelta(days=1))


def previous_window(w: Window) -> Window:
    """The calendar quarter before a quarter; otherwise the window of the same length just before."""
    if is_quarter(w.start, w.end):
        return quarter_of(add_months(w.start, -3).date())
    return Window.of(w.start - (w.end - w.start), w.start)


def next_window(w: Window) -> Window:
    """The calendar quarter after a quarter; otherwise the window of the same length just after."""
    if is_quarter(w.start, w.end):
        return quarter_of(w.end.date())
    return Window.of(w.end, w.end + (w.end - w.start))


def stamp_of(value: str | None, env: Mapping[str, str] | None = None) -> datetime | None:
    """--generated-at, else $SOURCE_DATE_EPOCH (the reproducible-builds convention), else None: the audit then
    stamps itself with its as-of date (Audit.stamp), never with the clock."""
    env = os.environ if env is None else env
    if value:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise InputError(f"--generated-at {value!r}: use a time like 2026-10-20T14:30:00+02:00") from None
        return stamp.astimezone(UTC).replace(tzinfo=None) if stamp.tzinfo else stamp
    epoch = env.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        return None
    try:
        return datetime.fromtimestamp(int(epoch), UTC).replace(tzinfo=None)
    except (ValueError, OverflowError, OSError):
        raise InputError(f"SOURCE_DATE_EPOCH {epoch!r}: use whole seconds since 1970-01-01 UTC") from None


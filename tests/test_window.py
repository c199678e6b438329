"""The audit window and quarter arithmetic (auditor/window.py), tested directly: every month boundary, leap years,
and the property that every instant falls in exactly one quarter."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditor.errors import InputError
from auditor.window import (
    Window,
    add_months,
    from_options,
    is_quarter,
    label_for,
    next_window,
    parse_day,
    parse_quarter,
    previous_window,
    quarter_of,
    quarter_start,
    quarter_to_date,
    stamp_of,
)

# Each month's quarter, written out rather than computed: the answer the code must reach.
QUARTER_OF_MONTH = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 2, 7: 3, 8: 3, 9: 3, 10: 4, 11: 4, 12: 4}
FIRST_MONTH = {1: 1, 2: 4, 3: 7, 4: 10}


@pytest.mark.parametrize("month", range(1, 13))
def test_first_and_last_day_of_every_month_fall_in_its_quarter(month):
    first = date(2026, month, 1)
    last = (date(2026 + month // 12, month % 12 + 1, 1) - timedelta(days=1))
    for day in (first, last):
        w = quarter_of(day)
        q = QUARTER_OF_MONTH[month]
        assert w.label == f"2026-Q{q}"
        assert w.start == datetime(2026, FIRST_MONTH[q], 1)
        assert w.start <= datetime.combine(day, datetime.min.time()) < w.end


@pytest.mark.parametrize("q, start, end", [
    (1, datetime(2026, 1, 1), datetime(2026, 4, 1)),
    (2, datetime(2026, 4, 1), datetime(2026, 7, 1)),
    (3, datetime(2026, 7, 1), datetime(2026, 10, 1)),
    (4, datetime(2026, 10, 1), datetime(2027, 1, 1)),
])
def test_parse_quarter_gives_the_calendar_quarter(q, start, end):
    for spelling in (f"2026-Q{q}", f"2026Q{q}", f" 2026-q{q} "):
        w = parse_quarter(spelling)
        assert (w.start, w.end, w.label) == (start, end, f"2026-Q{q}")


@pytest.mark.parametrize("text", ["2026-Q0", "2026-Q5", "26-Q1", "2026-Q", "Q3-2026", "2026-Q3x", ""])
def test_parse_quarter_refuses_what_is_not_a_quarter(text):
    with pytest.raises(InputError, match="use the form 2026-Q3"):
        parse_quarter(text)


@pytest.mark.parametrize("year, hours", [(2023, 2160), (2024, 2184), (2025, 2160), (2100, 2160), (2000, 2184)])
def test_first_quarter_hours_follow_leap_years(year, hours):
    # Q1 is 90 days, 91 in a leap year (2000 is one, 2100 is not).
    assert parse_quarter(f"{year}-Q1").hours == Decimal(hours)


def test_quarter_hours_of_a_year():
    assert [parse_quarter(f"2026-Q{q}").hours for q in (1, 2, 3, 4)] == [2160, 2184, 2208, 2208]


@settings(deadline=None)  # the property, not the speed: a loaded machine must not fail it
@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 12, 31, 23, 59, 59)))
def test_every_instant_falls_in_exactly_one_quarter(instant):
    w = quarter_of(instant.date())
    assert w.start <= instant < w.end
    assert is_quarter(w.start, w.end)
    before, after = previous_window(w), next_window(w)
    assert before.end == w.start and after.start == w.end
    assert not (before.start <= instant < before.end) and not (after.start <= instant < after.end)
    assert parse_quarter(w.label) == w


@settings(deadline=None)  # the property, not the speed: a loaded machine must not fail it
@given(st.dates(min_value=date(1971, 1, 1), max_value=date(9990, 12, 31)), st.integers(-40, 40))
def test_add_months_lands_on_the_first_of_the_right_month(day, months):
    d = add_months(datetime.combine(day, datetime.min.time()), months)
    assert d.day == 1
    assert (d.year * 12 + d.month) - (day.year * 12 + day.month) == months


def test_label_of_a_window_that_is_not_a_quarter_names_its_first_and_last_days():
    assert label_for(datetime(2026, 7, 1), datetime(2026, 10, 1)) == "2026-Q3"
    assert label_for(datetime(2026, 7, 1), datetime(2026, 9, 1)) == "2026-07-01 to 2026-08-31"
    assert label_for(datetime(2026, 7, 2), datetime(2026, 10, 2)) == "2026-07-02 to 2026-10-01"
    # An end that is not midnight: its own day is the last.
    assert label_for(datetime(2026, 7, 1), datetime(2026, 7, 1, 12)) == "2026-07-01 to 2026-07-01"
    assert not is_quarter(datetime(2026, 8, 1), datetime(2026, 11, 1))  # three months, not a calendar quarter
    assert not is_quarter(datetime(2026, 7, 1, 1), datetime(2026, 10, 1, 1))


def test_the_same_window_however_spelled_has_one_label():
    assert from_options("2026-Q3", None, None) == from_options(None, "2026-07-01", "2026-10-01")
    assert from_options(None, None, None) is None


@pytest.mark.parametrize("quarter, since, until, message", [
    ("2026-Q3", "2026-07-01", None, "use either --quarter or --since/--until, not both"),
    (None, "2026-07-01", None, "--since and --until go together"),
    (None, None, "2026-07-01", "--since and --until go together"),
    (None, "2026-07-01", "2026-07-01", "--until must be after --since"),
    (None, "2026-07-02", "2026-07-01", "--until must be after --since"),
    (None, "2026-7-1x", "2026-08-01", "--since '2026-7-1x': use a date like"),
])
def test_from_options_refuses(quarter, since, until, message):
    with pytest.raises(InputError) as exc:
        from_options(quarter, since, until)
    assert str(exc.value).startswith(message), str(exc.value)


def test_a_bad_until_is_named_as_until():
    with pytest.raises(InputError) as exc:
        from_options(None, "2026-07-01", "soon")
    assert str(exc.value) == "--until 'soon': use a date like 2026-07-01 (windows are whole UTC days)"


def test_parse_day_is_a_whole_utc_day():
    assert parse_day("2026-02-28", "--since") == datetime(2026, 2, 28)
    with pytest.raises(InputError, match="--until '2026-02-30'"):
        parse_day("2026-02-30", "--until")


@pytest.mark.parametrize("today, start", [
    (date(2026, 3, 31), datetime(2026, 1, 1)), (date(2026, 4, 1), datetime(2026, 4, 1)),
    (date(2026, 6, 30), datetime(2026, 4, 1)), (date(2026, 9, 30), datetime(2026, 7, 1)),
    (date(2026, 12, 31), datetime(2026, 10, 1)), (date(2024, 2, 29), datetime(2024, 1, 1)),
])
def test_quarter_to_date_runs_to_the_end_of_today(today, start):
    w = quarter_to_date(today)
    assert w.start == start
    assert w.end == datetime.combine(today, datetime.min.time()) + timedelta(days=1)


def test_windows_before_and_after_a_window_that_is_not_a_quarter_have_its_length():
    w = Window.of(datetime(2026, 7, 10), datetime(2026, 7, 20))
    assert previous_window(w) == Window.of(datetime(2026, 6, 30), datetime(2026, 7, 10))
    assert next_window(w) == Window.of(datetime(2026, 7, 20), datetime(2026, 7, 30))
    assert previous_window(parse_quarter("2026-Q1")).label == "2025-Q4"
    assert next_window(parse_quarter("2026-Q4")).label == "2027-Q1"


def test_where_is_the_half_open_interval():
    sql = parse_quarter("2026-Q3").where("t")
    assert sql == "\"t\" >= TIMESTAMP '2026-07-01 00:00:00' AND \"t\" < TIMESTAMP '2026-10-01 00:00:00'"
    assert parse_quarter("2026-Q3").where().startswith('"ChargePeriodStart" >= ')


def test_quarter_start_of_the_last_day_of_each_quarter():
    assert [quarter_start(date(2026, m, d)) for m, d in ((3, 31), (6, 30), (9, 30), (12, 31))] == [
        datetime(2026, 1, 1), datetime(2026, 4, 1), datetime(2026, 7, 1), datetime(2026, 10, 1)]


def test_stamp_of_an_option_the_environment_or_nothing():
    assert stamp_of("2026-10-20T14:30:00+02:00", {}) == datetime(2026, 10, 20, 12, 30)
    assert stamp_of("2026-10-20T14:30:00", {}) == datetime(2026, 10, 20, 14, 30)
    assert stamp_of(None, {"SOURCE_DATE_EPOCH": "86400"}) == datetime(1970, 1, 2)
    assert stamp_of(None, {"SOURCE_DATE_EPOCH": " "}) is None
    assert stamp_of(None, {}) is None
    with pytest.raises(InputError, match="--generated-at"):
        stamp_of("yesterday", {})
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH '1e9'"):
        stamp_of(None, {"SOURCE_DATE_EPOCH": "1e9"})


@pytest.fixture(params=["Etc/GMT-14", "Etc/GMT+12"])
def far_from_utc(request, monkeypatch):
    """The process's local time zone set 14 hours ahead of UTC, or 12 behind: at any hour of the day one of the
    two is on another date than UTC, so code that reads local time where it means UTC fails one of them."""
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_windows_and_stamps_are_utc_whatever_the_local_time_zone(far_from_utc, monkeypatch):
    assert quarter_to_date().end == datetime.combine(datetime.now(UTC).date(), datetime.min.time()) + \
        timedelta(days=1)
    assert stamp_of(None, {"SOURCE_DATE_EPOCH": "86400"}) == datetime(1970, 1, 2)
    assert stamp_of("2026-10-20T14:30:00", {}) == datetime(2026, 10, 20, 14, 30)  # no zone given: taken as UTC
    assert stamp_of("2026-10-20T14:30:00+02:00", {}) == datetime(2026, 10, 20, 12, 30)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "172800")
    assert stamp_of(None) == datetime(1970, 1, 3)  # the process's environment when none is passed


@pytest.mark.parametrize("value, accepted", [
    ("1900-01-01", True), ("9998-12-31", True), ("1899-12-31", False), ("9999-01-01", False)])
def test_a_day_is_read_within_the_years_the_engine_holds(value, accepted):
    if accepted:
        assert parse_day(value, "--since") == datetime.fromisoformat(value)
        return
    with pytest.raises(InputError) as exc:
        parse_day(value, "--since")
    assert str(exc.value) == f"--since '{value}': a day from 1900-01-01 to 9998-12-31"


@pytest.mark.parametrize("text, accepted", [("1900-Q1", True), ("9998-Q4", True), ("1899-Q4", False),
                                            ("9999-Q1", False)])
def test_a_quarter_is_read_within_the_years_the_engine_holds(text, accepted):
    if accepted:
        assert parse_quarter(text).label == text
        return
    with pytest.raises(InputError) as exc:
        parse_quarter(text)
    assert str(exc.value) == f"--quarter '{text}': a quarter from 1900-Q1 to 9998-Q4"

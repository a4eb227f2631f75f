"""Business days of the euro area's payment system: the TARGET2 calendar and the cut-off.

A SEPA credit transfer executes on a TARGET2 business day: not a Saturday or Sunday, and not
one of the closing days the ECB publishes (New Year's Day, Good Friday, Easter Monday,
1 May, 25 and 26 December). An instruction accepted after the bank's cut-off, which is a time
of day in Central European time, executes on the next business day.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

import holidays

CENTRAL_EUROPE = ZoneInfo("Europe/Berlin")
DEFAULT_CUTOFF = time(15, 0)
SATURDAY = 5


@lru_cache(maxsize=64)
def _closing_days(year: int) -> frozenset[date]:
    return frozenset(holidays.financial_holidays("XECB", years=year))


def is_business_day(day: date) -> bool:
    """True on a TARGET2 business day."""
    return day.weekday() < SATURDAY and day not in _closing_days(day.year)


def next_business_day(day: date) -> date:
    """The first business day strictly after `day`."""
    day += timedelta(days=1)
    while not is_business_day(day):
        day += timedelta(days=1)
    return day


def business_day_on_or_after(day: date) -> date:
    """`day` if it is a business day, else the next one."""
    return day if is_business_day(day) else next_business_day(day)


def add_business_days(day: date, count: int) -> date:
    """The business day `count` business days after `day` (count >= 0; 0 is `day` itself,
    moved on to a business day if it is none)."""
    if count < 0:
        raise ValueError("count must not be negative")
    day = business_day_on_or_after(day)
    for _ in range(count):
        day = next_business_day(day)
    return day


def execution_date(at: datetime, cutoff: time = DEFAULT_CUTOFF) -> date:
    """The day an instruction accepted at `at` (aware) executes: that day in Central European
    time if it is a business day and `at` is before the cut-off, else the next business day."""
    if at.tzinfo is None:
        raise ValueError("execution_date needs an aware datetime")
    local = at.astimezone(CENTRAL_EUROPE)
    day = local.date()
    if is_business_day(day) and local.time() < cutoff:
        return day
    return next_business_day(day)


def parse_cutoff(text: str) -> time:
    """`HH:MM` (24-hour) as a time of day; ValueError otherwise."""
    hours, sep, minutes = text.partition(":")
    if not sep or len(hours) != len("HH") or len(minutes) != len("MM"):
        raise ValueError(f"{text!r} is not HH:MM")
    try:
        return time(int(hours), int(minutes))
    except ValueError as e:
        raise ValueError(f"{text!r} is not HH:MM") from e

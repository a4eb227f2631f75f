"""When the reconciler runs what: plain values, no I/O.

    every interval          an intraday run (windows.intraday: since the last completed one)
    after a UTC day closes  that day's end-of-day run, once: a completed one is never repeated;
                            days missed while no reconciler ran are caught up oldest first,
                            at most CATCH_UP_DAYS back
    re-checks               an item is due when one of its re-check ages fell after the last
                            completed re-check and no later than now: an open break aged from
                            its first_seen, a `submitted` settlement from when it became so

The re-check rule needs no record per item: between two completed re-check runs, an item
crosses an age at most once per age, so it is compared again exactly when it crosses one.
A failed re-check run moves nothing, and the next one takes its items again.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

from services.domain.breaks import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_OVERLAP_SECONDS,
    DEFAULT_RECHECK_AGES,
)
from services.domain.reconciliation import RunKind
from services.reconcile.windows import Window

CATCH_UP_DAYS = 7
# An origin before this is older than any settle record: "no lower bound" in SQL terms.
NO_LOWER_BOUND = datetime(1970, 1, 1, tzinfo=UTC)


class Schedule(NamedTuple):
    """How often the reconciler runs and at which ages it looks again."""

    interval: float  # seconds between intraday runs (SETTLE_RECONCILE_INTERVAL)
    recheck_ages: tuple[int, ...] = DEFAULT_RECHECK_AGES  # seconds, strictly growing
    grace: int = DEFAULT_GRACE_SECONDS  # seconds an item may lag before it is a break
    overlap: float = DEFAULT_OVERLAP_SECONDS  # seconds an intraday run reads again


class AgeBounds(NamedTuple):
    """Items whose origin lies in (after, until] have crossed one re-check age."""

    after: datetime  # exclusive
    until: datetime  # inclusive


def end_of_day_due(now: datetime, last_done: date | None) -> date | None:
    """The UTC day whose end-of-day run is due at `now`: the day after the last completed one
    (yesterday if none ever completed, at most CATCH_UP_DAYS back), or None when yesterday's
    is done."""
    yesterday = _utc(now).date() - timedelta(days=1)
    if last_done is None:
        return yesterday
    day = max(last_done + timedelta(days=1), yesterday - timedelta(days=CATCH_UP_DAYS - 1))
    return day if day <= yesterday else None


def recheck_bounds(
    last: datetime | None, now: datetime, ages: tuple[int, ...]
) -> tuple[AgeBounds, ...]:
    """Per re-check age, the origins of the items that crossed it after `last` (the previous
    completed re-check, None if there was none) and by `now`; empty ranges are left out."""
    bounds = []
    for age in ages:
        delta = timedelta(seconds=age)
        after = NO_LOWER_BOUND if last is None else _utc(last) - delta
        until = _utc(now) - delta
        if after < until:
            bounds.append(AgeBounds(after, until))
    return tuple(bounds)


def is_recheck_due(
    origin: datetime, last: datetime | None, now: datetime, ages: tuple[int, ...]
) -> bool:
    """True if an item that started aging at `origin` crossed a re-check age in (last, now]."""
    return any(b.after < _utc(origin) <= b.until for b in recheck_bounds(last, now, ages))


def recheck_window(last: datetime | None, now: datetime, ages: tuple[int, ...]) -> Window:
    """The window a re-check run is recorded under: from the previous completed re-check (or
    the first re-check age back, when there was none) to `now`."""
    if last is not None and last < now:
        return Window(RunKind.RECHECK, last, now)
    return Window(RunKind.RECHECK, now - timedelta(seconds=min(ages, default=1)), now)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("pass timezone-aware datetimes, e.g. datetime.now(UTC)")
    return moment.astimezone(UTC)

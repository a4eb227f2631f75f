"""The bank's clock: TARGET2 business days run fast, each lasting `day_seconds` of wall time.

Day n after the epoch is the n-th business day after the start date, and its `day_seconds`
map onto 00:00-24:00 Central European time of that date, so a 20-second day passes 15:00
(the usual cut-off) 12.5 seconds in. The epoch and start date are kept in the bank's state:
a restarted bank continues the same calendar. Advancing a day moves the epoch back by what
is left of today, so the next day begins at once and every later reading stays consistent.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timedelta
from typing import NamedTuple

from railsim.clock import Clock as WallClock
from railsim.clock import ManualClock, SystemClock
from services.domain.business_days import (
    CENTRAL_EUROPE,
    business_day_on_or_after,
    next_business_day,
)

DAY = timedelta(days=1)
EPSILON = 1e-4  # seconds; well above a float's resolution of Unix time


class Reading(NamedTuple):
    """The bank's clock, read once."""

    business_date: date  # the business day the bank is in
    time: datetime  # the bank's time of day, aware, Central European time


class BankClock:
    """Business dates and times of day from wall time, the epoch and the start date."""

    def __init__(self, wall: WallClock, epoch: float, start: date, day_seconds: float) -> None:
        if day_seconds <= 0:
            raise ValueError("day_seconds must be > 0, e.g. 20")
        self.wall = wall
        self.epoch = epoch
        self.start = business_day_on_or_after(start)
        self.day_seconds = day_seconds
        self._known = (0, self.start)  # the latest (day index, date) worked out

    def read(self) -> Reading:
        """The business date and the time of day now."""
        elapsed = max(0.0, self.wall.now() - self.epoch) / self.day_seconds
        index = math.floor(elapsed)
        day = self.date_of(index)
        midnight = datetime.combine(day, datetime.min.time(), CENTRAL_EUROPE)
        return Reading(day, midnight + (elapsed - index) * DAY)

    def today(self) -> date:
        """The business date now."""
        return self.read().business_date

    def date_of(self, index: int) -> date:
        """The business date of day `index` (0 is the start date)."""
        known_index, known = self._known
        if index < known_index:
            known_index, known = 0, self.start
        while known_index < index:
            known, known_index = next_business_day(known), known_index + 1
        self._known = (known_index, known)
        return known

    def advance(self, days: int = 1) -> None:
        """Begin the business day `days` after today at once (its 00:00)."""
        if days < 1:
            raise ValueError("days must be >= 1")
        now = self.wall.now()
        index = math.floor(max(0.0, now - self.epoch) / self.day_seconds)
        # a hair more than the days asked, so rounding never leaves the reading on their eve
        self.epoch = now - (index + days) * self.day_seconds - EPSILON

    def resume_after(self, books: date) -> None:
        """When the clock has run past the business day after `books` (the bank was down),
        begin that day now instead: simulated time stands still while the bank is down."""
        index = 0
        while self.date_of(index) < books:
            index += 1
        now = self.wall.now()
        if math.floor(max(0.0, now - self.epoch) / self.day_seconds) > index + 1:
            self.epoch = now - (index + 1) * self.day_seconds - EPSILON

    def rescaled(self, day_seconds: float) -> None:
        """Let days last `day_seconds` from now on, keeping today and the time of day."""
        elapsed = max(0.0, self.wall.now() - self.epoch) / self.day_seconds
        self.day_seconds = day_seconds
        self.epoch = self.wall.now() - elapsed * day_seconds


def start_of(day: date) -> datetime:
    """00:00 of `day`, Central European time."""
    return datetime.combine(day, datetime.min.time(), CENTRAL_EUROPE)


def end_of(day: date) -> datetime:
    """The last second of `day`, Central European time: when its statement is drawn up."""
    return start_of(day) + DAY - timedelta(seconds=1)


__all__ = ["BankClock", "ManualClock", "Reading", "SystemClock", "WallClock", "end_of", "start_of"]

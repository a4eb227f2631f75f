"""The clock port: the core reads time only through it, so tests can move time by hand."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock time in Unix seconds."""

    def now(self) -> float:
        """The current time, Unix seconds."""
        ...


class SystemClock:
    """The machine's wall clock."""

    def now(self) -> float:
        """The current time, Unix seconds."""
        return time.time()


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        """The time last set."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`."""
        if seconds < 0:
            raise ValueError("time only moves forward; pass seconds >= 0")
        self._now += seconds

"""Which stretch of time a reconciliation run covers: plain values, no I/O.

    run          window                                              kind
    intraday     [last completed intraday end - overlap, now)         intraday
                 [now - one hour, now) when none has completed yet
    --day D      [D 00:00 UTC, D+1 00:00 UTC)                          end_of_day

The overlap reads again the minutes the last run may have seen before the rail caught up;
breaks are kept once each across runs, so reading them twice adds nothing.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time, timedelta
from typing import NamedTuple

from services.domain.breaks import DEFAULT_OVERLAP_SECONDS
from services.domain.reconciliation import RunKind

DEFAULT_OVERLAP = timedelta(seconds=DEFAULT_OVERLAP_SECONDS)
FIRST_WINDOW = timedelta(hours=1)
DAY = timedelta(days=1)


class Window(NamedTuple):
    """A run's window, [start, end), and the kind of run it is."""

    kind: RunKind
    start: datetime
    end: datetime

    def seconds(self) -> tuple[int, int]:
        """The window in whole Unix seconds, as the rail's `created` filter takes it, widened to
        the seconds it touches: the rail stamps objects with whole seconds."""
        return math.floor(self.start.timestamp()), math.ceil(self.end.timestamp())


def intraday(
    last_end: datetime | None, now: datetime, overlap: timedelta = DEFAULT_OVERLAP
) -> Window:
    """Since the last completed intraday run (less the overlap), else the last hour, to `now`."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware, e.g. datetime.now(UTC)")
    start = now - FIRST_WINDOW if last_end is None else min(last_end - overlap, now)
    return Window(RunKind.INTRADAY, start, now)


def end_of_day(day: date) -> Window:
    """The whole UTC day `day`."""
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return Window(RunKind.END_OF_DAY, start, start + DAY)

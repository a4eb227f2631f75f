"""How long a claim made by this process surely stays its own, read from its own clock."""

from __future__ import annotations

import time
from collections.abc import Callable


def _boot_clock() -> float:
    """Seconds since boot, counting time the process or the whole machine stood still."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


# CLOCK_BOOTTIME runs on through a SIGSTOP, a stall and a suspend of the machine; the
# monotonic clock (the fallback off Linux) runs on through the first two.
LEASE_CLOCK: Callable[[], float] = (
    _boot_clock if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic
)


class LeaseClock:
    """A claim's lease as this process measures it, started just before the claim was sent.

    The lease in the row runs from the claiming transaction's start (PostgreSQL's `now()`),
    which is no earlier than this clock's start, and only pass 2 takes a claim over, once the
    row's lease has run out. So while this clock leaves room for a whole call, the claim is
    surely still ours with that room, known without asking PostgreSQL. A pause of the
    process (a stall, SIGSTOP) runs this clock on, as it runs the lease on.
    """

    def __init__(
        self,
        lease_seconds: float,
        call_seconds: float,
        clock: Callable[[], float] = LEASE_CLOCK,
    ) -> None:
        self._clock = clock
        self._last_call_start = clock() + lease_seconds - call_seconds

    def time_for_a_call(self) -> bool:
        """Whether a call starting now would end inside the lease."""
        return self._clock() < self._last_call_start

"""How long a claim made by this process surely stays its own, read from its own clock."""

from __future__ import annotations

import time
from collections.abc import Callable


class LeaseClock:
    """A claim's lease as this process measures it, started just before the claim was sent.

    The lease in the row runs from the claiming transaction's start (PostgreSQL's `now()`),
    which is no earlier than this clock's start, and only pass 2 takes a claim over, once the
    row's lease has run out. So while this clock leaves room for a whole call, the claim is
    surely still ours with that room: what STILL_HOLDER asks PostgreSQL, known without asking.
    A pause of the process (a stall, SIGSTOP) runs this clock on, as it runs the lease on.
    """

    def __init__(
        self, lease_seconds: float, call_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self._clock = clock
        self._last_call_start = clock() + lease_seconds - call_seconds

    def time_for_a_call(self) -> bool:
        """Whether a call starting now would end inside the lease."""
        return self._clock() < self._last_call_start

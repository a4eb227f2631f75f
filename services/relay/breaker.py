"""A rail's circuit breaker: after a run of calls that got no answer, its dispatcher stops
claiming for a while, so a rail that is down costs its own instructions a wait and nothing
else: no leases burnt on calls bound to fail, no retry budget spent, no connections held.

    closed      calls go out; `threshold` failures in a row (retryable or ambiguous, the
                classes in which the rail did not answer for itself) open it
    open        nothing is claimed for `cooldown` seconds; the instructions stay pending
                (or wait out their lease) and lose nothing
    half-open   after the cool-down one round of calls goes out: an answer closes the
                breaker, a failure opens it again for twice as long (up to `max_cooldown`)

A failure that comes back while the breaker is open belongs to a call sent before it opened
(many are in flight at once): the run that opened it counted it already, so it neither opens
it again nor lengthens the wait.

Each dispatcher has its own breaker, so one rail down never slows another rail.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from services.domain.rail import RailOutcome

FAILURES = frozenset({RailOutcome.RETRYABLE, RailOutcome.AMBIGUOUS})


@dataclass(frozen=True)
class BreakerPolicy:
    """When a breaker opens and how long it stays open."""

    threshold: int = 20  # failures in a row
    cooldown: float = 2.0  # seconds open the first time
    max_cooldown: float = 30.0


class CircuitBreaker:
    """See the module docstring."""

    def __init__(
        self, policy: BreakerPolicy | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.policy = policy or BreakerPolicy()
        self._clock = clock
        self._failures = 0
        self._cooldown = self.policy.cooldown
        self._open_until: float | None = None

    @property
    def is_open(self) -> bool:
        """Whether claims wait: open and still cooling down."""
        return self._open_until is not None and self._clock() < self._open_until

    def record(self, outcome: RailOutcome) -> None:
        """One call's outcome."""
        if outcome not in FAILURES:
            self._failures, self._open_until = 0, None
            self._cooldown = self.policy.cooldown
            return
        if self.is_open:
            return  # a call sent before the breaker opened
        self._failures += 1
        half_open = self._open_until is not None
        if half_open or self._failures >= self.policy.threshold:
            if half_open:
                self._cooldown = min(2 * self._cooldown, self.policy.max_cooldown)
            self._open_until = self._clock() + self._cooldown
            self._failures = 0

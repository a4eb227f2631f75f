"""A rail's circuit breaker: after a run of calls that got no answer, its dispatcher stops
claiming for a while, so a rail that is down costs its own instructions a wait and nothing
else: no leases burnt on calls bound to fail, no retry budget spent, no connections held.

    closed      calls go out; `threshold` failures in a row (retryable or ambiguous, the
                classes in which the rail did not answer for itself) open it
    open        nothing is claimed for `cooldown` seconds; the instructions stay pending
                (or wait out their lease) and lose nothing
    half-open   after the cool-down one round of calls goes out: an answer closes the
                breaker, a failure opens it again for twice as long (up to `max_cooldown`)

Each call is sent under the breaker's generation (`generation`, taken as the call starts),
which moves on each time the breaker opens. An outcome of a call sent under an older
generation (many are in flight at once, and a timeout comes back long after) counts for
nothing: a late failure neither opens the breaker again nor lengthens its wait, and a late
answer does not close it.

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
        self.generation = 0  # moves on each time the breaker opens

    @property
    def is_open(self) -> bool:
        """Whether claims wait: open and still cooling down."""
        return self._open_until is not None and self._clock() < self._open_until

    def record(self, outcome: RailOutcome, generation: int) -> None:
        """The outcome of one call sent under `generation`."""
        if generation != self.generation:
            return  # sent before the breaker last opened: already counted, or out of date
        if outcome not in FAILURES:
            self._failures, self._open_until = 0, None
            self._cooldown = self.policy.cooldown
            return
        self._failures += 1
        half_open = self._open_until is not None
        if half_open or self._failures >= self.policy.threshold:
            if half_open:
                self._cooldown = min(2 * self._cooldown, self.policy.max_cooldown)
            self._open_until = self._clock() + self._cooldown
            self._failures = 0
            self.generation += 1

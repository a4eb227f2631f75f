"""The apply worker: takes stored events one transaction each and applies them.

Each loop claims the oldest due row (`received`, or `parked` whose backoff has passed) with
`FOR UPDATE SKIP LOCKED`, applies it, and records the outcome in the same transaction, so
several loops and several inbox replicas share the table without applying a row twice. A
crash anywhere leaves the row `received` or `parked` for the next claim. An event with no
settlement yet is parked with a doubling, jittered delay and goes `dead` with its reason
once its attempt budget is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import asyncpg

from services.inbox.apply import Outcome, apply_event
from services.inbox.decision import InboxStatus, retry_delay
from services.inbox.metrics import InboxMetrics
from services.inbox.store import StoredEvent, claim_due, oldest_parked, record
from services.shared.running import run_until_first_exits
from services.shared.transitions import TransitionConflict

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]
POLL_SECONDS = 0.5  # parked rows come due, and other replicas store rows we are not told of
STORE_RETRY_SECONDS = 1.0


def utc_now() -> datetime:
    """The wall clock, as the worker and the HTTP layer read it unless a test passes another."""
    return datetime.now(UTC)


class RetryPolicy(NamedTuple):
    """How a parked event is retried."""

    attempts: int = 10  # attempts before the event goes dead
    base_seconds: float = 1.0  # delay before the second attempt; doubles each time
    max_seconds: float = 300.0  # the doubling stops here


class InboxWorker:
    """Applies stored rail events; `wake()` starts a pass at once instead of at the next poll."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        metrics: InboxMetrics,
        policy: RetryPolicy | None = None,
        *,
        clock: Clock = utc_now,
        rng: random.Random | None = None,
    ) -> None:
        self._pool = pool
        self._metrics = metrics
        self._policy = policy or RetryPolicy()
        self._clock = clock
        self._rng = rng or random.Random()
        self._wakeup = asyncio.Event()

    def wake(self) -> None:
        """Tell the loops a row was stored."""
        self._wakeup.set()

    async def apply_next(self) -> Outcome | None:
        """Claim, apply and record one due event in one transaction; None when none is due."""
        now = self._clock()
        started = time.perf_counter()
        async with self._pool.acquire() as conn, conn.transaction():
            event = await claim_due(conn, now)
            if event is None:
                return None
            try:
                async with conn.transaction():  # a savepoint: a failed apply keeps the claim
                    outcome = await apply_event(conn, event, now)
            except (asyncpg.PostgresError, TransitionConflict) as e:
                log.warning("applying inbox event %s failed: %s", event.id, e)
                outcome = Outcome(InboxStatus.PARKED, f"apply failed: {e}")
            outcome = await self._record(conn, event, outcome, now)
        self._count(event, outcome, time.perf_counter() - started)
        return outcome

    async def drain(self) -> int:
        """Apply until nothing is due; how many attempts were made."""
        done = 0
        while await self.apply_next() is not None:
            done += 1
        return done

    async def run(self, loops: int = 1) -> None:
        """Run `loops` concurrent apply loops and the parked-age watch until cancelled."""
        await run_until_first_exits(*(self._loop() for _ in range(loops)), self._watch())

    async def _loop(self) -> None:
        while True:
            try:
                await self.drain()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as e:
                log.warning("inbox store unavailable (%s); retrying", e)
                await asyncio.sleep(STORE_RETRY_SECONDS)
                continue
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), POLL_SECONDS)

    async def _watch(self) -> None:
        while True:
            try:
                since = await oldest_parked(self._pool)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                since = None
            age = (self._clock() - since).total_seconds() if since else 0.0
            self._metrics.oldest_parked.set(max(age, 0.0))
            await asyncio.sleep(2 * POLL_SECONDS)

    async def _record(
        self, conn: asyncpg.Connection, event: StoredEvent, outcome: Outcome, now: datetime
    ) -> Outcome:
        due = None
        if outcome.status is InboxStatus.PARKED:
            attempt = event.attempts + 1
            if attempt >= self._policy.attempts:
                reason = f"{outcome.reason} (given up after {attempt} attempts)"
                outcome = outcome._replace(status=InboxStatus.DEAD, reason=reason)
            else:
                p = self._policy
                delay = retry_delay(attempt, p.base_seconds, p.max_seconds, self._rng)
                due = now + timedelta(seconds=delay)
        await record(
            conn, event, outcome.status, reason=outcome.reason, now=now,
            settlement_id=outcome.settlement_id, next_attempt_at=due,
        )  # fmt: skip
        return outcome

    def _count(self, event: StoredEvent, outcome: Outcome, seconds: float) -> None:
        m = self._metrics
        m.apply_seconds.observe(seconds)
        if outcome.status is InboxStatus.APPLIED:
            m.applied.labels(event_type=event.event_type).inc()
        elif outcome.status is InboxStatus.PARKED:
            m.parked.inc()
        elif outcome.status is InboxStatus.DEAD:
            m.dead.inc()

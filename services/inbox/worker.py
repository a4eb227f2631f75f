"""The apply worker: applies events as they are stored, and takes what that left in batches.

`apply_stored` applies the rows a webhook group just inserted, inside the transaction that
stores them (`intake.EventStore`), under a savepoint: a failure there leaves the rows
`received` and wakes the loops below. They are the path for everything else: an apply as
stored that failed, parked events coming due, replays, rows another replica left.

Each loop claims up to `batch_size` of the oldest due rows (`received`, or `parked` whose
backoff has passed) with `FOR UPDATE SKIP LOCKED`, applies them (`apply_events`: their
settlements locked in id order, the moves written together), and records every outcome in
the same transaction, so several loops and several inbox replicas share the table without
applying a row twice, and a commit's cost is shared by the whole batch. A crash anywhere
leaves the rows `received` or `parked` for the next claim. A batch that fails (a deadlock
twice, a row the database refuses, a settlement changed under its lock) is rolled back and
its rows are taken one per transaction, so one bad event is parked alone and never holds up
the rest. An event with no settlement yet is parked with a doubling, jittered delay and goes
`dead` with its reason once its attempt budget is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import UNREACHABLE, is_retriable, retry_contended
from services.domain.errors import SettleError
from services.domain.rail_event import SIGNALS, InboxStatus
from services.inbox.apply import Outcome, apply_events
from services.inbox.metrics import InboxMetrics
from services.inbox.store import Recorded, StoredEvent, claim_due_many, record_many, watched
from services.platform.backoff import backoff
from services.platform.clock import Clock, utc_now
from services.platform.logs import about_settlement
from services.platform.running import run_until_first_exits

log = logging.getLogger(__name__)
ApplyEvents = Callable[..., Awaitable[list[Outcome]]]  # services.inbox.apply.apply_events
ClaimDue = Callable[[asyncpg.Connection, datetime, int], Awaitable[list[StoredEvent]]]
POLL_SECONDS = 0.5  # parked rows come due, and other replicas store rows we are not told of
STORE_RETRY_SECONDS = 1.0
BATCH_SIZE = 500
# Applying as stored holds the webhooks' answers: a settlement locked longer than this (a
# worker's large batch on it) leaves the rows to the loops instead of keeping the rail waiting.
STORED_LOCK_TIMEOUT = "250ms"
APPLY_SAVEPOINT = f"SAVEPOINT apply_stored; SET LOCAL lock_timeout = '{STORED_LOCK_TIMEOUT}'"
ROLLBACK_APPLY = "ROLLBACK TO SAVEPOINT apply_stored"


class RetryPolicy(NamedTuple):
    """How a parked event is retried."""

    attempts: int = 10  # attempts before the event goes dead
    base_seconds: float = 1.0  # delay before the second attempt; doubles each time
    max_seconds: float = 300.0  # the doubling stops here

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds before retry `attempt` (1-based): doubling, capped, jittered between half
        and all of it, so parked events are spread and still spaced by at least half."""
        return backoff(attempt - 1, self.base_seconds, self.max_seconds, rng, least=0.5)


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
        batch_size: int = BATCH_SIZE,
        apply: ApplyEvents = apply_events,
        claim: ClaimDue = claim_due_many,
    ) -> None:
        """`apply` and `claim`: the inbox's own apply and claim, unless a caller watches them."""
        self._pool = pool
        self._apply_events, self._claim_due = apply, claim
        self._batch_size = batch_size
        self._metrics = metrics
        self._policy = policy or RetryPolicy()
        self._clock = clock
        self._rng = rng or random.Random()
        self._wakeup = asyncio.Event()
        # Each child looked up once: `labels()` on every event costs more than counting.
        self._applied = {t: metrics.applied.labels(event_type=t) for t in SIGNALS}

    def wake(self) -> None:
        """Tell the loops a row was stored."""
        self._wakeup.set()

    async def apply_stored(
        self,
        conn: asyncpg.Connection,
        events: Sequence[StoredEvent],
        settlements: Collection[uuid.UUID],
    ) -> list[Outcome] | None:
        """Apply `events`, stored by `conn`'s open transaction, to `settlements` (every one
        they may be about) and record their outcomes in it, under a savepoint; None if the
        apply failed: then none of it is kept and the rows stay `received` for the loops
        (`committed` wakes them)."""
        now = self._clock()
        started = time.perf_counter()
        await conn.execute(APPLY_SAVEPOINT)
        try:
            outcomes = await self._apply_events(conn, events, now, settlements=settlements)
            recorded = [self._recorded(e, o, now) for e, o in zip(events, outcomes, strict=True)]
            await record_many(conn, [r for r, _ in recorded], now)
        except Exception as e:  # noqa: BLE001 - not hidden: logged, and the loops meet it again
            # A settlement locked past the timeout, a deadlock, a refused row, a bug: the rows
            # are stored all the same (a lost connection fails the rollback and the commit),
            # and the loops try again with their own batches, one at a time if need be.
            log.warning(
                "applying %d inbox events as stored failed (%r); left to the loops", len(events), e
            )
            await conn.execute(ROLLBACK_APPLY)
            return None
        self._metrics.apply_seconds.observe(time.perf_counter() - started)
        return [outcome for _, outcome in recorded]

    def committed(self, events: Sequence[StoredEvent], outcomes: Sequence[Outcome] | None) -> None:
        """After `apply_stored`'s transaction committed: count the outcomes, or wake the loops
        for rows it left `received`."""
        if outcomes is None:
            self._metrics.left_to_worker.inc(len(events))
            self.wake()
            return
        applied_at = self._clock()
        for event, outcome in zip(events, outcomes, strict=True):
            self._count(event, outcome, applied_at)

    async def apply_batch(self) -> list[Outcome]:
        """Claim, apply and record up to `batch_size` due events in one transaction (one per
        transaction if the batch fails); their outcomes, [] when none is due."""
        try:
            return await retry_contended(
                lambda: self._apply(self._batch_size, alone=False), attempts=2
            )
        except UNREACHABLE:
            raise  # the store is away: the loop waits, nothing is rolled per event
        except (asyncpg.PostgresError, SettleError) as e:
            failed = e
        log.warning("applying a batch of inbox events failed (%s); applying one by one", failed)
        outcomes: list[Outcome] = []
        while len(outcomes) < self._batch_size and (one := await self._apply(1, alone=True)):
            outcomes += one
        return outcomes

    async def _apply(self, limit: int, *, alone: bool) -> list[Outcome]:
        """Claim up to `limit` due events, apply and record them in one transaction. `alone`
        (a batch of one): an event that fails to apply is parked instead of failing the rest."""
        now = self._clock()
        started = time.perf_counter()
        async with self._pool.acquire() as conn, conn.transaction():
            events = await self._claim_due(conn, now, limit)
            if not events:
                return []
            if alone:
                outcomes = [await _apply_or_park(self._apply_events, conn, events[0], now)]
            else:
                outcomes = await self._apply_events(conn, events, now)
            recorded = [self._recorded(e, o, now) for e, o in zip(events, outcomes, strict=True)]
            await record_many(conn, [r for r, _ in recorded], now)
        self._metrics.apply_seconds.observe(time.perf_counter() - started)
        applied_at = self._clock()
        for event, (_, outcome) in zip(events, recorded, strict=True):
            self._count(event, outcome, applied_at)
        return [outcome for _, outcome in recorded]

    async def drain(self) -> int:
        """Apply until nothing is due; how many attempts were made."""
        done = 0
        while outcomes := await self.apply_batch():
            done += len(outcomes)
            if len(outcomes) >= self._batch_size:
                self.wake()  # a backlog: the loops that sleep until woken join in
        return done

    async def run(self, loops: int = 1) -> None:
        """Run `loops` concurrent apply loops and the parked and dead watch until cancelled. The
        first also polls; the others sleep until woken, so an idle inbox claims twice a
        second, not `loops` times as often (webhooks are applied as stored)."""
        polls = (POLL_SECONDS if n == 0 else None for n in range(loops))
        await run_until_first_exits(*(self._loop(poll) for poll in polls), self._watch())

    async def _loop(self, poll: float | None) -> None:
        while True:
            try:
                await self.drain()
            except Exception as e:
                if not is_retriable(e):
                    raise
                log.warning("inbox store unavailable (%s); retrying", e)
                await asyncio.sleep(STORE_RETRY_SECONDS)
                continue
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), poll)

    async def _watch(self) -> None:
        while True:
            try:
                since, dead = await watched(self._pool)
                self._metrics.dead_now.set(dead)  # kept while the store is out of reach
            except (*UNREACHABLE, asyncpg.PostgresError):
                since = None
            age = (self._clock() - since).total_seconds() if since else 0.0
            self._metrics.oldest_parked.set(max(age, 0.0))
            await asyncio.sleep(2 * POLL_SECONDS)

    def _recorded(
        self, event: StoredEvent, outcome: Outcome, now: datetime
    ) -> tuple[Recorded, Outcome]:
        """What to write for `outcome` of `event`: a parked event past its budget goes dead."""
        due = None
        if outcome.status is InboxStatus.PARKED:
            attempt = event.attempts + 1
            if attempt >= self._policy.attempts:
                reason = f"{outcome.reason} (given up after {attempt} attempts)"
                outcome = outcome._replace(status=InboxStatus.DEAD, reason=reason)
            else:
                due = now + timedelta(seconds=self._policy.delay(attempt, self._rng))
        recorded = Recorded(
            event, outcome.status, outcome.reason, outcome.settlement_id, due, outcome.mismatch
        )
        return recorded, outcome

    def _count(self, event: StoredEvent, outcome: Outcome, committed_at: datetime) -> None:
        m = self._metrics
        _log(event, outcome)
        if outcome.status is InboxStatus.APPLIED:
            applied = self._applied.get(event.event_type)
            (applied or m.applied.labels(event_type=event.event_type)).inc()
            # Counted once committed: applied means visible, not merely written.
            m.apply_lag.observe(max((committed_at - event.received_at).total_seconds(), 0.0))
            if outcome.accepted_at is not None:
                paid_after = (committed_at - outcome.accepted_at).total_seconds()
                m.accepted_to_paid.observe(max(paid_after, 0.0))
        elif outcome.status is InboxStatus.PARKED:
            m.parked.inc()
        elif outcome.status is InboxStatus.DEAD:
            m.dead.inc()
        elif outcome.status is InboxStatus.MISMATCH:
            m.mismatched.inc()


def _log(event: StoredEvent, outcome: Outcome) -> None:
    """One line per committed outcome about a settlement, under its id, tenant and trace:
    `debug` when applied or ignored (routine), `info` when parked, dead or a mismatch."""
    s = outcome.settlement
    routine = outcome.status in (InboxStatus.APPLIED, InboxStatus.IGNORED)
    level = logging.DEBUG if routine else logging.INFO
    if s is None or not log.isEnabledFor(level):
        return
    why = f": {outcome.reason}" if outcome.reason else ""
    with about_settlement(s.id, s.tenant, s.trace):
        log.log(
            level,
            "webhook %s (%s) %s%s",
            event.rail_event_id,
            event.event_type,
            outcome.status,
            why,
        )


async def _apply_or_park(
    apply: ApplyEvents, conn: asyncpg.Connection, event: StoredEvent, now: datetime
) -> Outcome:
    """`apply` for one event; a failure parks it, keeping the claim for the record."""
    try:
        async with conn.transaction():  # a savepoint: a failed apply keeps the claim
            (outcome,) = await apply(conn, [event], now)
    except (asyncpg.PostgresError, SettleError) as e:
        # Retriable: parked for a later attempt; else (a settlement changed under its lock,
        # data refused) no attempt can mend it: dead, for an operator.
        log.warning("applying inbox event %s failed: %s", event.id, e)
        status = InboxStatus.PARKED if is_retriable(e) else InboxStatus.DEAD
        return Outcome(status, f"apply failed: {e}")
    return outcome

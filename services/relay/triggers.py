"""Pass 1's trigger: settlement `created` events on Kafka start the dispatch of their settlements.

Events are read in polled batches, the `created` ones chunked and dispatched side by side; the
next batch is polled while earlier ones are still dispatching (a few at once, however long the
oldest takes), and an offset is committed once its batch's and every earlier batch's claims
are durable, at most once a second:
an event read again after a restart or a rebalance claims nothing that was claimed already,
so a commit per batch would buy nothing but a Kafka round trip. A chunk that failed with a
retriable error (PostgreSQL away or busy, a rail lookup failing) is only logged: its claims
wait for pass 2, so nothing is lost by moving on. A record that does not decode, or a
`created` event whose settlement id is not a UUID, is poison: logged with its partition and
offset, counted (settle_relay_poison_events_total) and passed over with its batch, never
retried (the relay has no dead-letter topic). Any other error (a settlement changed under
its row lock, data the database refuses) is a bug or a manual edit: it stops the relay
rather than being skipped, and the uncommitted offsets bring the events back after the
restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence, Set
from contextlib import AsyncExitStack
from functools import cache
from typing import NamedTuple, Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from services.adapters.kafka.clients import messages_behind, run_reconnecting, started
from services.adapters.kafka.poison import Poison, log_poison, poison
from services.adapters.postgres.store_errors import is_retriable
from services.contracts import avro
from services.domain.errors import SchemaError
from services.platform.metrics import ConsumerLag
from services.relay.event_kind import EVENT, EventKinds
from services.relay.metrics import RelayMetrics, create_metrics

log = logging.getLogger(__name__)
CONSUMER_GROUP = "settle-relay"
DISPATCH_CHUNK = 100  # settlements claimed, sent and recorded together
POLL_MS = 500
POLL_RECORDS = 500
COMMIT_SECONDS = 1.0
# Polled batches dispatching at once; the next poll waits for one of them. A batch waiting on
# a rail call that times out is out for the call's whole timeout, so a few such batches must
# not use up every slot.
BATCHES_IN_FLIGHT = 8
LAG_SERVICE = "relay"  # the `service` label of the triggers' settle_consumer_lag


class OffsetCommits:
    """When the offsets of dispatched events are committed: at most once per interval."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._last = clock()
        self._pending = False

    def dispatched(self) -> None:
        """Events up to the consumer's position are dispatched and their claims durable."""
        self._pending = True

    def due(self) -> bool:
        """Whether to commit now; if so, the interval starts over."""
        if not self._pending or self._clock() - self._last < self._interval:
            return False
        self._last, self._pending = self._clock(), False
        return True


class DispatchesMany(Protocol):
    """What the trigger needs of the dispatcher: pass 1 for a chunk of settlements."""

    async def dispatch_many(self, settlement_ids: Sequence[str]) -> None:
        """Claim and send the settlements' pending instructions."""
        ...


class Created(NamedTuple):
    """What a polled batch asks of pass 1, and what in it could not be read."""

    settlement_ids: list[str]  # of the `created` events, in canonical UUID form
    poison: list[Poison]  # records that do not decode, or `created` ones without a UUID


def created_settlements(records: Iterable[ConsumerRecord]) -> Created:
    """The settlement ids of the `created` events among `records`, and the poison records
    passed over. Other types, known or not (the contract says new ones may come), are not
    pass 1's business."""
    created: list[str] = []
    passed: list[Poison] = []
    kinds = _event_kinds()
    for record in records:
        if kinds.kind(record.value or b"") not in (b"created", None):
            continue  # another step of a settlement: nothing to dispatch, no need to decode
        try:
            event = avro.decode(record.value or b"", EVENT)
        except SchemaError as e:
            passed.append(poison(record, "undecodable", str(e)))
            continue
        if event["type"] != "created":
            continue
        try:
            created.append(str(uuid.UUID(event["settlement_id"])))
        except ValueError:
            why = f"settlement_id {event['settlement_id']!r} is not a UUID"
            passed.append(poison(record, "invalid_settlement_id", why))
    return Created(created, passed)


@cache
def _event_kinds() -> EventKinds:
    return EventKinds(avro.default_catalog().current(EVENT))


async def dispatch_created(dispatcher: DispatchesMany, settlement_ids: Sequence[str]) -> None:
    """Pass 1 for `settlement_ids` in chunks side by side; a chunk's retriable failure is
    left to pass 2, any other failure is raised."""
    chunks = [
        settlement_ids[i : i + DISPATCH_CHUNK]
        for i in range(0, len(settlement_ids), DISPATCH_CHUNK)
    ]
    outcomes = await asyncio.gather(
        *(dispatcher.dispatch_many(chunk) for chunk in chunks), return_exceptions=True
    )
    for chunk, outcome in zip(chunks, outcomes, strict=True):
        if not isinstance(outcome, BaseException):
            continue
        if not is_retriable(outcome):
            raise outcome
        log.warning("dispatch of %d settlements failed, pass 2 will retry: %s", len(chunk), outcome)


class DispatchesInOrder:
    """Polled batches dispatching side by side, their offsets released in poll order.

    The consumer fetches the next batch while earlier ones are still at the rail, so an
    event waits for its own dispatch only, not for the batch before it. An offset is
    committable once its batch and every batch polled before it are dispatched: a commit
    never passes an event whose claim is not durable yet.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._running: deque[tuple[asyncio.Task[None], dict[TopicPartition, int]]] = deque()
        self._done: dict[TopicPartition, int] = {}

    def start(self, dispatch: Awaitable[None], offsets: dict[TopicPartition, int]) -> None:
        """Dispatch one polled batch whose next offsets are `offsets`."""
        self._running.append((asyncio.ensure_future(dispatch), offsets))

    async def settle(self) -> bool:
        """Collect the batches finished in poll order, first waiting while `limit` are still
        dispatching; whether offsets were released. A batch's non-retriable failure is raised
        here."""
        released = False
        # A batch whose call is held at the rail holds one slot, not the poll: the batches
        # polled after it dispatch on, and only their offsets wait for it
        while len(dispatching := [t for t, _ in self._running if not t.done()]) >= self._limit:
            await asyncio.wait(dispatching, return_when=asyncio.FIRST_COMPLETED)
            released = self._release_finished() or released
        return self._release_finished() or released

    def _release_finished(self) -> bool:
        released = False
        while self._running and self._running[0][0].done():
            task, offsets = self._running.popleft()
            task.result()  # a failure that must stop the relay stops it here
            self._done.update(offsets)
            released = True
        return released

    def committable(self, assigned: Set[TopicPartition]) -> dict[TopicPartition, int]:
        """The offsets released since the last call, of the partitions still `assigned`
        (a revoked partition's events are the new owner's to dispatch and commit)."""
        done, self._done = self._done, {}
        return {tp: offset for tp, offset in done.items() if tp in assigned}

    async def finish(self) -> None:
        """Let the batches still dispatching finish; their offsets are never committed."""
        tasks = [task for task, _ in self._running]
        self._running.clear()
        # Claims at the rail are seen through rather than abandoned: an abandoned claim would
        # wait out its lease for pass 2. Their outcomes are moot here: the uncommitted events
        # come back to the next session, which claims nothing that was claimed already.
        await asyncio.gather(*tasks, return_exceptions=True)


async def trigger_dispatch(
    consumer_of: Callable[[], AIOKafkaConsumer],
    dispatcher: DispatchesMany,
    metrics: RelayMetrics | None = None,
) -> None:
    """Pass 1 on every `created` event until cancelled; offsets move once each claim is
    durable, poison records are logged, counted and passed over, and the consumer is made
    afresh whenever Kafka fails it."""
    metrics = metrics or create_metrics()
    poison_count = metrics.poison
    lag = ConsumerLag(metrics.consumer_lag, LAG_SERVICE)

    async def session(clients: AsyncExitStack) -> None:
        consumer = await started(clients, consumer_of())
        commits = OffsetCommits(COMMIT_SECONDS)
        batches_out = DispatchesInOrder(BATCHES_IN_FLIGHT)
        clients.push_async_callback(batches_out.finish)
        while True:
            batches = await consumer.getmany(timeout_ms=POLL_MS, max_records=POLL_RECORDS)
            lag.record(await messages_behind(consumer))
            if batches:
                records = [record for part in batches.values() for record in part]
                next_offsets = {tp: part[-1].offset + 1 for tp, part in batches.items()}
                created = created_settlements(records)
                for passed in created.poison:
                    log_poison(log, passed)
                    poison_count.labels(reason=passed.reason).inc()
                batches_out.start(
                    dispatch_created(dispatcher, created.settlement_ids), next_offsets
                )
            if await batches_out.settle():
                commits.dispatched()
            if commits.due() and (offsets := batches_out.committable(consumer.assignment())):
                # Nothing to commit when every released offset is a revoked partition's (Kafka
                # refuses an empty commit, and that refusal would stop the relay).
                await consumer.commit(offsets)

    await run_reconnecting("dispatch triggers", session, is_retriable)

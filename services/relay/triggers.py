"""Pass 1's trigger: settlement `created` events on Kafka start the dispatch of their settlements.

Events are read in polled batches, the `created` ones chunked and dispatched side by side, and
the offsets committed once every chunk's claims are durable, at most once a second: an event
read again after a restart or a rebalance claims nothing that was claimed already, so a
commit per batch would buy nothing but a Kafka round trip. A chunk that failed with a
retriable error (PostgreSQL away or busy, a rail lookup failing) is only logged: its claims
wait for pass 2, so nothing is lost by moving on. Any other error (a settlement changed under
its row lock, data the database refuses) is a bug or a manual edit: it stops the relay rather
than being skipped, and the uncommitted offsets bring the events back after the restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from typing import Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from services.shared import avro
from services.shared.errors import SchemaError
from services.shared.kafka import run_reconnecting, started
from services.shared.store_errors import is_retriable

log = logging.getLogger(__name__)
CONSUMER_GROUP = "settle-relay"
DISPATCH_CHUNK = 100  # settlements claimed, sent and recorded together
POLL_MS = 500
POLL_RECORDS = 500
COMMIT_SECONDS = 1.0


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


def created_settlements(records: Iterable[ConsumerRecord]) -> list[str]:
    """The settlement ids of the `created` events among `records`; undecodable ones skipped."""
    created = []
    for record in records:
        try:
            event = avro.decode(record.value or b"", "SettlementEvent")
        except SchemaError as e:
            log.warning("undecodable settlement event skipped: %s", e)
            continue
        if event["type"] == "created":
            created.append(str(event["settlement_id"]))
    return created


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


async def trigger_dispatch(
    consumer_of: Callable[[], AIOKafkaConsumer], dispatcher: DispatchesMany
) -> None:
    """Pass 1 on every `created` event until cancelled; offsets move once each claim is
    durable, and the consumer is made afresh whenever Kafka fails it."""

    async def session(clients: AsyncExitStack) -> None:
        consumer = await started(clients, consumer_of())
        commits = OffsetCommits(COMMIT_SECONDS)
        while True:
            batches = await consumer.getmany(timeout_ms=POLL_MS, max_records=POLL_RECORDS)
            records = [record for part in batches.values() for record in part]
            await dispatch_created(dispatcher, created_settlements(records))
            if batches:
                commits.dispatched()
            if commits.due():
                await consumer.commit()

    await run_reconnecting("dispatch triggers", session)

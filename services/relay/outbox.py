"""The outbox publisher: unpublished rows to Kafka, at least once, in order per settlement.

A batch is claimed with `FOR UPDATE SKIP LOCKED`, so replicas share the table without
waiting on each other. Order per settlement holds across replicas because a row is claimable
only when every earlier event of its settlement is published: a replica never holds event
n+1 while event n is unpublished, and one producer keeps a partition's sends in order.
The claiming statement also deletes the rows, but its transaction commits only after Kafka
acknowledged every row (`acks=all`); a crash or a Kafka failure before that rolls the delete
back, and the rows go out again under the same `event_id`. A row is written twice in all
(inserted, deleted); every row in the table is waiting to be published. Rows leave as whole
record batches per partition (the partition computed as Kafka's default partitioner would),
which is what lets one Python process publish tens of thousands of rows a second.

A wake-up (a notification of new rows, or the poll) costs one claim when its batch comes back
short, and a replica that another keeps beating to the rows answers notifications in groups
(`standby_seconds`), so a few rows a commit are not paid for with empty claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import NamedTuple

import asyncpg
from aiokafka import AIOKafkaProducer
from aiokafka.producer.message_accumulator import BatchBuilder

from services.adapters.kafka.clients import run_reconnecting, started
from services.adapters.postgres.store_errors import is_retriable
from services.contracts.partitions import partition_for
from services.domain.trace_context import carried
from services.platform.failpoints import failpoint
from services.platform.tracing import headers_of
from services.relay.metrics import RelayMetrics

log = logging.getLogger(__name__)
CHANNEL = "settle_outbox"
PUBLISH_BATCH_BYTES = 512 * 1024  # a claimed batch leaves in a few record batches

# Claimed and deleted in one statement; the delete is part of the transaction, which commits
# only after Kafka acknowledged every row, so a failed send leaves the rows in place. The rows
# are deleted by their physical address (a TID scan), never by a join that would read the
# whole table, dead rows and all, on every claim. Each row goes out with its settlement's
# trace context, read from the settlement (its primary key) rather than copied into every
# outbox row by every writer. A row an older relay marked published (`published_at`, during
# an upgrade) is neither claimed nor waited for.
CLAIM = """
WITH claimed AS (
    SELECT o.ctid AS claimed_row FROM outbox o
     WHERE o.published_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM outbox e
                        WHERE e.settlement_id = o.settlement_id AND e.sequence < o.sequence
                          AND e.published_at IS NULL)
     ORDER BY o.id
     LIMIT $1
       FOR UPDATE OF o SKIP LOCKED
), published AS (
    DELETE FROM outbox WHERE ctid = ANY (ARRAY(SELECT claimed_row FROM claimed))
    RETURNING id, event_id, settlement_id, sequence, topic, message_key, payload
)
SELECT p.id, p.event_id, p.settlement_id, p.sequence, p.topic, p.message_key, p.payload,
       s.traceparent, s.tracestate,
       EXISTS (SELECT 1 FROM outbox f
                WHERE f.settlement_id = p.settlement_id AND f.sequence > p.sequence
                  AND f.published_at IS NULL) AS followed
  FROM published p LEFT JOIN settlements s ON s.id = p.settlement_id
"""
# The outbox is empty most of the time, and so it often is when autovacuum analyzes it; a claim
# planned for an empty table scans it whole, for every row, once a backlog forms (a loop that
# only deepens the backlog). Its indexes are the right plan at any size: the claim is planned
# with them.
BY_INDEX = "SET LOCAL enable_seqscan = off"
LAG = """
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
  FROM outbox WHERE published_at IS NULL
"""
PRUNE = """
DELETE FROM outbox WHERE id IN (
    SELECT id FROM outbox
     WHERE published_at < now() - make_interval(secs => $1) ORDER BY id LIMIT $2)
"""


class Claimed(NamedTuple):
    """What one claimed batch came to."""

    published: int  # rows published
    more: bool  # rows may be claimable now that no notification will announce


class OutboxPublisher:
    """Drains the outbox to Kafka; `run` until cancelled."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        producer: AIOKafkaProducer,
        metrics: RelayMetrics,
        topic_prefix: str = "",
        batch_size: int = 2000,
        poll_seconds: float = 1.0,
        ack_seconds: float = 5.0,
        lanes: int = 2,
        standby_seconds: float = 0.02,
    ) -> None:
        self.pool = pool
        self.producer = producer
        self.metrics = metrics
        self.topic_prefix = topic_prefix
        self.batch_size = batch_size
        self.poll_seconds = poll_seconds
        # Kafka away: give the batch up (rolled back, sent again later under the same
        # event_ids) well before PostgreSQL ends the waiting transaction itself.
        self.ack_seconds = ack_seconds
        # Batches in flight at once: while one waits for Kafka's acknowledgements or its
        # commit, the next is claimed. Order per settlement still holds (see the docstring).
        self.lanes = lanes
        # Every replica hears every notification and one takes the rows. A replica whose
        # notified wake-up found nothing (another took them) answers the next notifications
        # this much later, together, instead of racing the other for each; once it finds rows
        # again it answers at once. Rows wait this long at most, and only when a replica that
        # was taking them stops.
        self.standby_seconds = standby_seconds
        self._wake = asyncio.Event()
        self._partition_counts: dict[str, int] = {}
        self.rounds = 0  # rounds of `run` that drained and began waiting for a wake-up

    async def publish_batch(self) -> int:
        """Publish one claimed batch; the number of rows published."""
        return (await self._publish_claimed()).published

    async def _publish_claimed(self) -> Claimed:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(BY_INDEX)
            rows = await conn.fetch(CLAIM, self.batch_size)
            if not rows:
                return Claimed(0, more=False)
            acks = await self._send(rows)
            # Every row acknowledged before any delete commits.
            await asyncio.wait_for(asyncio.gather(*acks), self.ack_seconds)
            failpoint("outbox.after_send")  # on Kafka, not committed: sent again, same event_id
        self.metrics.published.inc(len(rows))
        self.metrics.publish_batch.observe(len(rows))
        # A short batch took every row claimable when it was claimed, but a settlement's next
        # event could not be claimable before this one was published, and no notification
        # tells of that: only then is another claim owed now.
        more = len(rows) == self.batch_size or any(row["followed"] for row in rows)
        return Claimed(len(rows), more)

    async def _send(self, rows: list[asyncpg.Record]) -> list[asyncio.Future[object]]:
        # Rows go out as whole record batches, one stream per partition in claim order, which
        # keeps a settlement's events in sequence and spares a future per message.
        open_batches: dict[tuple[str, int], BatchBuilder] = {}
        acks: list[asyncio.Future[object]] = []
        for row in rows:
            topic = f"{self.topic_prefix}{row['topic']}"
            count = self._partition_counts.get(topic) or await self._partition_count(topic)
            where = (topic, partition_for(row["message_key"], count))
            headers = [
                ("event_id", str(row["event_id"]).encode()),
                ("settlement_id", str(row["settlement_id"]).encode()),
                ("sequence", str(row["sequence"]).encode()),
            ]
            trace = carried(row["traceparent"], row["tracestate"])
            if trace is not None:
                headers += headers_of(trace)
            batch = open_batches.get(where)
            if batch is None:
                batch = open_batches[where] = self.producer.create_batch()
            if (
                batch.append(
                    key=row["message_key"], value=row["payload"], timestamp=None, headers=headers
                )
                is None
            ):
                acks.append(await self._send_closed(batch, *where))
                batch = open_batches[where] = self.producer.create_batch()
                if (
                    batch.append(
                        key=row["message_key"],
                        value=row["payload"],
                        timestamp=None,
                        headers=headers,
                    )
                    is None
                ):
                    raise ValueError(f"outbox row {row['id']} exceeds the producer's batch size")
        for (topic, partition), batch in open_batches.items():
            acks.append(await self._send_closed(batch, topic, partition))
        return acks

    async def _send_closed(
        self, batch: BatchBuilder, topic: str, partition: int
    ) -> asyncio.Future[object]:
        # A batch handed over complete is closed: an open one would wait out the producer's
        # linger for messages that never come, with the claiming transaction open meanwhile.
        batch.close()
        ack: asyncio.Future[object] = await self.producer.send_batch(
            batch, topic, partition=partition
        )
        return ack

    async def _partition_count(self, topic: str) -> int:
        partitions = await self.producer.partitions_for(topic)
        self._partition_counts[topic] = len(partitions)
        return len(partitions)

    async def drain(self) -> int:
        """Publish until nothing is claimable; the rows published. A wake-up for a few rows
        costs one claim; a backlog is drained `lanes` batches at a time."""
        first = await self._publish_claimed()
        if not first.more:
            return first.published
        lanes = await asyncio.gather(*(self._drain_lane() for _ in range(self.lanes)))
        return first.published + sum(lanes)

    async def _drain_lane(self) -> int:
        total, more = 0, True
        while more:
            claimed = await self._publish_claimed()
            total, more = total + claimed.published, claimed.more
        return total

    async def run(self) -> None:
        """Publish whenever PostgreSQL notifies new rows, and at least every poll interval."""
        listener = await self.pool.acquire()
        lag_read, notified = float("-inf"), False
        try:
            await listener.add_listener(CHANNEL, self._notified)
            while True:
                self._wake.clear()
                standby = not await self.drain() and notified
                # The lag gauge is read once a poll interval, not on every wake-up.
                if time.monotonic() - lag_read >= self.poll_seconds:
                    async with self.pool.acquire() as conn:
                        self.metrics.outbox_lag.set(await conn.fetchval(LAG))
                    lag_read = time.monotonic()
                self.rounds += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_seconds)
                notified = self._wake.is_set()
                if standby and notified:
                    await asyncio.sleep(self.standby_seconds)
        finally:
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await listener.remove_listener(CHANNEL, self._notified)
            await self.pool.release(listener)

    def _notified(self, *_: object) -> None:
        self._wake.set()


async def publish_forever(
    producer_of: Callable[[], AIOKafkaProducer],
    publisher_of: Callable[[AIOKafkaProducer], OutboxPublisher],
) -> None:
    """Run the outbox publisher until cancelled, on a fresh producer whenever Kafka or
    PostgreSQL interrupted it; nothing Kafka did not acknowledge was marked published."""

    async def session(clients: AsyncExitStack) -> None:
        producer = await started(clients, producer_of())
        await publisher_of(producer).run()

    await run_reconnecting("outbox publishing", session, is_retriable)


async def prune_published(
    pool: asyncpg.Pool, metrics: RelayMetrics, retention_seconds: float, batch: int = 1_000
) -> int:
    """Delete rows marked published longer ago than the retention, `batch` at a time: the
    rows an older relay marked instead of deleting, while the two ran side by side."""
    deleted = 0
    while True:
        async with pool.acquire() as conn:
            status = await conn.execute(PRUNE, retention_seconds, batch)
        count = int(status.split()[-1])
        deleted += count
        metrics.pruned.inc(count)
        if count < batch:
            return deleted
        await asyncio.sleep(0)  # let publishing interleave with a long prune

"""The outbox publisher: unpublished rows to Kafka, at least once, in order per settlement.

A batch is claimed with `FOR UPDATE SKIP LOCKED`, so replicas share the table without
waiting on each other. Order per settlement holds across replicas because a row is claimable
only when every earlier event of its settlement is published: a replica never holds event
n+1 while event n is unpublished, and one producer keeps a partition's sends in order.
Rows are marked published in the claiming transaction after Kafka acknowledged them
(`acks=all`); a crash in between publishes them again under the same `event_id`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg
from aiokafka import AIOKafkaProducer

from services.relay.metrics import RelayMetrics
from services.shared.failpoints import failpoint

log = logging.getLogger(__name__)
CHANNEL = "settle_outbox"

CLAIM = """
SELECT o.id, o.event_id, o.settlement_id, o.sequence, o.topic, o.message_key, o.payload
  FROM outbox o
 WHERE o.published_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM outbox e
                    WHERE e.settlement_id = o.settlement_id AND e.sequence < o.sequence
                      AND e.published_at IS NULL)
 ORDER BY o.id
 LIMIT $1
   FOR UPDATE OF o SKIP LOCKED
"""
MARK_PUBLISHED = "UPDATE outbox SET published_at = now() WHERE id = ANY($1::bigint[])"
LAG = """
SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
  FROM outbox WHERE published_at IS NULL
"""
PRUNE = """
DELETE FROM outbox WHERE id IN (
    SELECT id FROM outbox
     WHERE published_at < now() - make_interval(secs => $1) ORDER BY id LIMIT $2)
"""


class OutboxPublisher:
    """Drains the outbox to Kafka; `run` until cancelled."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        producer: AIOKafkaProducer,
        metrics: RelayMetrics,
        topic_prefix: str = "",
        batch_size: int = 500,
        poll_seconds: float = 1.0,
        ack_seconds: float = 5.0,
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
        self._wake = asyncio.Event()

    async def publish_batch(self) -> int:
        """Publish one claimed batch; the number of rows published."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(CLAIM, self.batch_size)
            if not rows:
                return 0
            sends = [
                await self.producer.send(
                    f"{self.topic_prefix}{row['topic']}",
                    row["payload"],
                    key=row["message_key"],
                    headers=[
                        ("event_id", str(row["event_id"]).encode()),
                        ("settlement_id", str(row["settlement_id"]).encode()),
                        ("sequence", str(row["sequence"]).encode()),
                    ],
                )
                for row in rows
            ]
            # Every row acknowledged before any is marked.
            await asyncio.wait_for(asyncio.gather(*sends), self.ack_seconds)
            failpoint("outbox.after_send")  # on Kafka, not marked: sent again, same event_id
            await conn.execute(MARK_PUBLISHED, [row["id"] for row in rows])
        self.metrics.published.inc(len(rows))
        self.metrics.publish_batch.observe(len(rows))
        return len(rows)

    async def drain(self) -> int:
        """Publish until nothing is claimable; the number of rows published."""
        total = 0
        while published := await self.publish_batch():
            total += published
        return total

    async def run(self) -> None:
        """Publish whenever PostgreSQL notifies new rows, and at least every poll interval."""
        listener = await self.pool.acquire()
        try:
            await listener.add_listener(CHANNEL, self._notified)
            while True:
                self._wake.clear()
                await self.drain()
                async with self.pool.acquire() as conn:
                    self.metrics.outbox_lag.set(await conn.fetchval(LAG))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_seconds)
        finally:
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await listener.remove_listener(CHANNEL, self._notified)
            await self.pool.release(listener)

    def _notified(self, *_: object) -> None:
        self._wake.set()


async def prune_published(
    pool: asyncpg.Pool, metrics: RelayMetrics, retention_seconds: float, batch: int = 1_000
) -> int:
    """Delete rows published longer ago than the retention, `batch` at a time."""
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

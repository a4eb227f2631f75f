"""Writers and a busy outbox publisher on the real PostgreSQL and Kafka: the outbox trigger
notifies only while no publisher has promised to look again soon, and a publisher whose
wake-ups keep finding rows promises, looks on its own clock, and publishes every row."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer
from services.adapters.kafka.topics import ensure_topics
from services.relay.metrics import create_metrics
from services.relay.outbox import CHANNEL, OutboxPublisher
from services.relay.outbox_wake import PROMISE
from tests.conftest import asyncpg_dsn, unique
from tests.integration.test_relay_outbox import fill_outbox, published

pytestmark = pytest.mark.integration


@pytest.fixture
async def notifications(database_url: str) -> AsyncIterator[asyncio.Queue[str]]:
    """The `settle_outbox` notifications of the test database, as they arrive."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    await conn.add_listener(CHANNEL, lambda *args: queue.put_nowait(str(args[2])))
    try:
        yield queue
    finally:
        await conn.close()


async def heard(queue: asyncio.Queue[str], within: float) -> bool:
    try:
        await asyncio.wait_for(queue.get(), within)
    except TimeoutError:
        return False
    return True


async def test_writers_notify_only_while_no_publisher_has_promised_to_look(
    pool: asyncpg.Pool, notifications: asyncio.Queue[str]
) -> None:
    try:
        await fill_outbox(pool, settlements=1, events_each=1)
        assert await heard(notifications, 5)
        await pool.execute(PROMISE, 30.0)  # a publisher will look within 30 s
        await fill_outbox(pool, settlements=2, events_each=1)
        assert not await heard(notifications, 0.5)
        await pool.execute("UPDATE outbox_publishing SET busy_until = now() - interval '1 s'")
        await fill_outbox(pool, settlements=1, events_each=1)
        assert await heard(notifications, 5)
    finally:
        await pool.execute("DELETE FROM outbox_publishing")


async def test_a_busy_publisher_promises_and_still_publishes_every_row(
    pool: asyncpg.Pool, kafka_bootstrap: str, notifications: asyncio.Queue[str]
) -> None:
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "relay-busy")
    await producer.start()
    publisher = OutboxPublisher(
        pool, producer, create_metrics(), topic_prefix=prefix, poll_seconds=30
    )
    task = asyncio.create_task(publisher.run())
    written: set[str] = set()
    try:
        for _ in range(40):  # 30 rows every 20 ms: about 1,500 a second
            written |= await fill_outbox(pool, settlements=30, events_each=1)
            await asyncio.sleep(0.02)
        stamped = await pool.fetchval("SELECT busy_until FROM outbox_publishing")
        assert stamped is not None  # it promised while the rows kept coming
        await published(pool, written, within=10)  # none waited for the 30 s poll
        while not notifications.empty():
            notifications.get_nowait()
        await asyncio.sleep(0.2)  # the promise has run out, and as long again
        assert publisher.wakeups.timeout() == 30
        last = await fill_outbox(pool, settlements=1, events_each=1)
        assert await heard(notifications, 5)  # writers notify again, and it is woken
        await published(pool, last, within=5)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await producer.stop()
        await pool.execute("DELETE FROM outbox_publishing")

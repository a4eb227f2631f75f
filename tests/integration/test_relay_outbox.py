"""The outbox publisher on the real PostgreSQL and Kafka: every row reaches Kafka, in order
per settlement, with two publishers racing; NOTIFY wakes it in milliseconds; pruning."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import header, idempotent_producer, manual_commit_consumer
from services.adapters.kafka.topics import ensure_topics
from services.contracts.topics import EVENTS
from services.relay.metrics import create_metrics
from services.relay.outbox import BY_INDEX, CHANNEL, CLAIM, OutboxPublisher, prune_published
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.waiting import eventually

pytestmark = pytest.mark.integration


async def fill_outbox(pool: asyncpg.Pool, settlements: int, events_each: int) -> set[str]:
    rows = []
    for _ in range(settlements):
        sid = uuid.uuid4()
        for sequence in range(1, events_each + 1):
            payload = f"{sid}:{sequence}".encode()
            rows.append((uuid.uuid4(), sid, sequence, EVENTS, str(sid).encode(), payload))
    async with pool.acquire() as conn:
        # Interleave sequences across settlements, as concurrent writers would.
        await conn.executemany(
            """INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
               VALUES ($1, $2, $3, $4, $5, $6)""",
            sorted(rows, key=lambda r: (r[2], str(r[1]))),
        )
    return {str(r[0]) for r in rows}


async def read_events(bootstrap: str, topic: str, expected: int) -> list[tuple[str, bytes]]:
    consumer = manual_commit_consumer(KafkaAccess(bootstrap), unique("reader-"), [topic])
    await consumer.start()
    seen: list[tuple[str, bytes]] = []
    try:
        async with asyncio.timeout(60):
            while len({e for e, _ in seen}) < expected:
                for records in (await consumer.getmany(timeout_ms=1_000)).values():
                    for r in records:
                        event_id = header(r.headers, "event_id")
                        assert event_id is not None
                        seen.append((event_id.decode(), r.value))
    finally:
        await consumer.stop()
    return seen


async def test_two_publishers_deliver_every_row_in_order_per_settlement(
    pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    # Rows of other tests share the table; publish them too, under this prefix, harmlessly.
    event_ids = await fill_outbox(pool, settlements=60, events_each=4)
    producers = [idempotent_producer(KafkaAccess(kafka_bootstrap), f"relay-{n}") for n in range(2)]
    for producer in producers:
        await producer.start()
    try:
        publishers = [
            OutboxPublisher(pool, p, create_metrics(), topic_prefix=prefix, batch_size=25)
            for p in producers
        ]
        await asyncio.gather(*(p.drain() for p in publishers))
    finally:
        for producer in producers:
            await producer.stop()
    async with pool.acquire() as conn:
        left = await conn.fetchval(
            "SELECT count(*) FROM outbox WHERE event_id = ANY($1::uuid[]) AND published_at IS NULL",
            list(event_ids),
        )
    assert left == 0
    events = await read_events(kafka_bootstrap, f"{prefix}{EVENTS}", len(event_ids))
    assert event_ids <= {e for e, _ in events}
    first_seen: dict[str, bytes] = {}
    for event_id, payload in events:
        first_seen.setdefault(event_id, payload)
    by_settlement: dict[str, list[int]] = defaultdict(list)
    for event_id, payload in events:
        if event_id in event_ids and first_seen.pop(event_id, None) is not None:
            sid, sequence = payload.decode().rsplit(":", 1)
            by_settlement[sid].append(int(sequence))
    assert len(by_settlement) == 60
    assert all(seqs == [1, 2, 3, 4] for seqs in by_settlement.values())


async def test_notify_wakes_the_publisher_within_milliseconds(
    pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "relay-notify")
    await producer.start()
    metrics = create_metrics()
    publisher = OutboxPublisher(pool, producer, metrics, topic_prefix=prefix, poll_seconds=30)
    task = asyncio.create_task(publisher.run())
    try:
        await eventually(lambda: publisher.rounds, what="listening, past its first drain")
        (event_id,) = await fill_outbox(pool, settlements=1, events_each=1)
        started = time.monotonic()
        await published(pool, {event_id}, within=5)
        assert time.monotonic() - started < 1.0  # far below the 30 s poll interval
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await producer.stop()


@pytest.fixture
async def claims(database_url: str) -> AsyncIterator[tuple[asyncpg.Pool, list[str]]]:
    """A pool that records the claiming statements its connections run."""
    claimed: list[str] = []

    async def record_claims(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(lambda q: claimed.append(q.query) if q.query == CLAIM else None)

    pool = await asyncpg.create_pool(
        asyncpg_dsn(database_url), min_size=1, max_size=4, init=record_claims
    )
    yield pool, claimed
    await pool.close()


async def test_a_wake_up_for_a_few_rows_costs_one_claim_and_takes_the_next_events_too(
    claims: tuple[asyncpg.Pool, list[str]], kafka_bootstrap: str
) -> None:
    pool, claimed = claims
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "relay-claims")
    await producer.start()
    try:
        publisher = OutboxPublisher(pool, producer, create_metrics(), topic_prefix=prefix)
        await publisher.drain()  # rows other tests left
        await fill_outbox(pool, settlements=3, events_each=1)
        claimed.clear()
        assert await publisher.drain() == 3
        assert len(claimed) == 1  # a short batch took all there was: no empty claims after it
        # A settlement's second event is claimable only once its first is published, and no
        # notification says so: the same drain takes it.
        await fill_outbox(pool, settlements=1, events_each=2)
        assert await publisher.drain() == 2
    finally:
        await producer.stop()


async def published(pool: asyncpg.Pool, event_ids: set[str], within: float = 10) -> None:
    """Wait until every one of `event_ids` is published."""
    ids = [uuid.UUID(e) for e in event_ids]
    unpublished = (
        "SELECT count(*) = 0 FROM outbox WHERE event_id = ANY($1::uuid[]) AND published_at IS NULL"
    )
    await eventually(lambda: pool.fetchval(unpublished, ids), within, "published")


async def test_a_replica_that_found_nothing_answers_the_next_notifications_together(
    claims: tuple[asyncpg.Pool, list[str]], kafka_bootstrap: str
) -> None:
    pool, claimed = claims
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "relay-standby")
    await producer.start()
    publisher = OutboxPublisher(
        pool,
        producer,
        create_metrics(),
        topic_prefix=prefix,
        poll_seconds=30,
        standby_seconds=1.5,
    )
    task = asyncio.create_task(publisher.run())
    try:
        await eventually(lambda: publisher.rounds, what="listening, past its first drain")
        # A notification for rows another replica took: this wake-up finds nothing.
        await pool.execute("SELECT pg_notify($1, '')", CHANNEL)
        await eventually(lambda: publisher.rounds >= 2, what="the empty wake-up drained")
        claimed.clear()
        started = time.monotonic()
        rows = set().union(*[await fill_outbox(pool, 1, 1) for _ in range(3)])  # 3 commits
        await published(pool, rows)
        assert time.monotonic() - started >= 1.5
        assert len(claimed) == 1  # three notifications, one claim
        claimed.clear()
        started = time.monotonic()
        await published(pool, await fill_outbox(pool, 1, 1))
        assert time.monotonic() - started < 1.0  # it found rows: it answers at once again
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await producer.stop()


async def test_prune_deletes_only_rows_published_before_the_retention(pool: asyncpg.Pool) -> None:
    old = await fill_outbox(pool, 1, 3)
    recent = await fill_outbox(pool, 1, 3)
    unpublished = await fill_outbox(pool, 1, 3)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE outbox SET published_at = now() - interval '2 hours' WHERE event_id = ANY($1)",
            [uuid.UUID(e) for e in old],
        )
        await conn.execute(
            "UPDATE outbox SET published_at = now() WHERE event_id = ANY($1)",
            [uuid.UUID(e) for e in recent],
        )
    await prune_published(pool, create_metrics(), retention_seconds=3600, batch=2)
    keep = [uuid.UUID(e) for e in recent | unpublished]
    async with pool.acquire() as conn:
        assert (
            await conn.fetchval("SELECT count(*) FROM outbox WHERE event_id = ANY($1)", keep) == 6
        )
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM outbox WHERE published_at < now() - interval '1 hour'"
            )
            == 0
        )


async def test_the_claim_reads_the_indexes_even_when_the_outbox_was_analyzed_empty(
    infra: Servers,
) -> None:
    async with scratch_database(infra.database_url, "settle_claim_plan_") as url:
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            await conn.execute("VACUUM ANALYZE outbox")  # as autovacuum finds it between bursts
            await conn.executemany(  # then a backlog: a third of the settlements have 3 events
                """INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key,
                                       payload) VALUES ($1, $2, $3, 'settlement.events', '', '')""",
                [(uuid.uuid4(), uuid.UUID(int=n // 3), n % 3 + 1) for n in range(3000)],
            )
            explain = "EXPLAIN (FORMAT JSON) " + CLAIM.replace("$1", "2000")
            planned_blind = str(await conn.fetchval(explain))
            async with conn.transaction():
                await conn.execute(BY_INDEX)
                planned = str(await conn.fetchval(explain))
        finally:
            await conn.close()
    assert "Seq Scan" in planned_blind  # what the statistics alone would have it do
    assert "Seq Scan" not in planned and "outbox_sequence_unique" in planned


async def test_the_publisher_claims_with_the_indexes_plan(
    database_url: str, kafka_bootstrap: str
) -> None:
    ran: dict[int, list[str]] = {}  # per connection: lanes claim side by side

    async def record(conn: asyncpg.Connection) -> None:
        mine = ran.setdefault(id(conn), [])
        conn.add_query_logger(lambda q: mine.append(q.query))

    pool = await asyncpg.create_pool(asyncpg_dsn(database_url), min_size=1, max_size=2, init=record)
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "relay-plan")
    await producer.start()
    try:
        await fill_outbox(pool, settlements=6, events_each=1)
        for queries in ran.values():
            queries.clear()
        # One row a claim: the drain goes on in two lanes, each on a connection of its own.
        publisher = OutboxPublisher(pool, producer, create_metrics(), prefix, batch_size=1)
        await publisher.drain()
    finally:
        await producer.stop()
        await pool.close()
    claimed = 0
    for queries in ran.values():
        claims = [n for n, query in enumerate(queries) if query == CLAIM]
        assert all(queries[n - 1] == BY_INDEX for n in claims), queries
        claimed += len(claims)
    assert claimed

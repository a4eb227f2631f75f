"""The `relay` and `dispatch` scenarios.

`relay`: a pre-filled outbox (N rows, one event each for N settlements) drained to Kafka by
one `OutboxPublisher` in batches of 2,000; rows published per second, from the first claim to
the last row marked.

`dispatch`: N accepted settlements, then the dispatcher's pass 1 on all of them in batches as
the relay's trigger consumer forms them, against `settle railsim` (zero latency) over HTTP
through the Stripe adapter; instructions completed (transferred and recorded) per second.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import uvloop

from services.adapters.kafka.access import kafka_access
from services.adapters.kafka.clients import idempotent_producer
from services.adapters.kafka.topics import ensure_topics
from services.adapters.stripe.rail import StripeRail
from services.contracts.topics import EVENTS
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from services.relay.dispatch import Dispatcher
from services.relay.metrics import create_metrics
from services.relay.outbox import PUBLISH_BATCH_BYTES, OutboxPublisher
from services.relay.triggers import DISPATCH_CHUNK
from tools.bench.database import bench_database, book_settlements
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.bench.services import running
from tools.infra.paths import run_paths

CONCURRENT_CHUNKS = 4  # batches in flight, as a relay's trigger consumer runs them
BATCH = 2000


async def _publish(settings: Settings, dsn: str, count: int) -> float:
    prefix = f"bench-{uuid.uuid4().hex[:8]}."
    await ensure_topics(kafka_access(settings), prefix)
    pool = await asyncpg.create_pool(dsn, min_size=2, max_size=4)
    try:
        async with pool.acquire() as conn:
            # Rows left by earlier runs are published first; they are part of the work.
            await conn.execute(
                """INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key,
                                       payload)
                   SELECT gen_random_uuid(), s, 1, $1, convert_to(s::text, 'UTF8'),
                          decode(repeat('c3', 160), 'hex')
                     FROM (SELECT gen_random_uuid() AS s FROM generate_series(1, $2)) g""",
                EVENTS,
                count,
            )
            # A table in service has statistics; a freshly filled one gets them here, as
            # autovacuum would give them soon after.
            await conn.execute("ANALYZE outbox")
            waiting = await conn.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL")
        producer = idempotent_producer(
            kafka_access(settings),
            "bench-relay",
            linger_ms=5,
            max_batch_bytes=PUBLISH_BATCH_BYTES,
        )
        await producer.start()
        try:
            publisher = OutboxPublisher(pool, producer, create_metrics(), prefix, batch_size=BATCH)
            started = time.monotonic()
            published = await publisher.drain()
            elapsed = time.monotonic() - started
        finally:
            await producer.stop()
    finally:
        await pool.close()
    if published < waiting:
        raise BenchError(f"published {published} of {waiting} rows")
    return published / elapsed


def run_relay(settings: Settings, options: BenchOptions) -> BenchResult:
    """Outbox rows published to Kafka per second from a pre-filled outbox."""
    rate = uvloop.run(
        _publish(settings, libpq_dsn(bench_database(settings.database_url)), options.count)
    )
    return BenchResult(
        scenario="relay",
        parameters={"outbox_rows": options.count, "batch": BATCH, "publishers": 1, "lanes": 2},
        figures=[Figure("outbox to Kafka", rate, "rows/s")],
    )


async def _dispatch(settings: Settings, dsn: str, sim_url: str, count: int) -> tuple[float, float]:
    pool = await asyncpg.create_pool(dsn, min_size=2, max_size=16)
    rail = StripeRail("sk_test_bench", api_base=sim_url)
    try:
        tenant, run = f"d{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
        ids = await book_settlements(pool, settings, tenant, run, count)
        dispatcher = Dispatcher(pool, rail, create_metrics(), "bench-dispatch")
        chunks = [ids[i : i + DISPATCH_CHUNK] for i in range(0, len(ids), DISPATCH_CHUNK)]
        gate = asyncio.Semaphore(CONCURRENT_CHUNKS)

        async def chunk_of(sids: list[str]) -> None:
            async with gate:
                await dispatcher.dispatch_many(sids)

        started, cpu_started = time.monotonic(), time.process_time()
        await asyncio.gather(*(chunk_of(chunk) for chunk in chunks))
        # This process is the relay here; the simulator's CPU is its own process's.
        cpu = time.process_time() - cpu_started
        elapsed = time.monotonic() - started
        async with pool.acquire() as conn:
            done = await conn.fetchval(
                "SELECT count(*) FROM rail_instructions WHERE tenant = $1 AND status = "
                "'transferred'",
                tenant,
            )
    finally:
        await rail.aclose()
        await pool.close()
    if done != count:
        raise BenchError(f"only {done} of {count} instructions transferred")
    return count / elapsed, cpu * 1000 / count


def run_dispatch(settings: Settings, options: BenchOptions) -> BenchResult:
    """Rail instructions claimed, sent to the simulator and recorded per second."""
    url = bench_database(settings.database_url)
    log = run_paths().run / "bench" / "railsim-dispatch.log"
    with running(["railsim"], {}, log) as sim:
        rate, cpu_ms = uvloop.run(_dispatch(settings, libpq_dsn(url), sim.url, options.count))
    return BenchResult(
        scenario="dispatch",
        parameters={
            "instructions": options.count,
            "batch": DISPATCH_CHUNK,
            "batches_in_flight": CONCURRENT_CHUNKS,
            "rail": "railsim over HTTP, zero latency",
        },
        figures=[
            Figure("instructions completed", rate, "instructions/s"),
            Figure("relay CPU per instruction", cpu_ms, "ms/instruction"),
        ],
    )

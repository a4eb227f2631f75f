"""A Kafka broker killed and restarted while the relay publishes: no event is lost, and each
settlement's events are still in order once duplicates are dropped by `event_id`.

The broker here is a private one (its own data dir and ports, the shared jar cache), so the
test can kill it without disturbing anything else that uses the usual broker."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest
from aiokafka import TopicPartition

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import log_reader
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.topics import EVENTS
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from tests.conftest import asyncpg_dsn, unique
from tests.e2e.relay_process import process
from tests.integration.test_ledger_books import WINDOWS, request
from tests.waiting import eventually
from tools.infra import kafka
from tools.infra.paths import RunPaths, run_paths
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e

# The audit steps that publish an event: all but a move to dispatching.
PUBLISHING = "NOT (to_status = 'dispatching' AND from_status IS DISTINCT FROM 'dispatching')"
BATCHES, PER_BATCH = 30, 100


async def at_least(count: Callable[[], Awaitable[int]], wanted: int) -> bool:
    """Whether `count()` has reached `wanted`."""
    return await count() >= wanted


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[RunPaths]:
    usual = run_paths()
    paths = RunPaths(
        root=usual.root,
        run=tmp_path / "run",
        jars=usual.kafka_lib,
        kafka_bootstrap=f"127.0.0.1:{free_ports(2)}",
    )
    paths.run.mkdir()
    kafka.start(paths)
    try:
        yield paths
    finally:
        kafka.stop(paths)


async def read_events(bootstrap: str, topic: str) -> list[dict[str, object]]:
    consumer = log_reader(KafkaAccess(bootstrap), "test-reader")
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(6)]  # as ensure_topics makes it
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        events: list[dict[str, object]] = []
        async with asyncio.timeout(60):
            while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    events += [avro.decode(r.value or b"", "SettlementEvent") for r in records]
        return events
    finally:
        await consumer.stop()


async def test_broker_restart_while_publishing_loses_no_event(
    database: str,
    private_broker: RunPaths,
    tmp_path: Path,
) -> None:
    bootstrap = private_broker.kafka_bootstrap
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(bootstrap), prefix)
    nowhere = f"http://127.0.0.1:{free_ports()}"  # no rail: this test is about publishing
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": database,
        "SETTLE_KAFKA_BOOTSTRAP": bootstrap,
        "SETTLE_TOPIC_PREFIX": prefix,
        "STRIPE_API_BASE": nowhere,
    }
    pool = await asyncpg.create_pool(asyncpg_dsn(database), min_size=1, max_size=4)
    ledger = Ledger(pool, Books(WINDOWS))

    async def book() -> None:
        for _ in range(BATCHES):
            await ledger.accept_many([request(unique("t")) for _ in range(PER_BATCH)])
            await asyncio.sleep(0.2)

    async def published() -> int:
        # Publishing deletes a row: the events written and no longer waiting are published.
        assert relay.poll() is None, "the relay died"
        return int(
            await pool.fetchval(
                f"SELECT (SELECT count(*) FROM settlement_transitions WHERE {PUBLISHING})"
                " - (SELECT count(*) FROM outbox)"
            )
        )

    try:
        relay_args = ["relay", "--metrics-port", str(free_ports())]
        with process(relay_args, env, tmp_path / "relay.log") as relay:
            booking = asyncio.create_task(book())
            quarter = BATCHES * PER_BATCH // 4
            await eventually(lambda: at_least(published, quarter), 60, "a quarter published", 0.05)
            pid = kafka.broker_pid(private_broker)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # a crash, not a clean shutdown
            at_kill = await published()
            await asyncio.sleep(3)
            await asyncio.to_thread(kafka.start, private_broker)
            await booking
            total = int(
                await pool.fetchval(
                    f"SELECT count(*) FROM settlement_transitions WHERE {PUBLISHING}"
                )
            )
            await eventually(lambda: at_least(published, total), 120, "every row published", 0.2)
        # The dispatcher kept adding steps (no rail runs here); each one's event must be there.
        rows = await pool.fetch(
            f"SELECT settlement_id, sequence FROM settlement_transitions WHERE {PUBLISHING}"
        )
    finally:
        await pool.close()
    assert at_kill < total  # the broker went away with work still to publish
    events = await read_events(bootstrap, f"{prefix}{EVENTS}")
    first_seen: dict[str, dict[str, object]] = {}
    for event in events:
        first_seen.setdefault(str(event["event_id"]), event)
    assert len(rows) >= total
    on_kafka = {(str(e["settlement_id"]), e["sequence"]) for e in first_seen.values()}
    assert {(str(r["settlement_id"]), r["sequence"]) for r in rows} <= on_kafka
    sequences: dict[str, list[int]] = defaultdict(list)
    for event in first_seen.values():
        sequences[str(event["settlement_id"])].append(int(str(event["sequence"])))
    assert all(seq == sorted(seq) for seq in sequences.values())

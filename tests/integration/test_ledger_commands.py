"""Kafka intake on the real broker and PostgreSQL: commands booked once, bad ones
dead-lettered with their reason and original bytes, offsets committed after the commit."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import pytest
from aiokafka import TopicPartition

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer, manual_commit_consumer
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.topics import COMMANDS, COMMANDS_DLQ
from services.domain.tenant_limits import Rate, TenantLimits, TenantPolicy
from services.ledger.acceptor import Ledger
from services.ledger.admission import Admission
from services.ledger.booking import Books
from services.ledger.command_auth import CommandAuthority
from services.ledger.commands import CommandIntake
from services.ledger.metrics import create_metrics
from tests.conftest import unique
from tests.integration.test_ledger_books import WINDOWS
from tests.waiting import eventually

pytestmark = pytest.mark.integration


def command(tenant: str, key: str, reference: str, amount: int = 700) -> dict[str, object]:
    return {
        "tenant": tenant,
        "idempotency_key": key,
        "reference": reference,
        "payee": "p-1",
        "destination": "acct_9",
        "amount": amount,
        "currency": "GBP",
        "rail": None,
        "metadata": {"batch": "b-1"},
    }


async def publish(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = idempotent_producer(KafkaAccess(bootstrap), "test-upstream")
    await producer.start()
    try:
        for n, value in enumerate(values):
            await producer.send_and_wait(topic, value, key=str(n % 3).encode())
    finally:
        await producer.stop()


async def drain(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes, dict[str, bytes]]]:
    consumer = manual_commit_consumer(KafkaAccess(bootstrap), unique("reader-"), [topic])
    await consumer.start()
    got: list[tuple[bytes, dict[str, bytes]]] = []
    try:
        async with asyncio.timeout(30):
            while len(got) < expected:
                for records in (await consumer.getmany(timeout_ms=1_000)).values():
                    got += [(r.value, dict(r.headers)) for r in records]
    finally:
        await consumer.stop()
    return got


async def test_commands_are_booked_once_and_bad_ones_dead_lettered(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    commands_topic, dlq_topic = f"{topic_prefix}{COMMANDS}", f"{topic_prefix}{COMMANDS_DLQ}"
    tenant = unique("t")
    good = [command(tenant, f"k{n}", f"r{n}", amount=100 + n) for n in range(20)]
    garbage = b"\x00not avro at all"
    negative = avro.encode("SettlementCommand", command(tenant, "k-neg", "r-neg", amount=-5))
    reused = avro.encode("SettlementCommand", command(tenant, "k0", "r-other", amount=999))
    values = [avro.encode("SettlementCommand", c) for c in good]
    # Every good command twice (a redelivering upstream), plus three that cannot be booked.
    await publish(kafka_bootstrap, commands_topic, [*values, garbage, *values, negative, reused])

    group = unique("ledger-")
    ledger = Ledger(pool, Books(WINDOWS))
    consumer = manual_commit_consumer(KafkaAccess(kafka_bootstrap), group, [commands_topic])
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "test-dlq")
    await consumer.start()
    await producer.start()
    authority = CommandAuthority(frozenset({tenant}))
    metrics = create_metrics(tenants=[tenant])
    intake = CommandIntake(
        consumer, producer, ledger, dlq_topic, authority, max_records=7, metrics=metrics
    )
    task = asyncio.create_task(intake.run())
    try:
        dead = await drain(kafka_bootstrap, dlq_topic, 3)

        async def all_committed() -> dict[TopicPartition, int] | None:
            ends = await consumer.end_offsets(list(consumer.assignment()))
            committed = {tp: await consumer.committed(tp) or 0 for tp in ends}
            return ends if committed == ends else None

        end = await eventually(all_committed, 30, "every offset committed")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.stop()
        await producer.stop()
        await ledger.stop()

    reasons = {h["reason"]: value for value, h in dead}
    assert reasons == {
        b"undecodable": garbage,
        b"invalid_amount": negative,
        b"idempotency_key_reused": reused,
    }
    assert all(h["source_topic"] == commands_topic.encode() for _, h in dead)
    async with pool.acquire() as db:
        rows = await db.fetch("SELECT reference, amount FROM settlements WHERE tenant = $1", tenant)
    assert sorted((r["reference"], r["amount"]) for r in rows) == sorted(
        (f"r{n}", 100 + n) for n in range(20)
    )
    assert sum(end.values()) == 43 and TopicPartition(commands_topic, 0) in end
    sample = intake.metrics.registry.get_sample_value
    assert sample("settle_ledger_kafka_dedupe_hits_total") == 20
    assert sample("settle_ledger_requests_total", {"outcome": "created", "tenant": tenant}) == 20
    # The negative amount under its tenant; the undecodable record names none.
    assert sample("settle_ledger_requests_total", {"outcome": "invalid", "tenant": tenant}) == 1
    assert sample("settle_ledger_requests_total", {"outcome": "invalid", "tenant": "unknown"}) == 1
    assert sample("settle_ledger_fingerprint_mismatches_total", {"tenant": tenant}) == 1
    # Read from the consumer after each poll: all 43 fetched, none left behind.
    assert sample("settle_consumer_lag", {"service": "ledger", "topic": commands_topic}) == 0
    for reason in ("undecodable", "invalid_amount", "idempotency_key_reused"):
        assert sample("settle_ledger_dlq_total", {"reason": reason}) == 1


async def test_commands_over_limits_are_dead_lettered_and_a_full_backlog_stops_fetching(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    commands_topic, dlq_topic = f"{topic_prefix}{COMMANDS}", f"{topic_prefix}{COMMANDS_DLQ}"
    tenant = unique("t")
    limits = TenantLimits(
        {
            tenant: TenantPolicy(
                max_amount={"GBP": 1_000},
                destinations=frozenset({"acct_9"}),
                prefunded={"GBP": 1_500},
                rate=Rate(0.001, 1),
            )
        }
    )
    over = command(tenant, "k-over", "r-over", amount=1_001)
    elsewhere = {**command(tenant, "k-else", "r-else"), "destination": "acct_other"}
    unrailed = {**command(tenant, "k-rail", "r-rail"), "rail": "stripe"}  # not driven here
    # Each within the caps, more than the rate would let through HTTP (Kafka is not rate
    # limited), and together over the deposit: two of the three are booked, whichever come first.
    funded = [command(tenant, f"k{n}", f"r{n}", amount=700) for n in range(3)]
    values = [avro.encode("SettlementCommand", c) for c in (over, elsewhere, unrailed, *funded)]

    admission = Admission(limits, backlog=10)
    ledger = Ledger(pool, Books(WINDOWS, limits=limits), max_batch=1)
    consumer = manual_commit_consumer(
        KafkaAccess(kafka_bootstrap), unique("ledger-"), [commands_topic]
    )
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "test-dlq")
    await consumer.start()
    await producer.start()
    authority = CommandAuthority(frozenset({tenant}))
    intake = CommandIntake(
        consumer, producer, ledger, dlq_topic, authority, max_records=1, admission=admission
    )
    task = asyncio.create_task(intake.run())
    try:
        # HTTP requests fill the backlog: the intake fetches nothing meanwhile.
        with admission.backlog.carry(10):
            await publish(kafka_bootstrap, commands_topic, values)
            await asyncio.sleep(2)  # the time the intake is held back: nothing may be booked
            async with pool.acquire() as db:
                assert (
                    await db.fetchval("SELECT count(*) FROM settlements WHERE tenant = $1", tenant)
                    == 0
                )
            assert (
                intake.metrics.registry.get_sample_value(
                    "settle_ledger_dlq_total", {"reason": "amount_over_limit"}
                )
                is None
            )
        dead = await drain(kafka_bootstrap, dlq_topic, 4)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.stop()
        await producer.stop()
        await ledger.stop()

    reasons = {h["reason"]: value for value, h in dead}
    poor = reasons.pop(b"insufficient_funds")
    assert reasons == {
        b"amount_over_limit": values[0],
        b"destination_not_allowed": values[1],
        b"rail_unavailable": values[2],
    }
    async with pool.acquire() as db:
        rows = await db.fetch("SELECT reference FROM settlements WHERE tenant = $1", tenant)
    booked = {r["reference"] for r in rows}
    assert len(booked) == 2 and poor in values[3:]
    assert booked == {f"r{n}" for n in range(3)} - {f"r{values.index(poor) - 3}"}

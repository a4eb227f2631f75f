"""Kafka commands on the real broker and PostgreSQL: booked only for a configured tenant with
its tenant's signature; a command at the message limit is still dead-lettered, as a stub."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import replace

import asyncpg
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer, manual_commit_consumer
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.command_signature import SIGNATURE_HEADER, signature_header, verify
from services.contracts.topics import COMMANDS, COMMANDS_DLQ
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.command_auth import CommandAuthority
from services.ledger.commands import CommandIntake
from services.ledger.dead_letters import record_size
from services.platform.settings import load_settings
from tests.conftest import unique
from tests.integration.test_ledger_books import WINDOWS
from tests.integration.test_ledger_commands import command, drain
from tests.waiting import eventually
from tools.run.submit import Batch, publish_commands, signing_secrets

pytestmark = pytest.mark.integration
LIMIT = 1_048_576  # the producers' max_request_size
Record = tuple[bytes, bytes, list[tuple[str, bytes]]]  # key, value, headers


def signed(value: bytes, secret: str, at: int | None = None) -> list[tuple[str, bytes]]:
    return [(SIGNATURE_HEADER, signature_header([secret], value, at or int(time.time())))]


async def publish(bootstrap: str, topic: str, records: list[Record]) -> None:
    producer = idempotent_producer(KafkaAccess(bootstrap), "test-upstream")
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(topic, value, key=key, headers=headers)
    finally:
        await producer.stop()


async def consume(
    pool: asyncpg.Pool,
    bootstrap: str,
    prefix: str,
    authority: CommandAuthority,
    dead: int,
    clock: Callable[[], float] = time.time,
) -> tuple[list[tuple[bytes, dict[str, bytes]]], CommandIntake]:
    """Run the intake until `dead` dead letters are out and every offset is committed."""
    commands_topic, dlq_topic = f"{prefix}{COMMANDS}", f"{prefix}{COMMANDS_DLQ}"
    ledger = Ledger(pool, Books(WINDOWS))
    consumer = manual_commit_consumer(KafkaAccess(bootstrap), unique("ledger-"), [commands_topic])
    producer = idempotent_producer(KafkaAccess(bootstrap), "test-dlq")
    await consumer.start()
    await producer.start()
    intake = CommandIntake(
        consumer, producer, ledger, dlq_topic, authority, max_records=3, clock=clock
    )
    task = asyncio.create_task(intake.run())
    try:
        letters = await drain(bootstrap, dlq_topic, dead)

        async def all_committed() -> bool:
            assert not task.done(), task  # the intake must not have stopped
            end = await consumer.end_offsets(list(consumer.assignment()))
            return bool(end) and {tp: await consumer.committed(tp) or 0 for tp in end} == end

        await eventually(all_committed, 30, "every offset committed")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.stop()
        await producer.stop()
        await ledger.stop()
    return letters, intake


async def booked(pool: asyncpg.Pool, tenant: str) -> list[str]:
    rows = await pool.fetch("SELECT reference FROM settlements WHERE tenant = $1", tenant)
    return sorted(r["reference"] for r in rows)


async def test_only_a_command_signed_by_its_own_configured_tenant_is_booked(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    acme, globex, stranger = unique("acme-"), unique("globex-"), unique("initech-")
    authority = CommandAuthority(
        frozenset({acme, globex}),
        {acme: ("csk_acme",), globex: ("csk_globex",), stranger: ("csk_stranger",)},
        signing_required=True,
    )

    def value(tenant: str, ref: str) -> bytes:
        return avro.encode("SettlementCommand", command(tenant, f"k-{ref}", ref))

    unsigned, forged, expired = value(acme, "unsigned"), value(acme, "forged"), value(acme, "old")
    unknown, good = value(stranger, "unknown"), value(acme, "good")
    await publish(
        kafka_bootstrap,
        f"{topic_prefix}{COMMANDS}",
        [
            (b"1", unsigned, []),
            (b"2", forged, signed(forged, "csk_globex")),  # another tenant's secret
            (b"3", expired, signed(expired, "csk_acme", int(time.time()) - 3600)),
            (b"1", unknown, signed(unknown, "csk_stranger")),
            (b"2", good, signed(good, "csk_acme")),
        ],
    )

    letters, intake = await consume(pool, kafka_bootstrap, topic_prefix, authority, dead=4)

    assert {h["reason"]: v for v, h in letters} == {
        b"signature_missing": unsigned,
        b"signature_invalid": forged,
        b"signature_expired": expired,
        b"unknown_tenant": unknown,
    }
    assert await booked(pool, acme) == ["good"]
    assert await booked(pool, stranger) == []
    sample = intake.metrics.registry.get_sample_value
    unauthorized = {"outcome": "unauthorized", "tenant": "unknown"}  # no tenant proven
    assert sample("settle_ledger_requests_total", unauthorized) == 4
    assert sample("settle_ledger_dlq_total", {"reason": "unknown_tenant"}) == 1


async def test_optional_signing_books_an_unsigned_command_and_refuses_a_forged_one(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    acme = unique("acme-")
    authority = CommandAuthority(frozenset({acme}), {acme: ("csk_acme",)})
    plain = avro.encode("SettlementCommand", command(acme, "k-plain", "plain"))
    forged = avro.encode("SettlementCommand", command(acme, "k-forged", "forged"))
    await publish(
        kafka_bootstrap,
        f"{topic_prefix}{COMMANDS}",
        [(b"1", plain, []), (b"1", forged, signed(forged, "guessed"))],
    )

    letters, _ = await consume(pool, kafka_bootstrap, topic_prefix, authority, dead=1)

    assert [(h["reason"], v) for v, h in letters] == [(b"signature_invalid", forged)]
    assert await booked(pool, acme) == ["plain"]


def at_the_limit(tenant: str, key: bytes) -> bytes:
    """A command whose record, signature header included, is as large as a producer sends."""
    size = LIMIT - 2048
    while True:
        value = avro.encode("SettlementCommand", command(tenant, "k-huge", "r" * size))
        room = LIMIT - record_size(key, value, signed(value, "csk_acme"))
        if room == 0:
            return value
        size += room if room < 0 or room > 8 else 1


async def test_a_command_at_the_message_limit_is_dead_lettered_as_a_stub_and_intake_goes_on(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    acme = unique("acme-")
    authority = CommandAuthority(frozenset({acme}), {acme: ("csk_acme",)})
    huge = at_the_limit(acme, b"k")
    after = avro.encode("SettlementCommand", command(acme, "k-after", "after"))
    await publish(
        kafka_bootstrap,
        f"{topic_prefix}{COMMANDS}",
        [(b"k", huge, signed(huge, "csk_acme")), (b"k", after, [])],
    )

    letters, _ = await consume(pool, kafka_bootstrap, topic_prefix, authority, dead=1)

    [(value, headers)] = letters
    assert headers["reason"] == b"invalid_field"  # the reference, far over 255 characters
    assert headers["truncated"] == b"true"
    assert headers["original_bytes"] == str(len(huge)).encode()
    assert headers["original_sha256"] == hashlib.sha256(huge).hexdigest().encode()
    assert headers["source_topic"] == f"{topic_prefix}{COMMANDS}".encode()
    assert huge.startswith(value) and len(value) > len(huge) - 4096
    assert await booked(pool, acme) == ["after"]  # the partition moved on past it


async def test_the_demo_batch_signs_its_commands_when_its_tenant_has_a_signing_secret(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}{COMMANDS}"
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    settings = load_settings({"SETTLE_COMMAND_SIGNING_SECRETS": "acme:csk_acme"})
    batch = Batch(unique(), "acme", "tok", 2, signing_secrets(settings, "acme"))
    await publish_commands(batch, range(2), KafkaAccess(kafka_bootstrap), topic)
    await publish_commands(
        replace(batch, signing_secrets=()), range(2, 3), KafkaAccess(kafka_bootstrap), topic
    )

    sent = await drain(kafka_bootstrap, topic, 4)  # the first command goes twice

    now = int(time.time())
    checks = [verify(h.get(SIGNATURE_HEADER), v, ["csk_acme"], now) for v, h in sent]
    assert sorted(map(str, checks)) == ["None", "None", "None", "signature_missing"]


async def test_a_dead_letter_topic_with_a_lower_limit_gets_the_stub_without_the_value(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    # The broker, not the producer, refuses the whole dead letter: the stub must still go.
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        limit = {"max.message.bytes": "2048"}
        dlq = NewTopic(f"{topic_prefix}{COMMANDS_DLQ}", 1, 1, topic_configs=limit)
        await admin.create_topics([dlq])
    finally:
        await admin.close()
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    acme = unique("acme-")
    large = avro.encode("SettlementCommand", command(acme, "k-large", "r" * 8000))
    after = avro.encode("SettlementCommand", command(acme, "k-after", "after"))
    await publish(
        kafka_bootstrap, f"{topic_prefix}{COMMANDS}", [(b"k", large, []), (b"k", after, [])]
    )

    authority = CommandAuthority(frozenset({acme}))
    letters, _ = await consume(pool, kafka_bootstrap, topic_prefix, authority, dead=1)

    [(value, headers)] = letters
    assert value == b"" and headers["truncated"] == b"true"
    assert headers["original_sha256"] == hashlib.sha256(large).hexdigest().encode()
    assert await booked(pool, acme) == ["after"]


async def test_a_signed_command_consumed_long_after_it_was_written_still_books(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    # The ledger was away for an hour: the broker's append time, not the clock at
    # consumption, is what the signature's age is judged against.
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    acme = unique("acme-")
    authority = CommandAuthority(frozenset({acme}), {acme: ("csk_acme",)}, signing_required=True)
    waited = avro.encode("SettlementCommand", command(acme, "k-waited", "waited"))
    await publish(
        kafka_bootstrap, f"{topic_prefix}{COMMANDS}", [(b"k", waited, signed(waited, "csk_acme"))]
    )

    an_hour_later = lambda: time.time() + 3600  # noqa: E731
    await consume(pool, kafka_bootstrap, topic_prefix, authority, dead=0, clock=an_hour_later)

    assert await booked(pool, acme) == ["waited"]

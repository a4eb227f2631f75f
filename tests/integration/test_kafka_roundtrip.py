"""A SettlementEvent through the real Kafka broker: Avro single-object bytes from an
idempotent producer, read back by a consumer group that commits its offsets."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from aiokafka import TopicPartition

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import (
    admin_client,
    header,
    idempotent_producer,
    manual_commit_consumer,
)
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.topics import EVENTS, TOPICS
from tests.conftest import unique

pytestmark = pytest.mark.integration


def settlement_event(settlement_id: str, sequence: int, kind: str) -> dict[str, object]:
    return {
        "event_id": str(uuid.uuid4()),
        "settlement_id": settlement_id,
        "tenant": "acme",
        "reference": "payout-42",
        "type": kind,
        "sequence": sequence,
        "amount": 12_345,
        "currency": "EUR",
        "occurred_at": datetime(2026, 11, 25, 12, 0, 0, 123_000, tzinfo=UTC),
        "rail_reference": None if kind == "created" else "tr_123",
        "reason": None,
        "status": kind if kind != "created" else "accepted",
        "rail": "sepa",
    }


async def test_topics_are_created_with_their_partition_counts(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    created = await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    assert created == sorted(f"{topic_prefix}{t.name}" for t in TOPICS)
    assert await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix) == []
    admin = admin_client(KafkaAccess(kafka_bootstrap), "test-admin")
    await admin.start()
    try:
        described = await admin.describe_topics([f"{topic_prefix}{t.name}" for t in TOPICS])
    finally:
        await admin.close()
    counts = {d["topic"]: len(d["partitions"]) for d in described}
    assert counts == {f"{topic_prefix}{t.name}": t.partitions for t in TOPICS}


async def test_settlement_event_round_trip_through_a_consumer_group(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    topic = f"{topic_prefix}{EVENTS}"
    settlement_id = str(uuid.uuid4())
    sent = [settlement_event(settlement_id, n, k) for n, k in enumerate(("created", "paid"), 1)]

    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "test-producer")
    await producer.start()
    try:
        for event in sent:
            await producer.send_and_wait(
                topic,
                avro.encode("SettlementEvent", event),
                key=settlement_id.encode(),
                headers=[("event_id", str(event["event_id"]).encode())],
            )
    finally:
        await producer.stop()

    group = unique("group-")
    consumer = manual_commit_consumer(KafkaAccess(kafka_bootstrap), group, [topic])
    await consumer.start()
    try:
        batches = await consumer.getmany(timeout_ms=10_000, max_records=10)
        while sum(map(len, batches.values())) < len(sent):
            more = await consumer.getmany(timeout_ms=10_000, max_records=10)
            assert more, "events did not arrive"
            for tp, records in more.items():
                batches.setdefault(tp, []).extend(records)
        (partition, records), *others = batches.items()
        assert not others, "one settlement's events must share a partition"
        received = [avro.decode(r.value, "SettlementEvent") for r in records]
        assert received == sent
        assert [header(r.headers, "event_id") for r in records] == [
            str(e["event_id"]).encode() for e in sent
        ]
        assert all(r.key == settlement_id.encode() for r in records)
        await consumer.commit()
        committed = await consumer.committed(partition)
    finally:
        await consumer.stop()
    assert committed == records[-1].offset + 1

    # A new member of the same group resumes after the committed offset: nothing is redelivered.
    again = manual_commit_consumer(KafkaAccess(kafka_bootstrap), group, [topic])
    await again.start()
    try:
        assert await again.getmany(timeout_ms=2_000) == {}
        assert await again.committed(TopicPartition(topic, partition.partition)) == committed
    finally:
        await again.stop()

"""The relay's dispatch trigger on the real broker and PostgreSQL: poison events on the events
topic are passed over, counted and committed past, and the settlements after them dispatch."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer, manual_commit_consumer
from services.adapters.kafka.topics import ensure_topics
from services.contracts.topics import EVENTS
from services.relay.dispatch import Dispatcher
from services.relay.metrics import create_metrics
from services.relay.triggers import CONSUMER_GROUP, trigger_dispatch
from tests.conftest import unique
from tests.integration.test_relay_dispatch import FAST, ScriptedRail, accept, state
from tests.unit.test_relay_triggers import event
from tests.waiting import eventually

pytestmark = pytest.mark.integration


async def committed(bootstrap: str, group: str) -> int:
    """How many records the group has committed past, over all its partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        return sum(max(0, meta.offset) for meta in offsets.values())
    finally:
        await admin.close()


async def test_poison_events_never_stop_the_relay_and_later_settlements_dispatch(
    pool: asyncpg.Pool, kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(KafkaAccess(kafka_bootstrap), topic_prefix)
    topic, group = f"{topic_prefix}{EVENTS}", f"{topic_prefix}{CONSUMER_GROUP}"
    sid = await accept(pool)
    not_a_uuid = event("settlement-42", "created")
    malformed = event(str(uuid.uuid4()), "created")[:-9]  # the Avro body cut short
    unknown_type = event(str(uuid.uuid4()), "refund_scheduled")
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "test-outbox")
    await producer.start()
    try:
        # One key: one partition, so the poison sits before the good event in its order.
        for value in (not_a_uuid, malformed, unknown_type, event(sid, "created")):
            await producer.send_and_wait(topic, value, key=b"same-partition")
    finally:
        await producer.stop()

    metrics, rail = create_metrics(), ScriptedRail([])
    dispatcher = Dispatcher(pool, rail, metrics, unique("w"), True, FAST)

    def consumer() -> AIOKafkaConsumer:
        return manual_commit_consumer(KafkaAccess(kafka_bootstrap), group, [topic])

    relay = asyncio.create_task(trigger_dispatch(consumer, dispatcher, metrics))
    try:

        async def passed_over() -> bool:
            assert not relay.done(), relay  # the relay must still be running
            return (await state(pool, sid))[0] == "submitted" and (
                await committed(kafka_bootstrap, group) >= 4
            )

        await eventually(passed_over, 40, "the poison passed over and the offsets committed")
        assert not relay.done()
    finally:
        relay.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await relay

    assert rail.effects == {sid: 1}
    sample = metrics.registry.get_sample_value
    assert sample("settle_relay_poison_events_total", {"reason": "invalid_settlement_id"}) == 1
    assert sample("settle_relay_poison_events_total", {"reason": "undecodable"}) == 1

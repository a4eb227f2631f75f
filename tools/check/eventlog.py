"""Facts from Kafka: the events topic from its beginning to the end offsets taken at the start.

The consumer has no group: it assigns every partition itself and never commits, so reading
changes nothing for anyone. Records come in batches; only a few fields of each are kept.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from services.shared import avro
from services.shared.errors import SchemaError
from tools.check.errors import SourceUnavailable
from tools.check.facts import EventFact, EventLogFacts

BATCH = 10_000
MAX_FETCH_BYTES = 16 * 1024 * 1024


async def read_events(bootstrap: str, topic: str, timeout_s: float = 300.0) -> EventLogFacts:
    """Every SettlementEvent on `topic` now, deduplicated by event_id, per settlement."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="settle-check",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=MAX_FETCH_BYTES,
        max_partition_fetch_bytes=MAX_FETCH_BYTES // 4,
    )
    try:
        async with asyncio.timeout(timeout_s):
            await consumer.start()
            try:
                return await _read(consumer, topic)
            finally:
                await consumer.stop()
    except TimeoutError as e:
        raise SourceUnavailable("kafka", f"{topic} not read within {timeout_s:.0f} s") from e
    except (KafkaError, OSError) as e:
        raise SourceUnavailable("kafka", f"{topic}: {e!r}") from e


async def _read(consumer: AIOKafkaConsumer, topic: str) -> EventLogFacts:
    # The consumer's own metadata covers only what it was told about; ask the cluster.
    cluster = await consumer._client.fetch_all_metadata()
    numbers = cluster.partitions_for_topic(topic)
    if not numbers:
        raise SourceUnavailable("kafka", f"topic {topic} does not exist")
    partitions = [TopicPartition(topic, p) for p in sorted(numbers)]
    consumer.assign(partitions)
    ends: dict[TopicPartition, int] = await consumer.end_offsets(partitions)
    # Explicit offsets: a reset requested by assign() could otherwise land after a seek.
    starts: dict[TopicPartition, int] = await consumer.beginning_offsets(partitions)
    for tp in partitions:
        consumer.seek(tp, starts[tp])
    remaining = {tp for tp in partitions if ends[tp] > starts[tp]}
    for tp in list(remaining):
        if await consumer.position(tp) >= ends[tp]:
            remaining.discard(tp)
    by_settlement: dict[str, dict[str, EventFact]] = {}
    undecodable: list[str] = []
    messages = 0
    while remaining:
        batches = await consumer.getmany(*remaining, timeout_ms=1_000, max_records=BATCH)
        for tp, records in batches.items():
            for record in records:
                if record.offset >= ends[tp]:
                    break
                messages += 1
                if not _keep(record.value, by_settlement):
                    undecodable.append(f"{tp.partition}:{record.offset}")
        # Every remaining partition, not only those that gave records: a position can move
        # past offsets that hold no record (transaction markers).
        for tp in list(remaining):
            if await consumer.position(tp) >= ends[tp]:
                remaining.discard(tp)
    return EventLogFacts(topic, by_settlement, messages, tuple(undecodable))


def _keep(value: bytes | None, into: dict[str, dict[str, EventFact]]) -> bool:
    if value is None:
        return False
    try:
        event = avro.decode(value, "SettlementEvent")
    except SchemaError:
        return False
    with contextlib.suppress(KeyError):
        events = into.setdefault(event["settlement_id"], {})
        events[event["event_id"]] = EventFact(event["sequence"], event["type"], event["status"])
        return True
    return False

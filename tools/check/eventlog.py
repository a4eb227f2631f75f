"""Facts from Kafka: the events topic from its beginning to the end offsets taken at the start.

The consumer has no group: it assigns every partition itself and never commits, so reading
changes nothing for anyone. Records come in batches; only a few fields of each are kept, and
they go to the disk spill batch by batch, so the topic's size does not bound memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import log_reader
from services.contracts import avro
from services.domain.errors import SchemaError
from tools.check.errors import SourceUnavailable
from tools.check.facts import EventLogFacts
from tools.check.spill import EventRow, FactSpill

BATCH = 10_000
MAX_FETCH_BYTES = 16 * 1024 * 1024


async def read_events(
    kafka: KafkaAccess, topic: str, spill: FactSpill, timeout_s: float = 300.0
) -> EventLogFacts:
    """Every SettlementEvent on `topic` now, written to `spill`; the facts say how many were
    read and which could not be decoded (their events are in the spill, not in the facts)."""
    consumer = log_reader(
        kafka,
        "settle-check",
        fetch_max_bytes=MAX_FETCH_BYTES,
        max_partition_fetch_bytes=MAX_FETCH_BYTES // 4,
    )
    try:
        async with asyncio.timeout(timeout_s):
            await consumer.start()
            try:
                return await _read(consumer, topic, spill)
            finally:
                await consumer.stop()
    except TimeoutError as e:
        raise SourceUnavailable("kafka", f"{topic} not read within {timeout_s:.0f} s") from e
    except (KafkaError, OSError) as e:
        raise SourceUnavailable("kafka", f"{topic}: {e!r}") from e


async def _read(consumer: AIOKafkaConsumer, topic: str, spill: FactSpill) -> EventLogFacts:
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
    undecodable: list[str] = []
    messages = 0
    while remaining:
        batches = await consumer.getmany(*remaining, timeout_ms=1_000, max_records=BATCH)
        rows: list[EventRow] = []
        for tp, records in batches.items():
            for record in records:
                if record.offset >= ends[tp]:
                    break
                messages += 1
                row = _row(record.value)
                if row is None:
                    undecodable.append(f"{tp.partition}:{record.offset}")
                else:
                    rows.append(row)
        spill.add_events(rows)
        # Every remaining partition, not only those that gave records: a position can move
        # past offsets that hold no record (transaction markers).
        for tp in list(remaining):
            if await consumer.position(tp) >= ends[tp]:
                remaining.discard(tp)
    return EventLogFacts(topic, {}, messages, tuple(undecodable))


def _row(value: bytes | None) -> EventRow | None:
    """The fields kept of one message, or None when it is not a SettlementEvent of a
    settlement (its settlement_id a UUID): such a message is reported, never checked."""
    if value is None:
        return None
    try:
        event = avro.decode(value, "SettlementEvent")
        uuid.UUID(event["settlement_id"])
    except (SchemaError, ValueError):
        return None
    with contextlib.suppress(KeyError):
        return (
            event["settlement_id"],
            event["event_id"],
            event["sequence"],
            event["type"],
            event["status"],
        )
    return None

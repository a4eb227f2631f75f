"""The command dead-letter topic: every unusable command lands there, whatever its size.

A dead letter is the original value and key with headers saying why (`reason`,
`reason_detail`) and where it came from (`source_topic`, `source_partition`,
`source_offset`). A command close to the message limit has no room for those headers: it is
dead-lettered as a bounded stub instead, as much of its value as fits, with `truncated`,
`original_bytes` and `original_sha256` so the sender can match it to what was sent. If the
broker refuses even that (a topic limit below the producer's), the stub goes without value.
A dead letter that cannot be written at all would hold its partition forever; so none is
larger than the producer allows.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass
from typing import Any, NamedTuple

from aiokafka import AIOKafkaProducer, ConsumerRecord
from aiokafka.errors import MessageSizeTooLargeError, RecordListTooLargeError
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from services.ledger.metrics import LedgerMetrics

log = logging.getLogger(__name__)
Header = tuple[str, bytes]
MAX_DETAIL_BYTES = 4096
MIN_DETAIL_BYTES = 256  # in a stub for a topic whose limit is below the producer's
# Room left under the limit for what an estimate may not count (a larger varint, say).
SAFETY_BYTES = 64


@dataclass(frozen=True)
class DeadLetter:
    """An unusable command: its original record and why it cannot be booked."""

    record: ConsumerRecord
    code: str
    message: str

    def headers(self, detail_bytes: int = MAX_DETAIL_BYTES) -> list[Header]:
        """The reason and source headers every dead letter carries."""
        return [
            ("reason", self.code.encode()),
            ("reason_detail", self.message.encode()[:detail_bytes]),
            ("source_topic", self.record.topic.encode()),
            ("source_partition", str(self.record.partition).encode()),
            ("source_offset", str(self.record.offset).encode()),
        ]


class DeadLetterRecord(NamedTuple):
    """What is written to the dead-letter topic for one command."""

    key: bytes | None  # the command's key, so its dead letters stay in order
    value: bytes  # the command's bytes, or as many of them as fit
    headers: list[Header]  # why, from where, and whether the value was cut


def record_size(key: bytes | None, value: bytes | None, headers: list[Header]) -> int:
    """The size a producer counts against its max_request_size for one record."""
    return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, list(headers)))


def bounded(dead: DeadLetter, limit: int, keep_value: bool = True) -> DeadLetterRecord:
    """The record to dead-letter: the original whole when it fits in `limit` bytes, else a
    stub with as much of the value as fits (none without `keep_value`)."""
    detail = MAX_DETAIL_BYTES if keep_value else MIN_DETAIL_BYTES
    value, key, headers = dead.record.value or b"", dead.record.key, dead.headers(detail)
    room = limit - SAFETY_BYTES
    if keep_value and record_size(key, value, headers) <= room:
        return DeadLetterRecord(key, value, headers)
    stub = [
        *headers,
        ("truncated", b"true"),
        ("original_bytes", str(len(value)).encode()),
        ("original_sha256", hashlib.sha256(value).hexdigest().encode()),
    ]
    if record_size(key, b"", stub) > room:
        key = None  # a key as large as the limit: the stub goes to any partition
    kept = room - record_size(key, b"", stub) if keep_value else 0
    return DeadLetterRecord(key, value[: max(0, kept)], stub)


class DeadLetters:
    """Writes dead letters to one topic through an idempotent producer."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, metrics: LedgerMetrics) -> None:
        self.producer = producer
        self.topic = topic
        self.metrics = metrics
        # The producer's own limit: a record larger than this is refused before it is sent.
        self.limit = int(getattr(producer, "_max_request_size", 1_048_576))

    async def send_all(self, dead: list[DeadLetter]) -> None:
        """Dead-letter each command and wait until Kafka acknowledged every one."""
        sends = [await self._send(d, keep_value=True) for d in dead]
        for sent, d in zip(sends, dead, strict=True):
            try:
                await sent  # acknowledged by all replicas before the offset may move
            except (MessageSizeTooLargeError, RecordListTooLargeError):
                # The topic's limit is below the producer's: the stub without the value.
                await (await self._send(d, keep_value=False))
            self.metrics.dlq.labels(reason=d.code).inc()
            r = d.record
            log.warning(
                "command dead-lettered: %s (%s) %s[%d]@%d",
                d.code,
                d.message[:200],
                r.topic,
                r.partition,
                r.offset,
            )

    async def _send(self, d: DeadLetter, keep_value: bool) -> asyncio.Future[Any]:
        key, value, headers = bounded(d, self.limit, keep_value)
        sent: asyncio.Future[Any] = await self.producer.send(
            self.topic, value, key=key, headers=headers
        )
        return sent

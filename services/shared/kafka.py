"""Kafka clients configured the one way settle uses them.

Producers are idempotent with ``acks=all``: a retried send never duplicates or reorders a
partition's messages. Consumers never auto-commit: offsets move only after the work they
stand for is durable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

Headers = Sequence[tuple[str, bytes]]


def idempotent_producer(
    bootstrap: str, client_id: str, linger_ms: int = 5, max_batch_bytes: int = 16_384
) -> AIOKafkaProducer:
    """A producer that writes each message once per partition, acknowledged by all replicas."""
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        max_batch_size=max_batch_bytes,
        max_request_size=max(1_048_576, max_batch_bytes),
    )


def manual_commit_consumer(
    bootstrap: str, group_id: str, topics: Iterable[str], client_id: str | None = None
) -> AIOKafkaConsumer:
    """A consumer-group member that starts from the earliest offset and commits only when told."""
    return AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        client_id=client_id or group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )


def header(headers: Headers, name: str) -> bytes | None:
    """The value of the first header called `name`, or None."""
    return next((value for key, value in headers if key == name), None)

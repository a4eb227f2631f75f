"""Kafka clients configured the one way settle uses them, and kept connected the one way.

Every client reaches the brokers through a `KafkaAccess` (services.adapters.kafka.access): the
bootstrap servers, TLS and SASL come from one place, so no client can connect another way.
Producers are idempotent with ``acks=all``: a retried send never duplicates or reorders a
partition's messages. Consumers never auto-commit: offsets move only after the work they
stand for is durable. A service's Kafka loop is a session (`run_reconnecting`): it starts its
clients (`started`) and works; when Kafka, or a retriable error of the work, ends it, its
clients are stopped and a new session starts after a jittered backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from typing import Any, Protocol, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import IllegalStateError, KafkaError
from aiokafka.helpers import create_ssl_context

from services.adapters.kafka.access import KafkaAccess
from services.platform.backoff import backoff

log = logging.getLogger(__name__)
Headers = Sequence[tuple[str, bytes]]
Session = Callable[[AsyncExitStack], Awaitable[None]]
RECONNECT_BASE_S = 0.5  # the first new session starts within this
RECONNECT_CAP_S = 5.0  # and none waits longer than this while Kafka stays away
STABLE_SECONDS = 30.0  # a session that ran this long starts the backoff over
STOP_SECONDS = 2.0  # a client of a dead broker may never finish stopping


class KafkaClient(Protocol):
    """A producer or consumer: started before use, stopped after."""

    async def start(self) -> None:
        """Connect to the cluster."""
        ...

    async def stop(self) -> None:
        """Flush what is pending and disconnect."""
        ...


C = TypeVar("C", bound=KafkaClient)


def connection_options(access: KafkaAccess) -> dict[str, Any]:
    """aiokafka's keyword arguments that reach the brokers the way `access` says."""
    options: dict[str, Any] = {
        "bootstrap_servers": access.bootstrap,
        "security_protocol": access.protocol.value,
    }
    if access.tls is not None:
        # Hostname checking is always on: the broker's certificate must name the address.
        options["ssl_context"] = create_ssl_context(
            cafile=access.tls.cafile, certfile=access.tls.certfile, keyfile=access.tls.keyfile
        )
    if access.login is not None:
        options["sasl_mechanism"] = access.login.mechanism.value
        options["sasl_plain_username"] = access.login.username
        options["sasl_plain_password"] = access.login.password.get_secret_value()
    return options


def idempotent_producer(
    access: KafkaAccess, client_id: str, linger_ms: int = 5, max_batch_bytes: int = 16_384
) -> AIOKafkaProducer:
    """A producer that writes each message once per partition, acknowledged by all replicas."""
    return AIOKafkaProducer(
        **connection_options(access),
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        max_batch_size=max_batch_bytes,
        max_request_size=max(1_048_576, max_batch_bytes),
    )


def manual_commit_consumer(
    access: KafkaAccess, group_id: str, topics: Iterable[str], client_id: str | None = None
) -> AIOKafkaConsumer:
    """A consumer-group member that starts from the earliest offset and commits only when told."""
    return AIOKafkaConsumer(
        *topics,
        **connection_options(access),
        group_id=group_id,
        client_id=client_id or group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )


def log_reader(
    access: KafkaAccess,
    client_id: str,
    *,
    fetch_max_bytes: int = 52_428_800,
    max_partition_fetch_bytes: int = 1_048_576,
) -> AIOKafkaConsumer:
    """A consumer outside any group that the caller assigns partitions to; it never commits,
    so reading changes nothing for anyone."""
    return AIOKafkaConsumer(
        **connection_options(access),
        client_id=client_id,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_bytes=fetch_max_bytes,
        max_partition_fetch_bytes=max_partition_fetch_bytes,
    )


def admin_client(
    access: KafkaAccess, client_id: str, request_timeout_ms: int = 40_000
) -> AIOKafkaAdminClient:
    """An admin client (topics, groups, cluster metadata); started before use, closed after."""
    return AIOKafkaAdminClient(
        **connection_options(access), client_id=client_id, request_timeout_ms=request_timeout_ms
    )


def header(headers: Headers, name: str) -> bytes | None:
    """The value of the first header called `name`, or None."""
    return next((value for key, value in headers if key == name), None)


async def started(clients: AsyncExitStack, client: C) -> C:
    """Start `client`; `clients` stops it when the session ends, even if starting failed."""
    clients.push_async_callback(_stop, client)
    await client.start()
    return client


async def _stop(client: KafkaClient) -> None:
    with contextlib.suppress(KafkaError, TimeoutError):
        await asyncio.wait_for(client.stop(), STOP_SECONDS)


async def run_reconnecting(
    what: str,
    session: Session,
    retriable: Callable[[BaseException], bool],
    rng: random.Random | None = None,
) -> None:
    """Run `session` until it returns; after a Kafka error or one `retriable` says may pass
    (the session's store is down, say), stop its clients and run a new session after a
    jittered backoff; raise any other error."""
    rng = rng or random.Random()
    attempt = 0
    while True:
        began = time.monotonic()
        try:
            async with AsyncExitStack() as clients:
                await session(clients)
            return
        except Exception as e:
            # Any Kafka error: new clients are the remedy, whatever the error says of itself.
            if not (isinstance(e, KafkaError) or retriable(e)):
                raise
            log.warning("%s interrupted (%s: %s); reconnecting", what, type(e).__name__, e)
        if time.monotonic() - began >= STABLE_SECONDS:
            attempt = 0
        await asyncio.sleep(backoff(attempt, RECONNECT_BASE_S, RECONNECT_CAP_S, rng))
        attempt += 1


async def messages_behind(consumer: AIOKafkaConsumer) -> dict[str, int]:
    """Per topic, how many messages the consumer's position is behind the partition ends,
    over the assigned partitions fetched at least once (before that no end is known)."""
    behind: dict[str, int] = {}
    for tp in consumer.assignment():
        end = consumer.highwater(tp)
        if end is None:
            continue
        try:
            # Valid once fetched, so this answers at once rather than waiting for a reset.
            position = await consumer.position(tp)
        except IllegalStateError:
            continue  # revoked by a rebalance meanwhile: the new owner reports it
        behind[tp.topic] = behind.get(tp.topic, 0) + max(end - position, 0)
    return behind

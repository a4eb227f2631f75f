"""Composition root of the relay: pool, producer, rail, publisher, dispatcher; runs them all.

The relay's work is driven three ways, so nothing depends on one of them alone: PostgreSQL
notifications wake the outbox publisher, settlement `created` events on Kafka trigger pass 1
of the dispatcher, and a timer runs pass 2 (reclaim and forgotten pending rows) and pruning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable

import asyncpg
import stripe
import uvicorn
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from services.relay.dispatch import Dispatcher, DispatchPolicy
from services.relay.metrics import create_metrics, metrics_app
from services.relay.outbox import OutboxPublisher, prune_published
from services.relay.stripe_rail import stripe_rail
from services.shared import avro
from services.shared.config import RailKind, Settings
from services.shared.database import create_pool
from services.shared.errors import SchemaError, SettleError
from services.shared.kafka import idempotent_producer, manual_commit_consumer
from services.shared.running import run_until_first_exits
from services.shared.topics import EVENTS

log = logging.getLogger(__name__)
OutboxPublisherFactory = Callable[[AIOKafkaProducer], OutboxPublisher]
JobFactory = Callable[[], Awaitable[object]]
CONSUMER_GROUP = "settle-relay"
SIMULATOR_API = "http://127.0.0.1:12111"
SWEEP_SECONDS = 1.0
DISPATCH_CHUNK = 100  # settlements claimed, sent and recorded together
PRUNE_SECONDS = 60.0
RETENTION_SECONDS = 3_600.0
KAFKA_RETRY_S = 2.0
PUBLISH_BATCH_BYTES = 512 * 1024  # a claimed batch leaves in a few record batches
# Failures a later round repairs: PostgreSQL busy, restarting or away; a rail lookup failing.
# A session PostgreSQL ended mid-statement (a stalled replica) surfaces as InternalClientError.
TRANSIENT = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    SettleError,
)


def worker_name() -> str:
    """A name for this relay process in claims and audit rows."""
    return f"settle-relay-{socket.gethostname()}-{os.getpid()}"


async def trigger_dispatch(settings: Settings, dispatcher: Dispatcher) -> None:
    """Pass 1 on every `created` event; offsets move once each claim is durable."""
    while True:
        consumer = manual_commit_consumer(
            settings.kafka_bootstrap, settings.topic(CONSUMER_GROUP), [settings.topic(EVENTS)]
        )
        try:
            await consumer.start()
            while True:
                batches = await consumer.getmany(timeout_ms=500, max_records=500)
                created = []
                for records in batches.values():
                    for record in records:
                        try:
                            event = avro.decode(record.value or b"", "SettlementEvent")
                        except SchemaError as e:
                            log.warning("undecodable settlement event skipped: %s", e)
                            continue
                        if event["type"] == "created":
                            created.append(str(event["settlement_id"]))
                chunks = [
                    created[i : i + DISPATCH_CHUNK] for i in range(0, len(created), DISPATCH_CHUNK)
                ]
                outcomes = await asyncio.gather(
                    *(dispatcher.dispatch_many(chunk) for chunk in chunks), return_exceptions=True
                )
                for chunk, outcome in zip(chunks, outcomes, strict=True):
                    if isinstance(outcome, TRANSIENT):
                        # Claims made wait for pass 2; nothing is lost by moving on.
                        log.warning(
                            "dispatch of %d settlements failed, pass 2 will retry: %s",
                            len(chunk), outcome,
                        )  # fmt: skip
                    elif isinstance(outcome, BaseException):
                        raise outcome
                if batches:
                    await consumer.commit()
        except KafkaError as e:
            log.warning("Kafka unavailable for dispatch triggers (%s); retrying", e)
        finally:
            with contextlib.suppress(KafkaError):
                await consumer.stop()
        await asyncio.sleep(KAFKA_RETRY_S)


async def publish_forever(settings: Settings, publisher_of: OutboxPublisherFactory) -> None:
    """Run the outbox publisher, reconnecting its producer while Kafka is unreachable."""
    while True:
        producer = idempotent_producer(
            settings.kafka_bootstrap, "settle-relay-outbox", max_batch_bytes=PUBLISH_BATCH_BYTES
        )
        try:
            await producer.start()
            await publisher_of(producer).run()
        except (KafkaError, TimeoutError, *TRANSIENT) as e:
            # Nothing was marked published that Kafka did not acknowledge; start afresh.
            log.warning("publishing interrupted (%s: %s); retrying", type(e).__name__, e)
        finally:
            with contextlib.suppress(KafkaError, TimeoutError):
                await asyncio.wait_for(producer.stop(), KAFKA_RETRY_S)
        await asyncio.sleep(KAFKA_RETRY_S)


async def every(seconds: float, job: JobFactory) -> None:
    """Run `job` every `seconds`, logging (not dying on) a failed round."""
    while True:
        try:
            await job()
        except (*TRANSIENT, KafkaError) as e:
            log.warning("periodic job failed, next round in %.0f s: %s", seconds, e)
        await asyncio.sleep(seconds)


async def serve(settings: Settings, host: str, port: int) -> None:
    """Run the relay until cancelled, with /metrics on `port`."""
    stripe.enable_telemetry = False  # nothing about our calls leaves but the calls
    metrics = create_metrics()
    # A relay paused or stalled inside a transaction must not hold rows from the replica that
    # takes its leases over: PostgreSQL ends such a session, and the fence refuses its writes.
    # A pause in the middle of sending a statement is beyond every timeout: pass 2 ends such
    # sessions of other replicas (see END_STALLED_RELAY_SESSIONS).
    stall_ms = str(int(settings.relay_lease_seconds * 1000 / 3))
    bounds = ("idle_in_transaction_session_timeout", "lock_timeout", "statement_timeout")
    server_settings = {**dict.fromkeys(bounds, stall_ms), "application_name": worker_name()}
    pool = await create_pool(settings, max_size=12, server_settings=server_settings)
    if settings.rail is RailKind.SIM and settings.stripe_api_base is None:
        settings = settings.model_copy(update={"stripe_api_base": SIMULATOR_API})
    # The rail call must end well inside the lease, or a live call could be taken over.
    call_seconds = min(10.0, settings.relay_lease_seconds / 3)
    policy = DispatchPolicy(
        lease_seconds=settings.relay_lease_seconds,
        call_seconds=call_seconds,
        ambiguous_pause_seconds=2 * call_seconds,
    )
    rail = stripe_rail(settings, timeout=call_seconds, connections=policy.concurrent_calls)
    dispatcher = Dispatcher(pool, rail, metrics, worker_name(), settings.rail_idempotent, policy)

    def outbox_of(producer: AIOKafkaProducer) -> OutboxPublisher:
        return OutboxPublisher(
            pool, producer, metrics, topic_prefix=settings.topic_prefix,
            ack_seconds=settings.relay_lease_seconds / 6,
        )  # fmt: skip

    server = uvicorn.Server(
        uvicorn.Config(metrics_app(metrics), host=host, port=port, log_level="warning")
    )
    try:
        await run_until_first_exits(
            server.serve(),
            publish_forever(settings, outbox_of),
            trigger_dispatch(settings, dispatcher),
            every(SWEEP_SECONDS, dispatcher.sweep),
            every(PRUNE_SECONDS, lambda: prune_published(pool, metrics, RETENTION_SECONDS)),
        )
    finally:
        server.should_exit = True
        await rail.aclose()
        await pool.close()

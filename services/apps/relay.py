"""Composition root of the relay: pool, producer, publisher, a dispatcher per rail
(services/apps/relay_rails.py); runs them all.

The relay's work is driven three ways, so nothing depends on one of them alone: PostgreSQL
notifications wake the outbox publisher, settlement `created` events on Kafka trigger pass 1
of the Stripe adapter's dispatcher, and timers run pass 2 (reclaim and forgotten pending
rows), the SEPA rail's files and pruning.
"""

from __future__ import annotations

import asyncpg
import stripe
import uvicorn
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.adapters.kafka.access import kafka_access
from services.adapters.kafka.clients import idempotent_producer, manual_commit_consumer
from services.adapters.postgres.database import create_pool
from services.adapters.postgres.schema_version import require_schema
from services.adapters.postgres.store_errors import is_retriable
from services.adapters.stripe.address import rail_api_base
from services.apps.relay_rails import rail_dispatch, worker_name
from services.contracts.topics import EVENTS
from services.platform.running import every, run_until_first_exits
from services.platform.service_settings import RelaySettings
from services.relay.metrics import create_metrics, metrics_app
from services.relay.outbox import (
    PUBLISH_BATCH_BYTES,
    OutboxPublisher,
    prune_published,
    publish_forever,
)
from services.relay.policy import DispatchPolicy
from services.relay.triggers import CONSUMER_GROUP

SWEEP_SECONDS = 1.0
PRUNE_SECONDS = 60.0
RETENTION_SECONDS = 3_600.0


async def relay_pool(settings: RelaySettings) -> asyncpg.Pool:
    """The relay's pool, its sessions bounded so a stalled relay holds no rows for long."""
    # A relay paused or stalled inside a transaction must not hold rows from the replica that
    # takes its leases over: PostgreSQL ends such a session, and the fence refuses its writes.
    # A pause in the middle of sending a statement is beyond every timeout: pass 2 ends such
    # sessions of other replicas (see END_STALLED_RELAY_SESSIONS).
    stall_ms = str(int(settings.relay_lease_seconds * 1000 / 3))
    bounds = ("idle_in_transaction_session_timeout", "lock_timeout", "statement_timeout")
    server_settings = {**dict.fromkeys(bounds, stall_ms), "application_name": worker_name()}
    # The relay sets nothing on its sessions (the publisher's LISTEN connection unlistens
    # before it goes back), so no reset round trip is owed on each release.
    return await create_pool(
        settings, max_size=12, server_settings=server_settings, keep_sessions=True
    )


def dispatch_policy(settings: RelaySettings) -> DispatchPolicy:
    """Leases and call timeouts from the settings."""
    # The rail call must end well inside the lease, or a live call could be taken over.
    call_seconds = min(10.0, settings.relay_lease_seconds / 3)
    return DispatchPolicy(
        lease_seconds=settings.relay_lease_seconds,
        call_seconds=call_seconds,
        ambiguous_pause_seconds=2 * call_seconds,
    )


async def serve(settings: RelaySettings, host: str, port: int) -> None:
    """Run the relay until cancelled, with /metrics on `port`."""
    stripe.enable_telemetry = False  # nothing about our calls leaves but the calls
    access = kafka_access(settings)  # a bad setting stops the start, before any connection
    metrics = create_metrics()
    pool = await relay_pool(settings)
    await require_schema(pool)  # a schema older than this code ends the start
    settings = settings.model_copy(update={"stripe_api_base": rail_api_base(settings)})
    policy = dispatch_policy(settings)

    def producer() -> AIOKafkaProducer:
        return idempotent_producer(
            access, "settle-relay-outbox", max_batch_bytes=PUBLISH_BATCH_BYTES
        )

    def outbox_of(producer: AIOKafkaProducer) -> OutboxPublisher:
        return OutboxPublisher(
            pool,
            producer,
            metrics,
            topic_prefix=settings.topic_prefix,
            ack_seconds=settings.relay_lease_seconds / 6,
        )

    def consumer() -> AIOKafkaConsumer:
        return manual_commit_consumer(
            access, settings.topic(CONSUMER_GROUP), [settings.topic(EVENTS)]
        )

    async def prune() -> int:
        return await prune_published(pool, metrics, RETENTION_SECONDS)

    rails = rail_dispatch(settings, pool, metrics, policy, consumer)

    server = uvicorn.Server(
        uvicorn.Config(
            metrics_app(metrics), host=host, port=port, log_level="warning", log_config=None
        )
    )
    try:
        await run_until_first_exits(
            server.serve(),
            publish_forever(producer, outbox_of),
            every(PRUNE_SECONDS, prune, "pruning published outbox rows", is_retriable),
            *rails.loops,
        )
    finally:
        server.should_exit = True
        for close in rails.closers:
            await close()
        await pool.close()

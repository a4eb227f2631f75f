"""Composition root of the ledger: builds the pool, books, Kafka clients and HTTP app, runs them.

Nothing connects at import time. The HTTP server starts even when PostgreSQL or Kafka is
down: requests then fail closed with 503 and /readyz says which dependency is missing.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from datetime import timedelta
from functools import partial
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from services.adapters.kafka.access import KafkaAccess, kafka_access
from services.adapters.kafka.clients import idempotent_producer, manual_commit_consumer
from services.adapters.postgres.database import create_pool
from services.adapters.postgres.schema_version import require_schema
from services.adapters.postgres.store_errors import is_retriable
from services.contracts.topics import COMMANDS, COMMANDS_DLQ
from services.ledger.acceptor import Ledger
from services.ledger.admission import Admission, admission_of
from services.ledger.booking import Books, Windows
from services.ledger.command_auth import command_authority
from services.ledger.commands import CONSUMER_GROUP, CommandIntake, consume_commands
from services.ledger.http import create_admin_app, create_app
from services.ledger.key_cleanup import KeyCleanup, deleted_keys_counter, retention_of
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.readiness import Readiness
from services.ledger.reads import SettlementReads
from services.ledger.replicas import ReplicaRegistry
from services.platform.listeners import Listeners, ListeningServer
from services.platform.running import every, run_until_first_exits
from services.platform.service_settings import LedgerSettings
from services.platform.tuning import IdempotencySection

log = logging.getLogger(__name__)


def windows(settings: IdempotencySection) -> Windows:
    """The idempotency windows the settings ask for."""
    return Windows(
        replay=timedelta(seconds=settings.idempotency_replay_seconds),
        tombstone=timedelta(seconds=settings.idempotency_tombstone_seconds),
    )


async def serve(
    settings: LedgerSettings, host: str, port: int, admin_port: int, consume: bool = True
) -> None:
    """Run the ledger's tenant API on `port`, its admin API on `admin_port` (and, with
    `consume`, its Kafka intake) until cancelled."""
    access = kafka_access(settings)  # a bad setting stops the start, before any connection
    # The tenant label takes the configured tenants only (and `unknown`): bounded cardinality.
    metrics = create_metrics(tenants=settings.api_tokens)
    # The ledger keeps no session state: a batch gives its connection back without the
    # full reset's extra round trip.
    pool = await create_pool(settings, keep_sessions=True)
    await require_schema(pool)  # a schema older than this code ends the start
    books = Books(windows(settings), settings.stripe_method, limits=settings.tenant_limits)
    ledger = Ledger(pool, books, metrics=metrics)
    # One admission for both ingress paths: Kafka commands count in the HTTP backlog.
    admission = admission_of(settings)
    # Every tenant's rate is shared among the live replicas, learnt on a heartbeat.
    replicas = ReplicaRegistry(pool, admission.share_among)
    readiness = Readiness(pool, settings.kafka_bootstrap)
    apps = Listeners(
        create_app(ledger, SettlementReads(pool), settings, metrics=metrics, admission=admission),
        create_admin_app(readiness, metrics),
    )
    server = ListeningServer(apps, host, port, admin_port)
    cleanup = KeyCleanup(pool, retention_of(settings), deleted_keys_counter(metrics.registry))
    loops = [
        server.serve(),
        every(replicas.heartbeat, replicas.beat, "replica heartbeat", is_retriable),
        every(
            settings.idempotency_cleanup_seconds,
            cleanup.sweep,
            "idempotency key cleanup",
            is_retriable,
        ),
    ]
    if consume:
        loops.append(command_intake(settings, access, ledger, metrics, admission))
    try:
        await run_until_first_exits(*loops)
    finally:
        try:
            await leave(replicas)
        finally:
            await ledger.stop()
            await pool.close()


def command_intake(
    settings: LedgerSettings,
    access: KafkaAccess,
    ledger: Ledger,
    metrics: LedgerMetrics,
    admission: Admission,
) -> Coroutine[Any, Any, None]:
    """The Kafka intake of settlement commands, dead-lettering what cannot be booked."""
    dlq = settings.topic(COMMANDS_DLQ)
    authority = command_authority(settings)
    if settings.command_signing_required and authority.unsigned_tenants():
        log.warning(
            "command signing is required but tenants %s have no signing secret: "
            "their Kafka commands will be dead-lettered",
            authority.unsigned_tenants(),
        )

    def consumer() -> AIOKafkaConsumer:
        return manual_commit_consumer(
            access,
            settings.topic(CONSUMER_GROUP),
            [settings.topic(COMMANDS)],
        )

    def intake_of(consumer: AIOKafkaConsumer, producer: AIOKafkaProducer) -> CommandIntake:
        return CommandIntake(
            consumer, producer, ledger, dlq, authority, metrics=metrics, admission=admission
        )

    dlq_producer = partial(idempotent_producer, access, "settle-ledger-dlq")
    return consume_commands(consumer, dlq_producer, intake_of)


async def leave(replicas: ReplicaRegistry) -> None:
    """Delete this replica's row on the way out; out of reach, the others count it out
    after a few heartbeats anyway."""
    try:
        await replicas.leave()
    except Exception as e:
        if not is_retriable(e):
            raise
        log.warning("could not delete this replica's row, counted out soon anyway: %s", e)

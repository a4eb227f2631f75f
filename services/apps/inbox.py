"""Composition root of the inbox: builds the pool, signature check, worker and HTTP app, runs them.

Apply strategy: the request stores, applies and answers in one transaction; the apply worker
in the same process takes what that left. The webhook handler verifies, inserts
(`ON CONFLICT DO NOTHING`, in one multi-row INSERT with the webhooks arriving at the same
time: `intake.EventStore`), applies the rows it stored under a savepoint
(`InboxWorker.apply_stored`) and answers 200 once that transaction has committed: one commit
per group of webhooks, and a settlement is moved within the webhook's round trip. A crash
before the commit answers nobody (the rail redelivers); an apply that fails, or waits on a
settlement's lock past a short timeout, is rolled back alone, so its rows commit `received`
and the worker (this replica's or another's) claims them. The worker also polls, for parked
events coming due and rows stored by other replicas.

Where the deployment pays by SEPA, the inbox also polls the bank for its reports
(`bank_poller`): each is stored before it is read, and its transactions become inbox rows
that the same worker applies.

Nothing connects at import time; the server starts even when PostgreSQL is down (webhooks
then answer 503 and the rail redelivers).
"""

from __future__ import annotations

import random

import asyncpg
from fastapi import FastAPI

from services.adapters.postgres.database import create_pool
from services.adapters.postgres.schema_version import require_schema
from services.adapters.sepa.bank import Bank
from services.apps.relay_rails import bank_retriable
from services.inbox.bank_poller import BankReportPoller
from services.inbox.http import create_app, readiness_routes
from services.inbox.metrics import InboxMetrics, create_metrics
from services.inbox.signature import SignatureCheck
from services.inbox.worker import InboxWorker, RetryPolicy
from services.platform.config import RailKind
from services.platform.listeners import Listeners, ListeningServer, admin_api
from services.platform.running import every, run_until_first_exits
from services.platform.service_settings import InboxSettings
from services.platform.tuning import InboxSection

HTTP_CONNECTIONS = 8
BANK_POLL_SECONDS = 1.0  # how often the bank's report listing is read
BANK_SECONDS = 10.0  # the bound of one call to the bank
ADMIN_DESCRIPTION = """The inbox's admin port: readiness and metrics. Reachable by operators and
Prometheus only, never by the rail. Operators see and replay inbox events through the operator
API (the reconciler's), which holds their tokens; the inbox holds none."""


def retry_policy(settings: InboxSection) -> RetryPolicy:
    """The parked-event retry policy the settings ask for."""
    return RetryPolicy(
        settings.inbox_park_attempts,
        settings.inbox_retry_seconds,
        settings.inbox_retry_max_seconds,
    )


def create_admin_app(pool: asyncpg.Pool, metrics: InboxMetrics) -> FastAPI:
    """The inbox's admin app: /healthz, /readyz, /metrics, /docs and /openapi.json."""
    app = admin_api("settle inbox admin", ADMIN_DESCRIPTION, metrics.registry)
    app.include_router(readiness_routes(pool))
    return app


async def serve(settings: InboxSettings, host: str, port: int, admin_port: int) -> None:
    """Run the inbox's webhook endpoint on `port`, its admin API on `admin_port` and its apply
    workers until cancelled (or SIGTERM)."""
    metrics = create_metrics()
    pool = await create_pool(
        settings, max_size=HTTP_CONNECTIONS + settings.inbox_workers + 1, keep_sessions=True
    )
    await require_schema(pool)  # a schema older than this code ends the start
    worker = InboxWorker(pool, metrics, retry_policy(settings), rng=random.Random())
    secrets = [secret.get_secret_value() for secret in settings.stripe_webhook_secret]
    apps = Listeners(
        create_app(
            pool,
            SignatureCheck(secrets),
            metrics,
            max_body_bytes=settings.inbox_max_body_bytes,
            applier=worker,
        ),
        create_admin_app(pool, metrics),
    )
    server = ListeningServer(apps, host, port, admin_port)
    tasks = [server.serve(), worker.run(settings.inbox_workers)]
    bank = (
        Bank(settings.sepa_bank_url, timeout=BANK_SECONDS)
        if RailKind.SEPA in settings.rails
        else None
    )
    if bank is not None:
        poller = BankReportPoller(pool, bank, RailKind.SEPA.value, wake=worker.wake)
        tasks.append(every(BANK_POLL_SECONDS, poller.poll, "bank reports", bank_retriable))
    try:
        await run_until_first_exits(*tasks)
    finally:
        if bank is not None:
            await bank.aclose()
        await pool.close()

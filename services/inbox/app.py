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

Nothing connects at import time; the server starts even when PostgreSQL is down (webhooks
then answer 503 and the rail redelivers).
"""

from __future__ import annotations

import random

from services.inbox.http import create_admin_app, create_app
from services.inbox.metrics import create_metrics
from services.inbox.signature import SignatureCheck
from services.inbox.worker import InboxWorker, RetryPolicy
from services.operations.approvals import policy_of
from services.shared.config import Settings
from services.shared.database import create_pool
from services.shared.edge import BearerAuth
from services.shared.listeners import Listeners, ListeningServer
from services.shared.running import run_until_first_exits

HTTP_CONNECTIONS = 8


def retry_policy(settings: Settings) -> RetryPolicy:
    """The parked-event retry policy the settings ask for."""
    return RetryPolicy(
        settings.inbox_park_attempts, settings.inbox_retry_seconds,
        settings.inbox_retry_max_seconds,
    )  # fmt: skip


async def serve(settings: Settings, host: str, port: int, admin_port: int) -> None:
    """Run the inbox's webhook endpoint on `port`, its admin API on `admin_port` and its apply
    workers until cancelled (or SIGTERM)."""
    metrics = create_metrics()
    pool = await create_pool(
        settings, max_size=HTTP_CONNECTIONS + settings.inbox_workers + 1, keep_sessions=True
    )
    worker = InboxWorker(pool, metrics, retry_policy(settings), rng=random.Random())
    operators = BearerAuth(settings.operator_by_token)
    secrets = [secret.get_secret_value() for secret in settings.stripe_webhook_secret]
    apps = Listeners(
        create_app(
            pool, SignatureCheck(secrets), metrics,
            max_body_bytes=settings.inbox_max_body_bytes, applier=worker,
        ),
        create_admin_app(pool, operators, metrics, policy=policy_of(settings)),
    )  # fmt: skip
    server = ListeningServer(apps, host, port, admin_port)
    try:
        await run_until_first_exits(server.serve(), worker.run(settings.inbox_workers))
    finally:
        await pool.close()

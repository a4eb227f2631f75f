"""Composition root of the inbox: builds the pool, signature check, worker and HTTP app, runs them.

Apply strategy: the request stores and answers; the apply worker in the same process applies.
The webhook handler only verifies, inserts (`ON CONFLICT DO NOTHING`, in one multi-row INSERT
with the webhooks arriving at the same time: `intake.EventStore`) and answers 200 once that
INSERT has committed, so the rail gets its answer in one commit's time whatever the
settlement's lock or the books are doing, and a crash after the INSERT loses nothing: the
row stays `received` until a worker (this replica's or another's) claims it. The handler
wakes the local worker, so an event is usually applied a few milliseconds after it was
stored, in a batch with the others that came meanwhile; the worker also polls, for parked
events coming due and rows stored by other replicas.

Nothing connects at import time; the server starts even when PostgreSQL is down (webhooks
then answer 503 and the rail redelivers).
"""

from __future__ import annotations

import random

import uvicorn

from services.inbox.http import create_app
from services.inbox.metrics import create_metrics
from services.inbox.signature import SignatureCheck
from services.inbox.worker import InboxWorker, RetryPolicy
from services.shared.config import Settings
from services.shared.database import create_pool
from services.shared.edge import BearerAuth
from services.shared.running import run_until_first_exits

HTTP_CONNECTIONS = 8


def retry_policy(settings: Settings) -> RetryPolicy:
    """The parked-event retry policy the settings ask for."""
    return RetryPolicy(
        settings.inbox_park_attempts, settings.inbox_retry_seconds,
        settings.inbox_retry_max_seconds,
    )  # fmt: skip


async def serve(settings: Settings, host: str, port: int) -> None:
    """Run the inbox's HTTP API and its apply workers until cancelled (or SIGTERM)."""
    metrics = create_metrics()
    pool = await create_pool(settings, max_size=HTTP_CONNECTIONS + settings.inbox_workers + 1)
    worker = InboxWorker(pool, metrics, retry_policy(settings), rng=random.Random())
    operators = BearerAuth({token: name for name, token in settings.operator_tokens.items()})
    app = create_app(
        pool, SignatureCheck(settings.stripe_webhook_secret), operators, metrics,
        max_body_bytes=settings.inbox_max_body_bytes, on_stored=worker.wake,
    )  # fmt: skip
    # No client address is read, so no proxy-header rewriting on every request.
    server = uvicorn.Server(
        uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, proxy_headers=False
        )
    )
    try:
        await run_until_first_exits(server.serve(), worker.run(settings.inbox_workers))
    finally:
        server.should_exit = True
        await pool.close()

"""The inbox's HTTP API: the Stripe webhook endpoint, the operator view, and operations.

Errors leave in the ledger's shape, `{"error": {"code", "message", "field"}}`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Annotated

import asyncpg
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from services.inbox.decision import InboxStatus
from services.inbox.errors import (
    BodyTooLarge,
    InboxError,
    MalformedEvent,
    StoreUnavailable,
)
from services.inbox.events import parse_event
from services.inbox.metrics import InboxMetrics
from services.inbox.operator import list_events, replay
from services.inbox.signature import SignatureCheck
from services.inbox.store import store_event, store_rejected
from services.inbox.worker import Clock, utc_now
from services.ledger.auth import BearerAuth
from services.ledger.errors import InvalidRequest
from services.ledger.http.body import read_capped_body
from services.ledger.http.errors import JSON, error_response, install_error_handlers
from services.ledger.http.security import tenant_dependency

DESCRIPTION = """Takes Stripe (and rail simulator) webhooks: signature checked first, stored
under the rail's event id, applied to settlements by the apply worker. Operator endpoints
take `Authorization: Bearer <operator token>` (SETTLE_OPERATOR_TOKENS)."""
STORE_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)
READY_TIMEOUT_S = 2.0


def _json(value: object, status: int = 200) -> Response:
    return Response(json.dumps(value, sort_keys=True, separators=(",", ":")), status,
                    media_type=JSON)  # fmt: skip


async def _inbox_error(_: Request, error: Exception) -> Response:
    assert isinstance(error, InboxError)
    headers = {}
    if isinstance(error, StoreUnavailable):
        headers["Retry-After"] = str(error.retry_after_seconds)
    return error_response(error.status, error.code, error.message, None, headers)


def create_app(
    pool: asyncpg.Pool,
    signatures: SignatureCheck,
    operators: BearerAuth,
    metrics: InboxMetrics,
    *,
    max_body_bytes: int,
    on_stored: Callable[[], None] = lambda: None,
    clock: Clock = utc_now,
) -> FastAPI:
    """The inbox's HTTP API over `pool`; `on_stored` is told whenever a row awaits applying."""
    app = FastAPI(title="settle inbox", version="1", description=DESCRIPTION)
    install_error_handlers(app)
    app.add_exception_handler(InboxError, _inbox_error)
    app.include_router(_webhook_routes(pool, signatures, metrics, max_body_bytes, on_stored, clock))
    app.include_router(_operator_routes(pool, operators, clock))
    app.include_router(_ops_routes(pool, metrics))
    return app


def _webhook_routes(
    pool: asyncpg.Pool, signatures: SignatureCheck, metrics: InboxMetrics, max_body_bytes: int,
    on_stored: Callable[[], None], clock: Clock,
) -> APIRouter:  # fmt: skip
    router = APIRouter(tags=["webhooks"])

    @router.post("/v1/webhooks/stripe", summary="Receive one signed rail event")
    async def stripe_webhook(request: Request) -> Response:
        try:
            body = await read_capped_body(request, max_body_bytes)
        except InvalidRequest as e:
            metrics.too_large.inc()
            raise BodyTooLarge(e.message) from e
        try:
            signatures.verify(body, request.headers.get("stripe-signature"))
        except InboxError as e:
            metrics.bad_signatures.labels(reason=e.code).inc()
            raise
        try:
            try:
                event = parse_event(body)
            except MalformedEvent as e:
                await store_rejected(pool, body, e.message, clock())
                metrics.received.labels(outcome="rejected").inc()
                raise
            row_id, status = await store_event(pool, event, body, clock())
        except STORE_ERRORS as e:
            raise StoreUnavailable("the inbox cannot store events right now; retry") from e
        if row_id is None:
            metrics.received.labels(outcome="duplicate").inc()
            metrics.duplicates.inc()
            return _json({"received": event.event_id, "duplicate": True})
        metrics.received.labels(
            outcome="stored" if status is InboxStatus.RECEIVED else "ignored"
        ).inc()
        if status is InboxStatus.RECEIVED:
            on_stored()
        return _json({"received": event.event_id, "duplicate": False, "status": str(status)})

    return router


def _operator_routes(pool: asyncpg.Pool, operators: BearerAuth, clock: Clock) -> APIRouter:
    router = APIRouter(tags=["operators"])
    # A default, not an Annotated alias: a local alias is not resolvable from string annotations.
    operator_of = Depends(tenant_dependency(operators))

    @router.get("/v1/inbox", summary="Inbox events in one status, oldest first")
    async def inbox(
        status: Annotated[InboxStatus, Query()],
        cursor: Annotated[str, Query(pattern=r"^[0-9]{1,18}$")] = "0",
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        _: str = operator_of,
    ) -> Response:
        try:
            return _json(await list_events(pool, status, int(cursor), limit))
        except STORE_ERRORS as e:
            raise StoreUnavailable("the inbox store does not answer") from e

    @router.post("/v1/inbox/{event}/replay", summary="Send a dead or parked event back to apply")
    async def replay_event(event: str, operator: str = operator_of) -> Response:
        try:
            async with pool.acquire() as conn:
                row_id = await replay(conn, event, operator, clock())
        except STORE_ERRORS as e:
            raise StoreUnavailable("the inbox store does not answer") from e
        return _json({"id": row_id, "status": "received"}, 202)

    return router


def _ops_routes(pool: asyncpg.Pool, metrics: InboxMetrics) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    @router.get("/readyz", summary="PostgreSQL answers")
    async def readyz() -> Response:
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                ok = await pool.fetchval("SELECT true") is True
        except (TimeoutError, *STORE_ERRORS):
            ok = False
        return _json({"postgres": ok}, 200 if ok else 503)

    @router.get("/metrics", summary="Prometheus metrics")
    async def prometheus() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return router

"""The inbox's HTTP apps: the Stripe webhook endpoint on the public port; readiness and
metrics on the admin port (operators list and replay inbox events through the operator API,
the reconciler's: services/operations/inbox_http.py).

Errors leave in the shared edge's shape, `{"error": {"code", "message", "field"}}`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

import asyncpg
import orjson
from fastapi import APIRouter, FastAPI, Request, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from services.adapters.postgres.store_errors import UNREACHABLE
from services.domain.errors import StoreUnavailable
from services.domain.rail_event import InboxStatus
from services.inbox import webhook_docs
from services.inbox.errors import InboxError, MalformedEvent
from services.inbox.events import parse_event
from services.inbox.intake import EventStore, StoredApplier
from services.inbox.metrics import RECEIVED_OUTCOMES, InboxMetrics
from services.inbox.signature import SignatureCheck
from services.inbox.store import store_rejected
from services.platform.api_docs import add_schemas
from services.platform.clock import Clock, utc_now
from services.platform.edge import (
    JSON,
    BodyTooLarge,
    JsonAnswer,
    answer_json,
    asgi_body_chunks,
    first_headers,
    read_capped,
)
from services.platform.listeners import public_api

DESCRIPTION = """Takes Stripe (and rail simulator) webhooks: signature checked first, stored
under the rail's event id, applied to settlements by the apply worker."""
# Answered 503: PostgreSQL away, or a statement it refused (a webhook body it cannot hold,
# while the rest of its group is stored); the rail redelivers.
STORE_FAILURES = (*UNREACHABLE, asyncpg.PostgresError)
READY_TIMEOUT_S = 2.0
WEBHOOK_PATH = "/v1/webhooks/stripe"
_LENGTH, _SIGNATURE = b"content-length", b"stripe-signature"
_WEBHOOK_HEADERS = frozenset({_LENGTH, _SIGNATURE})


def _dumps(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _json(value: object, status: int = 200) -> Response:
    return Response(_dumps(value), status, media_type=JSON)


def create_app(
    pool: asyncpg.Pool,
    signatures: SignatureCheck,
    metrics: InboxMetrics,
    *,
    max_body_bytes: int,
    applier: StoredApplier | None = None,
    clock: Clock = utc_now,
) -> WebhookFastPath:
    """The inbox's rail-facing app over `pool`: the webhook endpoint and /healthz (an ASGI
    app: the webhook path in front of the FastAPI app, `.api`); with `applier`, webhooks are
    applied in the transaction that stores them, else stored rows wait for a worker's claim."""
    # No /openapi.json served here: the rail sends Stripe's events and reads no document of
    # ours. `.api.openapi()` still builds it (`webhook_docs`), for the contract tests.
    app = public_api("settle inbox", DESCRIPTION, openapi=False)
    add_schemas(app, webhook_docs.components())
    webhooks = Webhooks(pool, signatures, metrics, max_body_bytes, applier, clock)
    app.include_router(_webhook_routes(webhooks))
    return WebhookFastPath(app, webhooks)


class Webhooks:
    """What `POST /v1/webhooks/stripe` does with a body: verify, parse, store, answer."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        signatures: SignatureCheck,
        metrics: InboxMetrics,
        max_body_bytes: int,
        applier: StoredApplier | None,
        clock: Clock,
    ) -> None:
        self._pool, self._signatures, self._metrics = pool, signatures, metrics
        self.max_body_bytes = max_body_bytes
        self._clock = clock
        self._store = EventStore(pool, applier)
        # Each child looked up once: `labels()` on every webhook costs more than counting.
        self._received = {o: metrics.received.labels(outcome=o) for o in RECEIVED_OUTCOMES}

    async def read(
        self, chunks: AsyncIterable[bytes], declared_length: str | bytes | None
    ) -> bytes:
        """The body, capped at `max_body_bytes`; BodyTooLarge (counted) past it."""
        try:
            return await read_capped(chunks, declared_length, self.max_body_bytes)
        except BodyTooLarge:
            self._metrics.too_large.inc()
            raise

    async def receive(self, body: bytes, signature: str | None) -> bytes:
        """The 200 answer's body once the event is stored (or known); InboxError otherwise."""
        metrics = self._metrics
        try:
            self._signatures.verify(body, signature)
        except InboxError as e:
            metrics.bad_signatures.labels(reason=e.code).inc()
            raise
        try:
            try:
                event = parse_event(body)
            except MalformedEvent as e:
                await store_rejected(self._pool, body, e.message, self._clock())
                self._received["rejected"].inc()
                raise
            stored, status = await self._store.store(event, body, self._clock())
        except STORE_FAILURES as e:
            raise StoreUnavailable("the inbox cannot store events right now; retry") from e
        if not stored:
            self._received["duplicate"].inc()
            metrics.duplicates.inc()
            return _dumps({"received": event.event_id, "duplicate": True})
        self._received["stored" if status is InboxStatus.RECEIVED else "ignored"].inc()
        return _dumps({"received": event.event_id, "duplicate": False, "status": str(status)})


class WebhookFastPath:
    """Serves `POST /v1/webhooks/stripe` as plain ASGI, in front of FastAPI's middleware,
    routing, dependency and exception layers, which cost more CPU than the webhook's own work;
    the answers are the ones the documented route gives. Everything else goes to `api`."""

    def __init__(self, api: FastAPI, webhooks: Webhooks) -> None:
        self.api = api
        self._app: ASGIApp = api
        self._webhooks = webhooks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != WEBHOOK_PATH or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        # A client gone before its body came gets nothing: the rail redelivers.
        await answer_json(send, self._answer(scope, receive))

    async def _answer(self, scope: Scope, receive: Receive) -> JsonAnswer:
        headers = first_headers(scope, _WEBHOOK_HEADERS)
        body = await self._webhooks.read(asgi_body_chunks(receive), headers.get(_LENGTH))
        return 200, await self._webhooks.receive(body, headers.get(_SIGNATURE)), {}


def _webhook_routes(webhooks: Webhooks) -> APIRouter:
    router = APIRouter(tags=["webhooks"])

    # Served by WebhookFastPath; declared here for the OpenAPI document and any other mount.
    @router.post(
        WEBHOOK_PATH,
        summary="Receive one signed rail event",
        operation_id=webhook_docs.OPERATION_ID,
        response_class=Response,
        openapi_extra=webhook_docs.webhook_extra(webhooks.max_body_bytes),
        responses=webhook_docs.webhook_responses(),
    )
    async def stripe_webhook(request: Request) -> Response:
        body = await webhooks.read(request.stream(), request.headers.get("content-length"))
        signature = request.headers.get("stripe-signature")
        return Response(await webhooks.receive(body, signature), media_type=JSON)

    return router


def readiness_routes(pool: asyncpg.Pool) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/readyz", summary="PostgreSQL answers")
    async def readyz() -> Response:
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                ok = await pool.fetchval("SELECT true") is True
        except STORE_FAILURES:
            ok = False
        return _json({"postgres": ok}, 200 if ok else 503)

    return router

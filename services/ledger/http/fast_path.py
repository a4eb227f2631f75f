"""POST /v1/settlements as plain ASGI, in front of the FastAPI app that serves everything else.

FastAPI's middleware, routing, dependency and exception layers cost the ledger more CPU per
request than validating and booking the settlement. The fast path calls the same
`CreateSettlement` the documented route calls and answers with the same status, headers and
bytes (`platform.edge.answer_json` renders failures as the app's error handlers do).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from services.domain.trace_context import carried
from services.ledger.http.settlements import CreateSettlement, accepted_headers
from services.ledger.intake import PATH
from services.platform.edge import (
    JsonAnswer,
    answer_json,
    asgi_body_chunks,
    error_body,
    first_headers,
    send_json,
)
from services.platform.tracing import TRACEPARENT, TRACESTATE

_AUTHORIZATION, _KEY, _LENGTH = b"authorization", b"idempotency-key", b"content-length"
_TRACEPARENT, _TRACESTATE = TRACEPARENT.encode(), TRACESTATE.encode()
_HEADERS = frozenset({_AUTHORIZATION, _KEY, _LENGTH, _TRACEPARENT, _TRACESTATE})
# Starlette's 405 would name only the first route on the path (POST) in `Allow`; the list's
# GET lives on the same path, so its 405 is answered here with every method the path serves.
_READS = frozenset({"GET", "HEAD"})
_ALLOW = {"Allow": "GET, HEAD, POST"}
_NOT_ALLOWED = error_body("method_not_allowed", "Method Not Allowed")


class SettlementFastPath:
    """Serves `POST /v1/settlements` (and the path's 405s) itself; every other request goes
    to `api`."""

    def __init__(self, api: FastAPI, create: CreateSettlement) -> None:
        self.api = api
        self._app: ASGIApp = api
        self._create = create

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] in _READS:
            await self._app(scope, receive, send)
        elif scope["method"] == "POST":
            await answer_json(send, self._answer(scope, receive))
        else:
            await send_json(send, 405, _NOT_ALLOWED, _ALLOW)

    async def _answer(self, scope: Scope, receive: Receive) -> JsonAnswer:
        headers = first_headers(scope, _HEADERS)
        result = await self._create.book(
            headers.get(_AUTHORIZATION),
            headers.get(_KEY),
            asgi_body_chunks(receive),
            headers.get(_LENGTH),
            carried(headers.get(_TRACEPARENT), headers.get(_TRACESTATE)),
        )
        return result.status, result.body, accepted_headers(result)

"""Operator actions over HTTP, for a service to mount: `routes(...)` gives Starlette routes.

    GET  /v1/review                      settlements under review (?after=<id>&limit=)
    GET  /v1/review/{id}                 one settlement with its rail instruction
    POST /v1/review/{id}/resolve         {"as": "paid|failed|retry", "reason": "..."}
    GET  /v1/breaks                      breaks (?status=&type=&after=&limit=)
    GET  /v1/breaks/export               open breaks streamed (?format=csv|jsonl&type=)
    GET  /v1/breaks/{id}                 one break
    POST /v1/breaks/{id}/resolve         {"reason": "..."}

Every route takes `Authorization: Bearer <operator token>` (SETTLE_OPERATOR_TOKENS); the
token's name is the operator the audit row names. No token or an unknown one is 401, a
tenant's API token 403. Errors leave in the shared edge's shape with a status and a code.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

import asyncpg
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from services.operations import breaks, review
from services.operations.errors import BadRequest, Forbidden, ReasonMissing
from services.operations.export import ExportFormat, export_open
from services.operations.rail_lookup import RailLookup
from services.shared.domain.breaks import BreakStatus, BreakType
from services.shared.domain.instruction import Resolution
from services.shared.edge import (
    JSON,
    BearerAuth,
    Unauthorized,
    api_error_response,
    read_capped_body,
)
from services.shared.errors import ApiError

MAX_BODY = 16_384
FORBIDDEN = "a tenant's token; operator actions need an operator token (SETTLE_OPERATOR_TOKENS)"
Clock = Callable[[], datetime]
Handler = Callable[[Request, str], Awaitable[Response]]  # request, operator -> response
Endpoint = Callable[[Request], Awaitable[Response]]
_E = TypeVar("_E", bound=StrEnum)


def _now() -> datetime:
    return datetime.now(UTC)


def _json(document: object, status: int = 200) -> Response:
    return Response(json.dumps(document, sort_keys=True), status, media_type=JSON)


def _choice(kind: type[_E], value: str | None, name: str) -> _E | None:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(k.value for k in kind)
        raise BadRequest(
            f"{name} must be one of {allowed}", code=f"invalid_{name}", field=name
        ) from None


def _int(value: str | None, name: str, default: int) -> int:
    if value is None:
        return default
    if not value.isdigit() or len(value) > 18:
        raise BadRequest(f"{name} must be a whole number", code=f"invalid_{name}", field=name)
    return int(value)


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await read_capped_body(request, MAX_BODY) or b"{}")
    except ValueError as e:
        raise BadRequest("the body must be a JSON object", code="invalid_body") from e
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", code="invalid_body")
    return body


def _reason(body: dict[str, Any]) -> str:
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ReasonMissing()
    return reason


def _guarded(operators: BearerAuth, tenants: BearerAuth | None, handler: Handler) -> Endpoint:
    """`handler` behind the operator token, every ApiError answered in the edge's shape."""

    async def endpoint(request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        try:
            try:
                operator = operators.tenant_for(token)
            except Unauthorized:
                if tenants is not None and token:
                    tenants.tenant_for(token)  # a tenant's token: known, but not an operator's
                    raise Forbidden(FORBIDDEN) from None
                raise
            return await handler(request, operator)
        except ApiError as e:
            return api_error_response(e)

    return endpoint


def routes(
    pool: asyncpg.Pool,
    rail: RailLookup,
    operators: BearerAuth,
    tenants: BearerAuth | None = None,
    clock: Clock = _now,
) -> list[Route]:
    """The operator routes (see the module docstring), for a Starlette or FastAPI app."""
    handlers = [*_review_routes(pool, rail, clock), *_break_routes(pool, clock)]
    return [
        Route(path, _guarded(operators, tenants, handler), methods=[method])
        for path, method, handler in handlers
    ]


def _review_routes(
    pool: asyncpg.Pool, rail: RailLookup, clock: Clock
) -> list[tuple[str, str, Handler]]:
    async def review_list(request: Request, _: str) -> Response:
        q = request.query_params
        after = review.parse_id(q["after"]) if "after" in q else None
        items = await review.list_review(pool, after, _int(q.get("limit"), "limit", 50))
        return _json({"data": items, "next_after": items[-1]["id"] if items else None})

    async def review_show(request: Request, _: str) -> Response:
        return _json(await review.show(pool, request.path_params["id"]))

    async def review_resolve(request: Request, operator: str) -> Response:
        body = await _body(request)
        resolution = _choice(Resolution, body.get("as"), "as")
        if resolution is None:
            raise BadRequest('say how: "as": paid, failed or retry', code="invalid_as", field="as")
        async with pool.acquire() as conn:
            done = await review.resolve(
                conn, rail, request.path_params["id"], resolution, reason=_reason(body),
                operator=operator, now=clock(),
            )  # fmt: skip
        return _json(done._asdict())

    return [
        ("/v1/review", "GET", review_list),
        ("/v1/review/{id}", "GET", review_show),
        ("/v1/review/{id}/resolve", "POST", review_resolve),
    ]


def _break_routes(pool: asyncpg.Pool, clock: Clock) -> list[tuple[str, str, Handler]]:
    async def breaks_list(request: Request, _: str) -> Response:
        q = request.query_params
        found = await breaks.list_breaks(
            pool, after=_int(q.get("after"), "after", 0), limit=_int(q.get("limit"), "limit", 100),
            status=_choice(BreakStatus, q.get("status"), "status"),
            break_type=_choice(BreakType, q.get("type"), "type"),
        )  # fmt: skip
        data = [breaks.break_document(b) for b in found]
        return _json({"data": data, "next_after": found[-1].id if found else None})

    async def breaks_show(request: Request, _: str) -> Response:
        found = await breaks.show_break(pool, request.path_params["id"])
        return _json(breaks.break_document(found))

    async def breaks_resolve(request: Request, operator: str) -> Response:
        reason = _reason(await _body(request))
        async with pool.acquire() as conn:
            done = await breaks.resolve_break(
                conn, request.path_params["id"], reason=reason, operator=operator, now=clock()
            )
        return _json(breaks.break_document(done))

    async def breaks_export(request: Request, _: str) -> Response:
        q = request.query_params
        fmt = _choice(ExportFormat, q.get("format", "jsonl"), "format") or ExportFormat.JSONL
        break_type = _choice(BreakType, q.get("type"), "type")
        media = "text/csv" if fmt is ExportFormat.CSV else "application/x-ndjson"
        return StreamingResponse(_streamed(pool, fmt, break_type), media_type=media)

    # The export before {id}: Starlette matches routes in order.
    return [
        ("/v1/breaks", "GET", breaks_list),
        ("/v1/breaks/export", "GET", breaks_export),
        ("/v1/breaks/{id}", "GET", breaks_show),
        ("/v1/breaks/{id}/resolve", "POST", breaks_resolve),
    ]


async def _streamed(
    pool: asyncpg.Pool, fmt: ExportFormat, break_type: BreakType | None
) -> AsyncIterator[str]:
    async with pool.acquire() as conn:
        async for line in export_open(conn, fmt, break_type=break_type):
            yield line

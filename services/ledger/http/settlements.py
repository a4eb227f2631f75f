"""POST /v1/settlements (idempotent booking) and the settlement reads."""

# No `from __future__ import annotations`: FastAPI must see the route-local `Tenant` alias
# as an object, not as a string it would try to resolve in module globals.

from collections.abc import AsyncIterable
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from opentelemetry.trace import SpanKind
from pydantic import TypeAdapter

from services.domain.errors import ApiError
from services.domain.settlement import SettlementStatus
from services.domain.trace_context import TraceContext, carried
from services.ledger.admission import Admission
from services.ledger.errors import InvalidRequest, Overloaded, RateLimited
from services.ledger.http import docs
from services.ledger.http.readers import READ_LIMITED, Reader
from services.ledger.intake import MAX_BODY_BYTES, parse_settlement_body, validate_idempotency_key
from services.ledger.metrics import LedgerMetrics
from services.ledger.model import AcceptResult, Outcome
from services.ledger.ports import Acceptor
from services.ledger.views import MAX_PAGE, Settlement, SettlementPage, SettlementReader
from services.platform.bearer import BearerAuth, Unauthorized, bearer_scheme, bearer_token
from services.platform.edge import JSON, BodyTooLarge, error_response, read_capped
from services.platform.tracing import TRACEPARENT, TRACESTATE, traced

_SETTLEMENT = TypeAdapter(Settlement)
_PAGE = TypeAdapter(SettlementPage)


def accepted_headers(result: AcceptResult) -> dict[str, str]:
    """The headers the stored response goes out with, beyond the JSON ones."""
    headers: dict[str, str] = {}
    if result.outcome is Outcome.REPLAYED:
        headers["Idempotent-Replayed"] = "true"
    if result.retry_after is not None:
        headers["Retry-After"] = str(result.retry_after)
    if result.trace is not None:
        headers[TRACEPARENT] = result.trace.traceparent
        if result.trace.tracestate:
            headers[TRACESTATE] = result.trace.tracestate
    return headers


def accepted_response(result: AcceptResult) -> Response:
    """The stored response, sent as its exact bytes so a replay is byte-identical."""
    return Response(result.body, result.status, accepted_headers(result), media_type=JSON)


# The POST reads its two headers itself rather than through FastAPI's dependency solver,
# which cost more CPU per request than validating and booking the settlement; the OpenAPI
# document still names them.
_CREATE_DOCS: dict[str, Any] = {
    **docs.REQUEST_BODY,
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": True,
            "description": docs.IDEMPOTENCY_KEY,
            "schema": {**docs.IDEMPOTENCY_KEY_SCHEMA, "title": "Idempotency-Key"},
        }
    ],
    "security": [{bearer_scheme.scheme_name: []}],
}

_CREATE_RESPONSES: dict[int | str, dict[str, Any]] = {
    201: docs.replayable("The settlement booked (or the first response, replayed)."),
    **docs.errors(
        400,
        401,
        409,
        410,
        413,
        422,
        429,
        503,
        s409="`idempotency_key_in_use` (with Retry-After) or `duplicate_reference`.",
        s410="`idempotency_key_expired`: older than the replay window.",
        s413="`body_too_large`.",
        s422="`idempotency_key_reused` with a different body; `amount_over_limit` or"
        " `destination_not_allowed` by the tenant's limits; `insufficient_funds` for a"
        " pre-funded tenant; `unbookable`. Nothing was booked.",
        s429="`rate_limited`: over the tenant's request rate; retry after `Retry-After`.",
        s503="`overloaded` (the ledger holds as many requests as it may) or"
        " `store_unavailable`; retry after `Retry-After` seconds.",
    ),
}


class CreateSettlement:
    """What POST /v1/settlements does with a request, whichever layer serves it: authenticate,
    admit (backlog, rate), validate, check the tenant's limits, book, count the outcome."""

    def __init__(
        self,
        acceptor: Acceptor,
        auth: BearerAuth,
        metrics: LedgerMetrics,
        admission: Admission | None = None,
    ) -> None:
        self._acceptor, self._auth, self._metrics = acceptor, auth, metrics
        self._admission = admission if admission is not None else Admission()

    async def book(
        self,
        authorization: str | None,
        idempotency_key: str | None,
        body: AsyncIterable[bytes],
        content_length: str | None,
        trace: TraceContext | None = None,
    ) -> AcceptResult:
        """The acceptor's answer to the request, with the settlement's trace (a replay's is
        the first request's; any other answer's is this request's, continuing `trace`);
        ApiError (counted) when it cannot be booked."""
        metrics, admission = self._metrics, self._admission
        tenant: str | None = None
        try:
            with traced("settlement.accept", trace, SpanKind.SERVER) as accepted:
                tenant = self._auth.tenant_for(bearer_token(authorization))
                # Refused before the body is read: an overloaded ledger holds nothing more.
                with admission.backlog.admit():
                    admission.throttle(tenant)
                    key = validate_idempotency_key(idempotency_key)
                    raw = await read_capped(body, content_length, MAX_BODY_BYTES)
                    parsed = parse_settlement_body(tenant, key, raw, accepted)
                    settlement = admission.check(parsed)
                    with metrics.accept_seconds.time():
                        result = await self._acceptor.accept(settlement)
        except ApiError as e:
            metrics.count_request(_outcome_of(e), tenant)
            if e.status == 503:
                metrics.count_fail_closed("backlog" if isinstance(e, Overloaded) else "postgresql")
            raise
        metrics.count_request(result.outcome.value, tenant)
        # A booked settlement's answer carries its trace already; a refusal gets this one.
        return result if result.trace is not None else replace(result, trace=accepted)


def settlement_routes(
    create: CreateSettlement, reads: SettlementReader, reader: Reader
) -> APIRouter:
    """The /v1/settlements routes over `create` (writes) and `reads`, for the tenant
    `reader` gives."""
    router = APIRouter(prefix="/v1/settlements", tags=["settlements"])
    _route_create(router, create)
    _route_reads(router, reads, reader)
    return router


def _route_create(router: APIRouter, create: CreateSettlement) -> None:
    # Served by SettlementFastPath in front of the app; declared here for the OpenAPI
    # document and for any mount without the fast path.
    @router.post(
        "",
        summary="Book a settlement, idempotently",
        status_code=201,
        response_class=Response,
        openapi_extra=_CREATE_DOCS,
        responses=_CREATE_RESPONSES,
    )
    async def create_settlement(request: Request) -> Response:
        headers = request.headers
        result = await create.book(
            headers.get("authorization"),
            headers.get("idempotency-key"),
            request.stream(),
            headers.get("content-length"),
            carried(headers.get(TRACEPARENT), headers.get(TRACESTATE)),
        )
        return accepted_response(result)


def _route_reads(router: APIRouter, reads: SettlementReader, reader: Reader) -> None:
    Tenant = Annotated[str, Depends(reader)]

    @router.get(
        "/{settlement_id}",
        summary="A settlement with its history and postings",
        response_model=Settlement,
        responses=docs.errors(401, 404, 429, 503, s429=READ_LIMITED),
    )
    async def get_settlement(tenant: Tenant, settlement_id: str) -> Response:
        found = await reads.settlement(tenant, settlement_id)
        if found is None:
            return error_response(404, "not_found", "no such settlement")
        return Response(_SETTLEMENT.dump_json(found), media_type=JSON)

    @router.get(
        "",
        summary="The tenant's settlements, newest first",
        response_model=SettlementPage,
        responses=docs.errors(400, 401, 429, 503, s429=READ_LIMITED),
    )
    async def list_settlements(
        tenant: Tenant,
        reference: str | None = None,
        status: SettlementStatus | None = None,
        cursor: Annotated[docs.SettlementsCursor | None, Query(description=docs.CURSOR)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    ) -> Response:
        page = await reads.settlements(
            tenant,
            reference=reference,
            status=None if status is None else status.value,
            cursor=cursor,
            limit=limit,
        )
        return Response(_PAGE.dump_json(page), media_type=JSON)


def _outcome_of(error: ApiError) -> str:
    if isinstance(error, Unauthorized):
        return "unauthorized"
    if isinstance(error, InvalidRequest | BodyTooLarge):
        return "invalid"
    if isinstance(error, RateLimited):
        return "rate_limited"
    if isinstance(error, Overloaded):
        return "overloaded"
    # StoreUnavailable, and any other ledger failure: nothing was booked on our side.
    return "unavailable"

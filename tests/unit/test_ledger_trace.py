"""POST /v1/settlements continues the caller's W3C trace: the request is booked under it and
answered with `traceparent`; a replay answers with the trace the settlement was booked
under, whatever trace the retry came with. Both ways of serving the route do so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp

from services.domain.trace_context import TraceContext
from services.ledger.http import create_app
from services.ledger.http.fast_path import SettlementFastPath
from services.ledger.http.settlements import CreateSettlement
from services.ledger.metrics import create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.platform.bearer import BearerAuth
from services.platform.tracing import trace_id_of
from tests.unit.test_ledger_fast_path import AUTH, BODY, SETTINGS
from tests.unit.test_ledger_http import FakeReads

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
BOOKED = TraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "v=1")


@dataclass
class TracedAcceptor:
    """Books each key once under the request's trace; a replay gets the first one's."""

    seen: list[SettlementRequest] = field(default_factory=list)
    booked: dict[str, TraceContext | None] = field(default_factory=dict)

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        self.seen.append(request)
        if request.idempotency_key in self.booked:
            trace = self.booked[request.idempotency_key]
            return AcceptResult(Outcome.REPLAYED, 201, b"{}", "s-1", trace=trace)
        self.booked[request.idempotency_key] = request.trace
        return AcceptResult(Outcome.CREATED, 201, b"{}", "s-1", trace=request.trace)

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        return [await self.accept(r) for r in requests]


def fast_path(acceptor: TracedAcceptor) -> ASGIApp:
    metrics = create_metrics(tenants=SETTINGS.api_tokens)
    create = CreateSettlement(acceptor, BearerAuth(SETTINGS.tenant_by_token), metrics)
    return SettlementFastPath(FastAPI(), create)


def route(acceptor: TracedAcceptor) -> ASGIApp:
    metrics = create_metrics(tenants=SETTINGS.api_tokens)
    return create_app(acceptor, FakeReads(), SETTINGS, metrics=metrics).api


SERVINGS = pytest.mark.parametrize("serve", [fast_path, route], ids=["fast path", "route"])


async def post(app: ASGIApp, key: str, **trace: str) -> httpx.Response:
    headers = {k: v for k, v in AUTH.items() if k != "traceparent"} | trace
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        return await client.post(
            "/v1/settlements", json=BODY, headers={**headers, "Idempotency-Key": key}
        )


@SERVINGS
async def test_the_callers_trace_is_booked_and_answered(
    serve: Callable[[TracedAcceptor], ASGIApp],
) -> None:
    acceptor = TracedAcceptor()
    answer = await post(serve(acceptor), "k-1", traceparent=CALLER, tracestate="vendor=x")
    [booked] = acceptor.seen
    assert booked.trace is not None
    assert trace_id_of(booked.trace) == trace_id_of(CALLER)
    assert booked.trace.tracestate == "vendor=x"
    assert answer.headers["traceparent"] == booked.trace.traceparent
    assert answer.headers["tracestate"] == "vendor=x"


@SERVINGS
@pytest.mark.parametrize("sent", [{}, {"traceparent": "00-bad-bad-01"}], ids=["none", "invalid"])
async def test_without_a_valid_traceparent_a_new_trace_is_booked_and_answered(
    serve: Callable[[TracedAcceptor], ASGIApp], sent: dict[str, str]
) -> None:
    acceptor = TracedAcceptor()
    first = await post(serve(acceptor), "k-1", **sent)
    second = await post(serve(acceptor), "k-2", **sent)
    assert [r.trace.traceparent for r in acceptor.seen if r.trace] == [
        first.headers["traceparent"],
        second.headers["traceparent"],
    ]
    assert trace_id_of(first.headers["traceparent"]) != trace_id_of(second.headers["traceparent"])
    assert trace_id_of(first.headers["traceparent"]) is not None


@SERVINGS
async def test_a_replay_answers_with_the_trace_the_settlement_was_booked_under(
    serve: Callable[[TracedAcceptor], ASGIApp],
) -> None:
    acceptor = TracedAcceptor(booked={"k-1": BOOKED})
    answer = await post(serve(acceptor), "k-1", traceparent=CALLER)
    assert answer.headers["idempotent-replayed"] == "true"
    assert answer.headers["traceparent"] == BOOKED.traceparent
    assert answer.headers["tracestate"] == BOOKED.tracestate

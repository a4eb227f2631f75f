"""POST /v1/settlements served by the plain ASGI fast path answers exactly as the documented
FastAPI route does: each request goes to both, each over its own fresh acceptor and metrics,
and status, every header in order, body bytes and counted outcomes must be equal."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp

from services.domain.errors import StoreUnavailable
from services.ledger.answers import in_use_result
from services.ledger.http import create_app
from services.ledger.http.fast_path import SettlementFastPath
from services.ledger.http.settlements import CreateSettlement
from services.ledger.intake import MAX_BODY_BYTES
from services.ledger.metrics import REQUEST_OUTCOMES, create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.ledger.responses import canonical_json
from services.platform.bearer import BearerAuth
from services.platform.edge import error_body
from services.platform.settings import load_settings
from tests.unit.test_ledger_http import FakeReads

TOKEN = "tok-acme"
SETTINGS = load_settings({"SETTLE_API_TOKENS": f"acme:{TOKEN},other:tok-other"})
# Both continue one caller's trace, so the traceparent each answers with is the same.
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
AUTH = {
    "Authorization": f"Bearer {TOKEN}",
    "Content-Type": "application/json",
    "traceparent": TRACEPARENT,
}
BODY = {
    "reference": "r-1",
    "payee": "p",
    "destination": "acct_1",
    "amount": 1050,
    "currency": "EUR",
}
BUSY_KEY = "busy"  # the acceptor answers this key as still in flight


@dataclass
class KeyedAcceptor:
    """Books each tenant and key once; the same request again replays the first answer, another
    request under the key is refused with 422, as the books do."""

    error: Exception | None = None
    first: dict[tuple[str, str], tuple[bytes, bytes]] = field(default_factory=dict)

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        if self.error is not None:
            raise self.error
        if request.idempotency_key == BUSY_KEY:
            return in_use_result()
        key = (request.tenant, request.idempotency_key)
        if key not in self.first:
            body = canonical_json({"id": f"s-{len(self.first)}", "amount": request.amount})
            self.first[key] = (request.fingerprint, body)
            return AcceptResult(Outcome.CREATED, 201, body, f"s-{len(self.first)}")
        fingerprint, body = self.first[key]
        if fingerprint == request.fingerprint:
            return AcceptResult(Outcome.REPLAYED, 201, body)
        refused = error_body("idempotency_key_reused", "used with another body", "Idempotency-Key")
        return AcceptResult(Outcome.MISMATCH, 422, refused)

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        return [await self.accept(r) for r in requests]


@dataclass
class Served:
    """One way of serving the API, over its own acceptor and metrics registry."""

    app: ASGIApp
    acceptor: KeyedAcceptor
    registry: CollectorRegistry


def fast_path_alone() -> Served:
    # In front of an app with no routes: every answer below is the fast path's own.
    acceptor, metrics = KeyedAcceptor(), create_metrics(tenants=SETTINGS.api_tokens)
    create = CreateSettlement(acceptor, BearerAuth(SETTINGS.tenant_by_token), metrics)
    return Served(SettlementFastPath(FastAPI(), create), acceptor, metrics.registry)


def fastapi_route() -> Served:
    acceptor, metrics = KeyedAcceptor(), create_metrics(tenants=SETTINGS.api_tokens)
    app = create_app(acceptor, FakeReads(), SETTINGS, metrics=metrics)
    return Served(app.api, acceptor, metrics.registry)


Content = bytes | Callable[[], AsyncIterator[bytes]]
Request = tuple[dict[str, str], Content]


def request(key: str | None = "k-1", body: object = BODY, **headers: str) -> Request:
    sent = {**AUTH, **({} if key is None else {"Idempotency-Key": key})}
    sent.update({name.replace("_", "-"): value for name, value in headers.items()})
    return sent, body if isinstance(body, bytes) else json.dumps(body).encode()


def changed(**fields: object) -> dict[str, object]:
    return {**BODY, **fields}


def chunked_over_limit() -> AsyncIterator[bytes]:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 1000 + 2):
            yield b" " * 1000

    return chunks()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


async def answers(served: Served, requests: list[Request]) -> list[Answer]:
    transport = httpx.ASGITransport(app=served.app, raise_app_exceptions=False)
    out = []
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        for headers, content in requests:
            body = content if isinstance(content, bytes) else content()
            response = await client.post("/v1/settlements", content=body, headers=headers)
            out.append(Answer(response.status_code, response.headers.raw, response.content))
    return out


def counted(registry: CollectorRegistry) -> dict[str, float | None]:
    tenants = [*SETTINGS.api_tokens, "unknown"]
    samples = {
        f"{o} {t}": registry.get_sample_value(
            "settle_ledger_requests_total", {"outcome": o, "tenant": t}
        )
        for o in REQUEST_OUTCOMES
        for t in tenants
    }
    for t in tenants:
        samples[f"mismatch {t}"] = registry.get_sample_value(
            "settle_ledger_fingerprint_mismatches_total", {"tenant": t}
        )
    for reason in ("postgresql", "backlog"):
        samples[reason] = registry.get_sample_value(
            "settle_ledger_fail_closed_total", {"reason": reason}
        )
    samples["timed"] = registry.get_sample_value("settle_ledger_accept_seconds_count")
    return samples


CASES: dict[str, list[Request]] = {
    "created": [request()],
    "replayed": [request(), request()],
    "key reused with another body": [request(), request(body=changed(amount=2000))],
    "key in flight": [request(key=BUSY_KEY)],
    "missing token": [request(Authorization="")],
    "unknown token": [request(Authorization="Bearer nope")],
    "other scheme": [request(Authorization=f"Basic {TOKEN}")],
    "missing key": [request(key=None)],
    "invalid key": [request(key=" padded")],
    "invalid json": [request(body=b"{")],
    "duplicate json key": [request(body=b'{"amount": 1, "amount": 2}')],
    "not an object": [request(body=b"[]")],
    "not utf-8": [request(body=b"\xff\xfe")],
    "fractional amount": [request(body=changed(amount=100.5))],
    "amount as text": [request(body=changed(amount="100"))],
    "lower-case currency": [request(body=changed(currency="usd"))],
    "text field not a string": [request(body=changed(payee=None))],
    "control character": [request(body=changed(destination="a\nb"))],
    "unknown rail": [request(body=changed(rail="swift"))],
    "metadata value": [request(body=changed(metadata={"k": 1}))],
    "metadata key": [request(body=changed(metadata={"[k]": "v"}))],
    "missing field": [request(body={k: v for k, v in BODY.items() if k != "payee"})],
    "unknown field": [request(body=changed(tenant="other"))],
    "declared length over the limit": [request(body=b" " * (MAX_BODY_BYTES + 1))],
    "chunked body over the limit": [(request()[0], chunked_over_limit)],
    "body of exactly the limit": [request(body=json.dumps(BODY).encode().ljust(MAX_BODY_BYTES))],
}


@pytest.mark.parametrize("requests", CASES.values(), ids=CASES.keys())
async def test_the_fast_path_answers_as_the_route_does(requests: list[Request]) -> None:
    fast, route = fast_path_alone(), fastapi_route()
    assert await answers(fast, requests) == await answers(route, requests)
    assert counted(fast.registry) == counted(route.registry)


@pytest.mark.parametrize(
    "error", [StoreUnavailable("PostgreSQL did not answer"), RuntimeError("a bug")]
)
async def test_a_failing_acceptor_gets_the_same_answer_on_both(error: Exception) -> None:
    fast, route = fast_path_alone(), fastapi_route()
    fast.acceptor.error = route.acceptor.error = error
    [fast_answer] = await answers(fast, [request()])
    assert fast_answer == (await answers(route, [request()]))[0]
    assert fast_answer.status in (500, 503)
    assert counted(fast.registry) == counted(route.registry)


async def test_the_served_app_takes_the_post_and_hands_everything_else_on() -> None:
    acceptor = KeyedAcceptor()
    app = create_app(acceptor, FakeReads(), SETTINGS)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        created = await client.post("/v1/settlements", content=request()[1], headers=request()[0])
        listed = await client.get("/v1/settlements", headers=AUTH)
        slash = await client.post("/v1/settlements/", content=b"{}", headers=AUTH)
    assert (created.status_code, list(acceptor.first)) == (201, [("acme", "k-1")])
    assert listed.status_code == 200
    # FastAPI's own redirect to the path without the slash: the fast path takes one exact path.
    assert slash.status_code == 307

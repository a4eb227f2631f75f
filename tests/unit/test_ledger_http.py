"""The ledger's HTTP API over fake ports: auth, body limits, byte-exact responses, errors,
operational endpoints and the OpenAPI document. No I/O beyond the in-process ASGI app."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.domain.errors import StoreUnavailable
from services.ledger.errors import InvalidRequest
from services.ledger.http import create_admin_app, create_app
from services.ledger.intake import MAX_BODY_BYTES
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.ledger.views import (
    AccountBalance,
    EntryPage,
    Settlement,
    SettlementPage,
    SettlementSummary,
    Transition,
)
from services.platform.settings import load_settings

TOKEN = "tok-acme"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HEADERS = {**AUTH, "Idempotency-Key": "key-1"}
BODY = {
    "reference": "ref-1",
    "payee": "payee-1",
    "destination": "acct_1",
    "amount": 1050,
    "currency": "USD",
}
# Deliberately not what json.dumps would produce: the API must send these bytes as they are.
STORED = b'{ "id":"s-1",  "status" : "accepted" }'
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@dataclass
class FakeAcceptor:
    """Answers every request with `result`, or raises `error`; records what it was asked."""

    result: AcceptResult = field(
        default_factory=lambda: AcceptResult(Outcome.CREATED, 201, STORED, "s-1")
    )
    error: Exception | None = None
    seen: list[SettlementRequest] = field(default_factory=list)

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        self.seen.append(request)
        if self.error is not None:
            raise self.error
        return self.result

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        return [await self.accept(r) for r in requests]


def _settlement(settlement_id: str = "s-1") -> Settlement:
    return Settlement(
        object="settlement",
        id=settlement_id,
        reference="ref-1",
        payee="payee-1",
        destination="acct_1",
        amount=1050,
        currency="USD",
        rail="sim",
        metadata={},
        status="accepted",
        reason=None,
        version=1,
        rail_idempotency_key=None,
        rail_reference=None,
        created_at=NOW,
        updated_at=NOW,
        transitions=[Transition(1, None, "accepted", None, "ledger", NOW)],
        postings=[],
    )


@dataclass
class FakeReads:
    """Knows one settlement and one account of tenant acme; raises `error` when set."""

    error: Exception | None = None
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def _maybe_fail(self) -> None:
        if self.error is not None:
            raise self.error

    async def settlement(self, tenant: str, settlement_id: str) -> Settlement | None:
        self.calls.append(("settlement", (tenant, settlement_id)))
        self._maybe_fail()
        return _settlement() if (tenant, settlement_id) == ("acme", "s-1") else None

    async def settlements(
        self,
        tenant: str,
        *,
        reference: str | None = None,
        status: str | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> SettlementPage:
        self.calls.append(("settlements", (tenant, reference, status, cursor, limit)))
        self._maybe_fail()
        summary: SettlementSummary = _settlement()
        return SettlementPage(object="list", data=[summary], next_cursor="abc")

    async def balance(self, tenant: str, account: str) -> AccountBalance | None:
        self._maybe_fail()
        if account != f"{tenant}:funding:USD":
            return None
        return AccountBalance(account=account, currency="USD", balance=-1050)

    async def entries(
        self, tenant: str, account: str, *, cursor: str | None = None, limit: int = 20
    ) -> EntryPage | None:
        self._maybe_fail()
        if account != f"{tenant}:funding:USD":
            return None
        return EntryPage(object="list", data=[], next_cursor=None)


@dataclass
class FakeReadiness:
    components: dict[str, bool] = field(default_factory=lambda: {"postgres": True, "kafka": True})

    async def check(self) -> dict[str, bool]:
        return dict(self.components)


@dataclass
class Api:
    app: FastAPI
    client: httpx.AsyncClient  # the tenant-facing app
    admin: httpx.AsyncClient  # the admin port's app
    acceptor: FakeAcceptor
    reads: FakeReads
    readiness: FakeReadiness
    metrics: LedgerMetrics


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    settings = load_settings({"SETTLE_API_TOKENS": f"acme:{TOKEN},other:tok-other"})
    acceptor, reads, readiness = FakeAcceptor(), FakeReads(), FakeReadiness()
    metrics = create_metrics(tenants=settings.api_tokens)
    app = create_app(acceptor, reads, settings, metrics=metrics)
    admin_app = create_admin_app(readiness, metrics)
    transport = httpx.ASGITransport(app=app)
    admin_transport = httpx.ASGITransport(app=admin_app)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://ledger") as client,
        httpx.AsyncClient(transport=admin_transport, base_url="http://ledger-admin") as admin,
    ):
        yield Api(app, client, admin, acceptor, reads, readiness, metrics)


def error_of(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}, body
    return dict(body["error"])


def requests_counted(api: Api, outcome: str, tenant: str = "acme") -> float:
    value = api.metrics.registry.get_sample_value(
        "settle_ledger_requests_total", {"outcome": outcome, "tenant": tenant}
    )
    assert value is not None
    return value


# --- authentication ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": TOKEN},
    ],
    ids=["missing", "unknown", "other-scheme", "empty", "prefix-of-other", "no-scheme"],
)
async def test_post_without_a_known_token_is_401_and_books_nothing(
    api: Api, headers: dict[str, str]
) -> None:
    response = await api.client.post(
        "/v1/settlements", json=BODY, headers={**headers, "Idempotency-Key": "k"}
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert error_of(response)["code"] == "unauthorized"
    assert api.acceptor.seen == []
    assert requests_counted(api, "unauthorized", "unknown") == 1  # no tenant proven


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_post_takes_the_bearer_scheme_in_any_case(api: Api, scheme: str) -> None:
    headers = {"Authorization": f"{scheme} {TOKEN}", "Idempotency-Key": "k"}
    response = await api.client.post("/v1/settlements", json=BODY, headers=headers)
    assert response.status_code == 201
    assert [r.tenant for r in api.acceptor.seen] == ["acme"]


async def test_both_tokens_of_a_rotation_name_the_tenant() -> None:
    settings = load_settings({"SETTLE_API_TOKENS": f"acme:{TOKEN},other:tok-other,acme:tok-next"})
    acceptor = FakeAcceptor()
    app = create_app(acceptor, FakeReads(), settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        for key, token in enumerate((TOKEN, "tok-next")):
            headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": f"k{key}"}
            response = await client.post("/v1/settlements", json=BODY, headers=headers)
            assert response.status_code == 201
    assert [r.tenant for r in acceptor.seen] == ["acme", "acme"]


@pytest.mark.parametrize(
    "path", ["/v1/settlements/s-1", "/v1/settlements", "/v1/accounts/acme:funding:USD/balance"]
)
async def test_reads_without_a_known_token_are_401(api: Api, path: str) -> None:
    response = await api.client.get(path, headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert error_of(response)["code"] == "unauthorized"
    assert api.reads.calls == []


async def test_the_token_decides_the_tenant(api: Api) -> None:
    await api.client.post("/v1/settlements", json=BODY, headers=HEADERS)
    other = {"Authorization": "Bearer tok-other", "Idempotency-Key": "key-1"}
    await api.client.post("/v1/settlements", json=BODY, headers=other)
    assert [r.tenant for r in api.acceptor.seen] == ["acme", "other"]


# --- request validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "code"),
    [
        (None, "missing_idempotency_key"),
        ("x" * 256, "invalid_idempotency_key"),
        (" padded", "invalid_idempotency_key"),
    ],
)
async def test_a_missing_or_bad_idempotency_key_is_400(
    api: Api, key: str | None, code: str
) -> None:
    headers = dict(AUTH) if key is None else {**AUTH, "Idempotency-Key": key}
    response = await api.client.post("/v1/settlements", json=BODY, headers=headers)
    assert response.status_code == 400
    assert error_of(response) | {"message": ""} == {
        "code": code,
        "field": "Idempotency-Key",
        "message": "",
    }
    assert api.acceptor.seen == []
    assert requests_counted(api, "invalid") == 1


@pytest.mark.parametrize(
    ("change", "code", "field_name"),
    [
        ({"amount": 100.5}, "invalid_amount", "amount"),
        ({"amount": -5}, "invalid_amount", "amount"),
        ({"amount": "100"}, "invalid_amount", "amount"),
        ({"currency": "usd"}, "invalid_currency", "currency"),
        ({"payee": None}, "invalid_field", "payee"),
        ({"tenant": "other"}, "unknown_field", "tenant"),
    ],
)
async def test_an_invalid_body_is_400_naming_the_field(
    api: Api, change: dict[str, object], code: str, field_name: str
) -> None:
    response = await api.client.post("/v1/settlements", json=BODY | change, headers=HEADERS)
    assert response.status_code == 400
    error = error_of(response)
    assert (error["code"], error["field"]) == (code, field_name)
    assert api.acceptor.seen == []


async def test_a_missing_field_is_400_naming_it(api: Api) -> None:
    body = {k: v for k, v in BODY.items() if k != "payee"}
    response = await api.client.post("/v1/settlements", json=body, headers=HEADERS)
    assert response.status_code == 400
    assert (error_of(response)["code"], error_of(response)["field"]) == ("missing_field", "payee")


@pytest.mark.parametrize("raw", [b"{", b"[]", b"", b"\xff\xfe", b'{"amount": 1, "amount": 2}'])
async def test_malformed_json_is_400(api: Api, raw: bytes) -> None:
    response = await api.client.post("/v1/settlements", content=raw, headers=HEADERS)
    assert response.status_code == 400
    assert error_of(response)["code"] == "malformed_json"
    assert api.acceptor.seen == []


def _padded(size: int) -> bytes:
    raw = json.dumps(BODY).encode()
    return raw + b" " * (size - len(raw))


async def test_a_body_of_exactly_the_limit_is_accepted(api: Api) -> None:
    response = await api.client.post(
        "/v1/settlements", content=_padded(MAX_BODY_BYTES), headers=HEADERS
    )
    assert response.status_code == 201


async def test_a_body_over_the_limit_with_content_length_is_413(api: Api) -> None:
    response = await api.client.post(
        "/v1/settlements", content=_padded(MAX_BODY_BYTES + 1), headers=HEADERS
    )
    assert response.status_code == 413
    assert error_of(response)["code"] == "body_too_large"
    assert api.acceptor.seen == []


async def test_a_chunked_body_over_the_limit_is_413(api: Api) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 1000 + 2):
            yield b" " * 1000

    response = await api.client.post("/v1/settlements", content=chunks(), headers=HEADERS)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert error_of(response)["code"] == "body_too_large"


async def test_a_declared_length_over_the_limit_is_refused_before_reading(api: Api) -> None:
    received: list[object] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        received.append("read")
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
    headers.append((b"content-length", str(10**9).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/settlements",
        "raw_path": b"/v1/settlements",
        "query_string": b"",
        "headers": headers,
        "server": ("ledger", 80),
        "client": ("test", 1),
        "root_path": "",
    }
    await api.app(scope, receive, send)
    assert sent[0]["status"] == 413
    assert received == []


# --- the acceptor's answer, byte for byte --------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (Outcome.CREATED, 201),
        (Outcome.REPLAYED, 201),
        (Outcome.MISMATCH, 422),
        (Outcome.EXPIRED, 410),
        (Outcome.DUPLICATE_REFERENCE, 409),
    ],
)
async def test_the_stored_bytes_are_sent_exactly(api: Api, outcome: Outcome, status: int) -> None:
    api.acceptor.result = AcceptResult(outcome, status, STORED, "s-1")
    response = await api.client.post("/v1/settlements", json=BODY, headers=HEADERS)
    assert response.status_code == status
    assert response.content == STORED
    assert response.headers["content-type"] == "application/json"
    replayed = response.headers.get("idempotent-replayed")
    assert replayed == ("true" if outcome is Outcome.REPLAYED else None)
    assert "retry-after" not in response.headers
    assert requests_counted(api, outcome.value) == 1
    mismatches = api.metrics.registry.get_sample_value(
        "settle_ledger_fingerprint_mismatches_total", {"tenant": "acme"}
    )
    assert mismatches == (1 if outcome is Outcome.MISMATCH else 0)


async def test_the_request_reaches_the_acceptor_validated(api: Api) -> None:
    await api.client.post("/v1/settlements", json=BODY, headers=HEADERS)
    [request] = api.acceptor.seen
    assert (request.tenant, request.idempotency_key, request.amount) == ("acme", "key-1", 1050)
    assert len(request.fingerprint) == 32


async def test_a_key_in_use_is_409_with_retry_after(api: Api) -> None:
    body = b'{"error":{"code":"idempotency_key_in_use","message":"m","field":null}}'
    api.acceptor.result = AcceptResult(Outcome.IN_USE, 409, body, retry_after=3)
    response = await api.client.post("/v1/settlements", json=BODY, headers=HEADERS)
    assert response.status_code == 409
    assert response.headers["retry-after"] == "3"
    assert response.content == body
    assert requests_counted(api, "in_use") == 1


async def test_an_unreachable_store_is_503_with_retry_after(api: Api) -> None:
    api.acceptor.error = StoreUnavailable("PostgreSQL did not answer")
    response = await api.client.post("/v1/settlements", json=BODY, headers=HEADERS)
    assert response.status_code == 503
    assert response.headers["retry-after"] == str(StoreUnavailable.retry_after_seconds)
    assert error_of(response)["code"] == "store_unavailable"
    assert requests_counted(api, "unavailable") == 1
    closed = api.metrics.registry.get_sample_value
    assert closed("settle_ledger_fail_closed_total", {"reason": "postgresql"}) == 1
    assert closed("settle_ledger_fail_closed_total", {"reason": "backlog"}) == 0


async def test_a_failing_acceptor_is_500_never_2xx(api: Api) -> None:
    api.acceptor.error = RuntimeError("bug")
    transport = httpx.ASGITransport(app=api.app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        response = await client.post("/v1/settlements", json=BODY, headers=HEADERS)
    assert response.status_code == 500
    assert error_of(response)["code"] == "internal_error"


# --- reads --------------------------------------------------------------------------------


async def test_get_settlement_of_the_callers_tenant(api: Api) -> None:
    response = await api.client.get("/v1/settlements/s-1", headers=AUTH)
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["amount"], body["status"]) == ("s-1", 1050, "accepted")
    assert body["transitions"][0]["to_status"] == "accepted"
    assert body["created_at"] == "2026-11-25T12:00:00.000Z"
    assert api.reads.calls == [("settlement", ("acme", "s-1"))]


async def test_get_unknown_settlement_is_404(api: Api) -> None:
    response = await api.client.get("/v1/settlements/s-2", headers=AUTH)
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


async def test_list_passes_filters_and_returns_a_page(api: Api) -> None:
    response = await api.client.get(
        "/v1/settlements",
        params={"reference": "ref-1", "status": "paid", "cursor": "c", "limit": 5},
        headers=AUTH,
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["object"], body["next_cursor"], len(body["data"])) == ("list", "abc", 1)
    assert api.reads.calls == [("settlements", ("acme", "ref-1", "paid", "c", 5))]


@pytest.mark.parametrize(
    ("params", "field_name"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"status": "lost"}, "status"),
    ],
)
async def test_bad_list_parameters_are_400_naming_them(
    api: Api, params: dict[str, object], field_name: str
) -> None:
    response = await api.client.get("/v1/settlements", params=params, headers=AUTH)
    assert response.status_code == 400
    error = error_of(response)
    assert (error["code"], error["field"]) == (f"invalid_{field_name}", field_name)


async def test_a_bad_cursor_from_the_reads_is_400(api: Api) -> None:
    api.reads.error = InvalidRequest("bad", code="invalid_cursor", field="cursor")
    response = await api.client.get("/v1/settlements", params={"cursor": "x"}, headers=AUTH)
    assert response.status_code == 400
    assert (error_of(response)["code"], error_of(response)["field"]) == ("invalid_cursor", "cursor")


async def test_reads_fail_closed_with_503(api: Api) -> None:
    api.reads.error = StoreUnavailable("down")
    response = await api.client.get("/v1/settlements/s-1", headers=AUTH)
    assert response.status_code == 503
    assert "retry-after" in response.headers
    assert error_of(response)["code"] == "store_unavailable"


async def test_balance_of_own_account_and_404_for_another(api: Api) -> None:
    own = await api.client.get("/v1/accounts/acme:funding:USD/balance", headers=AUTH)
    assert own.json() == {"account": "acme:funding:USD", "currency": "USD", "balance": -1050}
    foreign = await api.client.get("/v1/accounts/other:funding:USD/balance", headers=AUTH)
    assert foreign.status_code == 404
    assert error_of(foreign)["code"] == "not_found"
    entries = await api.client.get("/v1/accounts/other:funding:USD/entries", headers=AUTH)
    assert entries.status_code == 404


async def test_unknown_routes_answer_in_the_error_shape(api: Api) -> None:
    response = await api.client.get("/v1/nothing", headers=AUTH)
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


# --- operations ---------------------------------------------------------------------------


async def test_healthz_is_200_on_both_ports(api: Api) -> None:
    for client in (api.client, api.admin):
        response = await client.get("/healthz")
        assert (response.status_code, response.json()) == (200, {"status": "ok"})


@pytest.mark.parametrize("path", ["/readyz", "/metrics", "/docs", "/docs/oauth2-redirect"])
async def test_the_tenant_facing_app_does_not_disclose_the_admin_paths(api: Api, path: str) -> None:
    for method in ("GET", "POST"):
        response = await api.client.request(method, path, headers=AUTH)
        assert response.status_code == 404, (method, path)
        assert error_of(response)["code"] == "not_found"


async def test_the_admin_app_serves_no_tenant_api(api: Api) -> None:
    posted = await api.admin.post("/v1/settlements", json=BODY, headers=HEADERS)
    assert posted.status_code == 404
    assert (await api.admin.get("/v1/settlements", headers=AUTH)).status_code == 404
    assert api.acceptor.seen == []


async def test_readyz_is_200_when_everything_answers_and_503_otherwise(api: Api) -> None:
    ready = await api.admin.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"kafka": True, "postgres": True})
    api.readiness.components["kafka"] = False
    unready = await api.admin.get("/readyz")
    assert (unready.status_code, unready.json()) == (503, {"kafka": False, "postgres": True})


async def test_metrics_expose_the_counters_and_count_outcomes(api: Api) -> None:
    await api.client.post("/v1/settlements", json=BODY, headers=HEADERS)
    await api.client.post("/v1/settlements", json=BODY, headers=AUTH)
    response = await api.admin.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'settle_ledger_requests_total{outcome="created",tenant="acme"} 1.0' in text
    assert 'settle_ledger_requests_total{outcome="invalid",tenant="acme"} 1.0' in text
    assert 'settle_ledger_requests_total{outcome="unavailable",tenant="acme"} 0.0' in text
    assert "settle_ledger_accept_seconds_count 1.0" in text
    for name in (
        "settle_ledger_kafka_dedupe_hits_total",
        "settle_ledger_dlq_total",
        "settle_ledger_batch_size",
    ):
        assert f"# TYPE {name.removesuffix('_total')}" in text


async def test_openapi_documents_the_post_with_its_header_body_and_errors(api: Api) -> None:
    response = await api.client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    post = document["paths"]["/v1/settlements"]["post"]
    headers = {p["name"]: p for p in post["parameters"] if p["in"] == "header"}
    assert "Idempotency-Key" in headers
    schema = post["requestBody"]["content"]["application/json"]["schema"]
    assert {"reference", "payee", "destination", "amount", "currency"} <= set(schema["required"])
    assert schema["properties"]["amount"]["type"] == "integer"
    assert {"201", "400", "401", "409", "410", "413", "422", "503"} <= set(post["responses"])
    assert "Idempotent-Replayed" in post["responses"]["201"]["headers"]
    error_ref = post["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    assert error_ref.endswith("/ErrorResponse")
    assert document["components"]["securitySchemes"]["tenantToken"]["scheme"] == "bearer"
    assert post["security"] == [{"tenantToken": []}]
    assert set(document["paths"]) == {
        "/v1/settlements",
        "/v1/settlements/{settlement_id}",
        "/v1/accounts/{account}/balance",
        "/v1/accounts/{account}/entries",
        "/healthz",
    }


async def test_the_admin_app_documents_its_own_paths(api: Api) -> None:
    document = (await api.admin.get("/openapi.json")).json()
    assert set(document["paths"]) == {"/healthz", "/readyz", "/metrics"}
    assert (await api.admin.get("/docs")).status_code == 200

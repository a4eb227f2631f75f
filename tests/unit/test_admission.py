"""Admission before anything is written: the token bucket, the backlog bound and a tenant's
limits, alone and as POST /v1/settlements answers them (429, 503 `overloaded`, 422)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import httpx
import pytest

from services.domain.tenant_limits import Rate, TenantLimits, TenantPolicy
from services.ledger.admission import Admission, Backlog, TokenBucket
from services.ledger.errors import InvalidRequest, Overloaded, RateLimited
from services.ledger.http import create_app
from services.ledger.intake import parse_settlement_body
from services.ledger.metrics import create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.platform.settings import load_settings
from tests.unit.test_ledger_http import FakeReads

BODY = {"reference": "r-1", "payee": "p", "destination": "acct_1", "amount": 500, "currency": "EUR"}
REQUEST = parse_settlement_body("acme", "k-1", json.dumps(BODY).encode())
LIMITS = TenantLimits(
    {
        "acme": TenantPolicy(
            max_amount={"EUR": 500}, destinations=frozenset({"acct_1"}), rate=Rate(2.0, 3)
        )
    }
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_serves_its_burst_then_one_token_per_refill_interval() -> None:
    bucket = TokenBucket(Rate(per_second=2.0, burst=3), now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.25) == pytest.approx(0.25)  # half a token came back meanwhile
    assert bucket.take(0.5) == 0.0
    # A long pause refills to the burst, never beyond.
    assert [bucket.take(60.0) for _ in range(4)][-1] == pytest.approx(0.5)


def test_the_rate_answers_429_with_a_whole_retry_after_of_at_least_one_second() -> None:
    clock = Clock()
    admission = Admission(TenantLimits({"acme": TenantPolicy(rate=Rate(0.1, 1))}), clock=clock)
    admission.throttle("acme")
    with pytest.raises(RateLimited) as caught:
        admission.throttle("acme")
    assert (caught.value.status, caught.value.code) == (429, "rate_limited")
    assert caught.value.retry_after_seconds == 10
    clock.now += 9.99
    with pytest.raises(RateLimited) as caught:
        admission.throttle("acme")
    assert caught.value.retry_after_seconds == 1  # 0.01 s left, rounded up to a whole second
    clock.now += 0.01
    admission.throttle("acme")
    for _ in range(100):  # tenants without a rate are never throttled
        admission.throttle("globex")


def test_tenants_have_buckets_of_their_own() -> None:
    rate = Rate(1.0, 1)
    admission = Admission(
        TenantLimits({"a": TenantPolicy(rate=rate), "b": TenantPolicy(rate=rate)})
    )
    admission.throttle("a")
    admission.throttle("b")
    with pytest.raises(RateLimited):
        admission.throttle("a")


def test_the_amount_cap_is_per_currency_and_inclusive() -> None:
    admission = Admission(LIMITS)
    admission.check(REQUEST)  # exactly the cap
    with pytest.raises(InvalidRequest) as caught:
        admission.check(replace(REQUEST, amount=501))
    error = caught.value
    assert (error.status, error.code, error.field) == (422, "amount_over_limit", "amount")
    admission.check(replace(REQUEST, amount=10**15, currency="USD"))  # no cap in USD
    admission.check(replace(REQUEST, tenant="globex", amount=10**15))  # no limits at all


def test_a_destination_off_the_allow_list_is_refused() -> None:
    admission = Admission(LIMITS)
    with pytest.raises(InvalidRequest) as caught:
        admission.check(replace(REQUEST, destination="acct_2"))
    error = caught.value
    assert (error.status, error.code, error.field) == (
        422,
        "destination_not_allowed",
        "destination",
    )
    Admission(TenantLimits()).check(replace(REQUEST, destination="acct_2"))


async def test_the_backlog_refuses_past_its_bound_and_frees_room_as_requests_finish() -> None:
    backlog = Backlog(2)
    with backlog.admit(), backlog.admit():
        assert backlog.full
        with pytest.raises(Overloaded) as caught, backlog.admit():
            pass
        assert (caught.value.status, caught.value.code) == (503, "overloaded")
        assert caught.value.retry_after_seconds == 1
        waiting = asyncio.create_task(backlog.room())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # the Kafka intake fetches nothing more meanwhile
    await asyncio.wait_for(waiting, 1)
    assert backlog.held == 0
    with backlog.carry(5):  # a fetched Kafka batch is held whole, never refused
        assert backlog.full and backlog.held == 5
    assert not backlog.full


class HeldAcceptor:
    """Books nothing until `release` is set: requests pile up in the ledger."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.two_seen = asyncio.Event()
        self.seen: list[SettlementRequest] = []

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        self.seen.append(request)
        if len(self.seen) >= 2:
            self.two_seen.set()
        await self.release.wait()
        return AcceptResult(Outcome.CREATED, 201, b"{}", "s-1")

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        return [await self.accept(r) for r in requests]


SETTINGS = load_settings({"SETTLE_API_TOKENS": "acme:tok-acme", "SETTLE_ACCEPT_BACKLOG": "2"})
HEADERS = {"Authorization": "Bearer tok-acme", "Content-Type": "application/json"}


async def post(client: httpx.AsyncClient, key: str, **change: object) -> httpx.Response:
    body = json.dumps({**BODY, **change}).encode()
    return await client.post(
        "/v1/settlements", content=body, headers={**HEADERS, "Idempotency-Key": key}
    )


@pytest.mark.parametrize("served", ["fast path", "route"])
async def test_http_answers_503_overloaded_once_the_backlog_is_full(served: str) -> None:
    acceptor, metrics = HeldAcceptor(), create_metrics(tenants=SETTINGS.api_tokens)
    app = create_app(acceptor, FakeReads(), SETTINGS, metrics=metrics)
    transport = httpx.ASGITransport(app=app if served == "fast path" else app.api)
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        held = [asyncio.create_task(post(client, f"k-{n}")) for n in range(2)]
        await asyncio.wait_for(acceptor.two_seen.wait(), 5)
        refused = await post(client, "k-3")
        acceptor.release.set()
        assert [r.status_code for r in await asyncio.gather(*held)] == [201, 201]
        again = await post(client, "k-3")
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "overloaded"
    assert refused.headers["retry-after"] == "1"
    assert [r.idempotency_key for r in acceptor.seen] == ["k-0", "k-1", "k-3"]
    assert again.status_code == 201
    sample = metrics.registry.get_sample_value
    assert sample("settle_ledger_requests_total", {"outcome": "overloaded", "tenant": "acme"}) == 1
    # A full backlog is the ledger failing closed: counted apart from PostgreSQL's refusals.
    assert sample("settle_ledger_fail_closed_total", {"reason": "backlog"}) == 1
    assert sample("settle_ledger_fail_closed_total", {"reason": "postgresql"}) == 0


@pytest.mark.parametrize("served", ["fast path", "route"])
async def test_http_answers_limits_with_their_codes_and_accepts_nothing(served: str) -> None:
    settings = load_settings(
        {
            "SETTLE_API_TOKENS": "acme:tok-acme",
            "SETTLE_TENANT_LIMITS": json.dumps(
                {
                    "acme": {
                        "max_amount": {"EUR": 500},
                        "destinations": ["acct_1"],
                        "rate": {"per_second": 0.001, "burst": 4},
                    }
                }
            ),
        }
    )
    acceptor, metrics = HeldAcceptor(), create_metrics(tenants=settings.api_tokens)
    acceptor.release.set()
    app = create_app(acceptor, FakeReads(), settings, metrics=metrics)
    transport = httpx.ASGITransport(app=app if served == "fast path" else app.api)
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        answers = [
            await post(client, "k-1", amount=501),
            await post(client, "k-2", destination="acct_2"),
            await post(client, "k-3"),
            await post(client, "k-4"),
            await post(client, "k-5"),
        ]
    assert [
        (a.status_code, a.json()["error"]["code"]) for a in answers if a.status_code != 201
    ] == [
        (422, "amount_over_limit"),
        (422, "destination_not_allowed"),
        (429, "rate_limited"),
    ]
    assert answers[-1].headers["retry-after"] == "1000"
    assert [r.idempotency_key for r in acceptor.seen] == ["k-3", "k-4"]
    sample = metrics.registry.get_sample_value
    assert sample("settle_ledger_requests_total", {"outcome": "invalid", "tenant": "acme"}) == 2
    assert (
        sample("settle_ledger_requests_total", {"outcome": "rate_limited", "tenant": "acme"}) == 1
    )
    assert sample("settle_ledger_fail_closed_total", {"reason": "backlog"}) == 0

"""Limits and back-pressure on a real ledger (PostgreSQL, the app as app.py builds it): a
tenant's caps and allow-list, its rate, the bounded backlog, and the race-free funding check
of a pre-funded tenant. Every refusal books nothing and leaves its idempotency key unused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest

from services.adapters.postgres.database import create_pool
from services.apps.ledger import windows
from services.domain.tenant_limits import TenantLimits, TenantPolicy
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.ledger.model import Outcome, SettlementRequest
from services.platform.service_settings import Settings
from tests.conftest import unique
from tests.integration.test_ledger_api import (
    error_of,
    key_held_elsewhere,
    ledger_settings,
    running_ledger,
    settlement,
)

pytestmark = pytest.mark.integration


def with_limits(database_url: str, kafka_bootstrap: str, **extra: Any) -> Settings:
    a, b = unique("ta"), unique("tb")
    limits = {
        a: {
            "max_amount": {"EUR": 10_000},
            "destinations": ["acct_1Q2w3E"],
            "rate": {"per_second": 0.001, "burst": 5},
        }
    }
    return ledger_settings(
        database_url, kafka_bootstrap, a, b, SETTLE_TENANT_LIMITS=json.dumps(limits), **extra
    )


async def test_caps_and_allow_lists_answer_422_with_their_codes_and_burn_no_key(
    database_url: str, kafka_bootstrap: str
) -> None:
    async with running_ledger(with_limits(database_url, kafka_bootstrap)) as api:
        over, elsewhere = unique("key-"), unique("key-")
        refused = [
            await api.post(api.a, over, settlement(amount=10_001)),
            await api.post(api.a, elsewhere, settlement(destination="acct_other")),
        ]
        assert [(r.status_code, error_of(r)["code"], error_of(r)["field"]) for r in refused] == [
            (422, "amount_over_limit", "amount"),
            (422, "destination_not_allowed", "destination"),
        ]
        assert await api.settlements_of(api.a) == []
        # The keys are unused: the same keys with requests within the limits book.
        assert (await api.post(api.a, over, settlement(amount=10_000))).status_code == 201
        assert (await api.post(api.a, elsewhere, settlement())).status_code == 201
        # Another currency, and another tenant, are not capped.
        assert (
            await api.post(api.a, unique("key-"), settlement(amount=10**15, currency="USD"))
        ).is_success
        assert (await api.post(api.b, unique("key-"), settlement(amount=10**15))).is_success
        # Five tokens in all, refilled one per 1000 s: the sixth request of the tenant waits.
        limited = await api.post(api.a, unique("key-"), settlement())
        assert (limited.status_code, error_of(limited)["code"]) == (429, "rate_limited")
        assert int(limited.headers["retry-after"]) >= 1
        assert len(await api.settlements_of(api.a)) == 3


async def test_a_settlement_goes_to_the_rail_driven_here_and_no_other(
    database_url: str, kafka_bootstrap: str
) -> None:
    # A deployment that pays through Stripe (a local fake of it: no real money).
    stripe = {"SETTLE_RAIL": "stripe", "STRIPE_API_BASE": "http://127.0.0.1:9"}
    settings = ledger_settings(database_url, kafka_bootstrap, unique("ta"), unique("tb"), **stripe)
    async with running_ledger(settings) as api:
        key = unique("key-")
        refused = await api.post(api.a, key, settlement(rail="sim"))
        assert refused.status_code == 422
        assert (error_of(refused)["code"], error_of(refused)["field"]) == (
            "rail_unavailable",
            "rail",
        )
        assert await api.settlements_of(api.a) == []
        # Booked on the rail that pays here, named or not; the refused key is still unused.
        named = await api.post(api.a, key, settlement(rail="stripe"))
        unnamed = await api.post(api.a, unique("key-"), settlement())
        assert [named.status_code, unnamed.status_code] == [201, 201]
        assert [named.json()["rail"], unnamed.json()["rail"]] == ["stripe", "stripe"]


async def test_a_settlement_is_routed_by_its_name_its_tenants_default_or_what_pays_it(
    database_url: str, kafka_bootstrap: str
) -> None:
    a, b = unique("ta"), unique("tb")
    rails = {"SETTLE_RAILS": "sim,sepa", "SETTLE_TENANT_RAILS": f"{a}:EUR=sepa"}
    settings = ledger_settings(database_url, kafka_bootstrap, a, b, **rails)
    iban = "DE89370400440532013000"
    async with running_ledger(settings) as api:

        async def rail_of(token: str, **change: Any) -> str:
            answer = await api.post(token, unique("key-"), settlement(**change))
            assert answer.status_code == 201, answer.text
            return str(answer.json()["rail"])

        assert await rail_of(api.a, destination=iban) == "sepa"  # the tenant's EUR default
        assert await rail_of(api.a, destination=iban, currency="USD") == "sim"
        assert await rail_of(api.b, destination=iban) == "sim"  # the first rail that pays
        assert await rail_of(api.b, destination=iban, rail="sepa") == "sepa"
        booked = len(await api.settlements_of(api.a))

        refusals = [
            (dict(rail="sepa", currency="USD", destination=iban), "currency_not_supported"),
            (dict(rail="sepa", destination="acct_1Q2w3E"), "destination_not_supported"),
            (dict(rail="sepa", destination=iban[:-1] + "1"), "destination_not_supported"),
            (dict(destination="acct_1Q2w3E"), "destination_not_supported"),  # a's default
            (dict(rail="sepa", destination=iban, payee="p" * 71), "payee_not_supported"),
            (dict(rail="stripe", destination=iban), "rail_unavailable"),
        ]
        for change, code in refusals:
            refused = await api.post(api.a, unique("key-"), settlement(**change))
            assert (refused.status_code, error_of(refused)["code"]) == (422, code), change
        assert len(await api.settlements_of(api.a)) == booked  # nothing of them was booked


async def test_a_full_backlog_answers_503_and_every_201_is_booked_and_no_503(
    database_url: str, kafka_bootstrap: str
) -> None:
    settings = ledger_settings(
        database_url, kafka_bootstrap, unique("ta"), unique("tb"), SETTLE_ACCEPT_BACKLOG="3"
    )
    # One booking worker, its first batch held on a key another transaction holds: the
    # requests behind it wait in the ledger until the backlog is full.
    async with running_ledger(settings, workers=1) as api:
        held = unique("key-")
        bodies = [settlement() for _ in range(12)]
        async with key_held_elsewhere(api.pool, api.a, held):
            first = asyncio.create_task(api.post(api.a, held, bodies[0]))
            await asyncio.sleep(0.2)
            rest = [asyncio.create_task(api.post(api.a, unique("key-"), b)) for b in bodies[1:]]
            await asyncio.sleep(0.5)
        answers = [await first, *await asyncio.gather(*rest)]
        booked = {row["reference"] for row in await api.settlements_of(api.a)}
    statuses = [a.status_code for a in answers]
    assert set(statuses) == {201, 503}, statuses
    assert statuses.count(201) == 3  # the held request and the two queued behind it
    for answer in answers:
        if answer.status_code == 503:
            assert error_of(answer)["code"] == "overloaded"
            assert int(answer.headers["retry-after"]) >= 1
    assert booked == {
        b["reference"] for b, a in zip(bodies, answers, strict=True) if a.status_code == 201
    }


def funded(tenant: str, deposit: int) -> TenantLimits:
    return TenantLimits({tenant: TenantPolicy(prefunded={"EUR": deposit})})


def request(tenant: str, amount: int, key: str | None = None) -> SettlementRequest:
    body = json.dumps(settlement(amount=amount)).encode()
    return parse_settlement_body(tenant, key or unique("key-"), body)


@asynccontextmanager
async def ledgers(
    settings: Settings, limits: TenantLimits, count: int
) -> AsyncIterator[list[Ledger]]:
    """`count` ledgers with pools of their own, as `count` ledger processes would run."""
    async with AsyncExitStack() as stack:
        out = []
        for _ in range(count):
            pool = await create_pool(settings, keep_sessions=True)
            stack.push_async_callback(pool.close)
            ledger = Ledger(pool, Books(windows(settings), limits=limits), max_batch=1)
            stack.push_async_callback(ledger.stop)
            out.append(ledger)
        yield out


async def funding_balance(api_pool: Any, tenant: str) -> int:
    value = await api_pool.fetchval(
        "SELECT sum(balance) FROM account_balances WHERE account_id = $1", f"{tenant}:funding:EUR"
    )
    return int(value or 0)


async def test_concurrent_requests_of_a_prefunded_tenant_never_overdraw_its_funds(
    database_url: str, kafka_bootstrap: str
) -> None:
    tenant = unique("tf")
    settings = ledger_settings(database_url, kafka_bootstrap, tenant, unique("tb"))
    # 40 requests of 1,000 against a deposit of 10,000, from two ledger processes, one
    # transaction per request: each alone is within the funds, together four times over.
    requests = [request(tenant, 1_000) for _ in range(40)]
    async with ledgers(settings, funded(tenant, 10_000), 2) as (one, two):
        results = await asyncio.gather(
            *[(one if n % 2 else two).accept(r) for n, r in enumerate(requests)]
        )
        outcomes = [r.outcome for r in results]
        assert outcomes.count(Outcome.CREATED) == 10, outcomes
        assert outcomes.count(Outcome.INSUFFICIENT_FUNDS) == 30
        refused = next(r for r in results if r.outcome is Outcome.INSUFFICIENT_FUNDS)
        assert refused.status == 422 and json.loads(refused.body)["error"]["code"] == (
            "insufficient_funds"
        )
        assert await funding_balance(one.pool, tenant) == -10_000
        # A booked request retried after the funds ran out is replayed, not refused.
        booked = next(
            r for r, res in zip(requests, results, strict=True) if res.outcome is Outcome.CREATED
        )
        assert (await one.accept(booked)).outcome is Outcome.REPLAYED
        count = await one.pool.fetchval(
            "SELECT count(*) FROM settlements WHERE tenant = $1", tenant
        )
        assert count == 10
    # The refused keys were not used: with more deposited, the same request books.
    short = next(
        r for r, res in zip(requests, results, strict=True) if res.outcome is not Outcome.CREATED
    )
    async with ledgers(settings, funded(tenant, 11_000), 1) as (richer,):
        assert (await richer.accept(short)).outcome is Outcome.CREATED
        assert (await richer.accept(request(tenant, 1))).outcome is Outcome.INSUFFICIENT_FUNDS
        # A tenant not pre-funded keeps booking past zero, as before.
        other = unique("tn")
        assert (await richer.accept(request(other, 10**15))).outcome is Outcome.CREATED
        assert await funding_balance(richer.pool, other) == -(10**15)


async def test_a_prefunded_tenant_over_http_gets_422_insufficient_funds(
    database_url: str, kafka_bootstrap: str
) -> None:
    a = unique("ta")
    limits = json.dumps({a: {"prefunded": {"EUR": 3_000}}})
    settings = ledger_settings(
        database_url, kafka_bootstrap, a, unique("tb"), SETTLE_TENANT_LIMITS=limits
    )
    async with running_ledger(settings) as api:
        assert (await api.post(api.a, unique("key-"), settlement(amount=2_000))).status_code == 201
        key = unique("key-")
        short = await api.post(api.a, key, settlement(amount=1_001))
        assert (short.status_code, error_of(short)["code"]) == (422, "insufficient_funds")
        assert (await api.post(api.a, key, settlement(amount=1_000))).status_code == 201
        nothing = await api.post(api.a, unique("key-"), settlement(amount=1, currency="USD"))
        assert error_of(nothing)["code"] == "insufficient_funds"  # no USD deposited
        assert len(await api.settlements_of(api.a)) == 2

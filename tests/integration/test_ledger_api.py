"""The ledger's HTTP API end to end: the real app wired as `services/apps/ledger.py` wires it
(a real Ledger and Books on an asyncpg pool, SettlementReads, Readiness, metrics) on the real
PostgreSQL and Kafka, driven in process through httpx. Every test works under tenants of its
own, so rows of other tests never disturb it."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.adapters.postgres.database import create_pool
from services.apps.ledger import windows
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.http import create_admin_app, create_app
from services.ledger.intake import MAX_BODY_BYTES
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.readiness import Readiness
from services.ledger.reads import SettlementReads
from services.platform.service_settings import Settings
from services.platform.settings import load_settings
from tests.conftest import unique

pytestmark = [pytest.mark.integration, pytest.mark.money]

# Nothing listens on port 1: the pool fails on first use, like a ledger started while
# PostgreSQL is down.
DEAD_DATABASE_URL = "postgresql://settle@127.0.0.1:1/x"


@dataclass
class Api:
    """A running ledger app, its pool and metrics, and two tenants with tokens."""

    client: httpx.AsyncClient  # the tenant-facing app
    admin: httpx.AsyncClient  # the admin port's app
    ledger: Ledger
    pool: asyncpg.Pool
    metrics: LedgerMetrics
    settings: Settings
    a: str
    b: str

    def auth(self, tenant: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.settings.api_tokens[tenant][-1].get_secret_value()}"
        }

    def headers(self, tenant: str, key: str) -> dict[str, str]:
        return {**self.auth(tenant), "Idempotency-Key": key}

    async def post(self, tenant: str, key: str, body: Mapping[str, Any] | bytes) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {**self.headers(tenant, key), "Content-Type": "application/json"}
        return await self.client.post("/v1/settlements", content=raw, headers=headers)

    async def settlements_of(self, tenant: str) -> list[asyncpg.Record]:
        return await self.pool.fetch(
            "SELECT id, reference, idempotency_key, amount, currency FROM settlements"
            " WHERE tenant = $1 ORDER BY created_at, id",
            tenant,
        )


def ledger_settings(
    database_url: str, kafka_bootstrap: str, a: str, b: str, **extra: str
) -> Settings:
    return load_settings(
        {
            "SETTLE_DATABASE_URL": database_url,
            "SETTLE_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "SETTLE_API_TOKENS": f"{a}:token-{a},{b}:token-{b}",
            **extra,
        }
    )


@asynccontextmanager
async def running_ledger(settings: Settings, **ledger_options: int) -> AsyncIterator[Api]:
    """The ledger's HTTP app built from `settings` exactly as `app.serve` builds it."""
    metrics = create_metrics(tenants=settings.api_tokens)
    pool = await create_pool(settings, keep_sessions=True)  # as app.py opens it
    books = Books(windows(settings), settings.stripe_method, limits=settings.tenant_limits)
    ledger = Ledger(pool, books, metrics=metrics, **ledger_options)
    try:
        app = create_app(ledger, SettlementReads(pool), settings, metrics=metrics)
        admin_app = create_admin_app(Readiness(pool, settings.kafka_bootstrap), metrics)
        # An exception the app lets escape is what a client sees as a 500.
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        admin_transport = httpx.ASGITransport(app=admin_app)
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://ledger") as client,
            httpx.AsyncClient(transport=admin_transport, base_url="http://admin") as admin,
        ):
            a, b = settings.api_tokens
            yield Api(client, admin, ledger, pool, metrics, settings, a, b)
    finally:
        await ledger.stop()
        await pool.close()


@pytest.fixture
async def api(database_url: str, kafka_bootstrap: str) -> AsyncIterator[Api]:
    settings = ledger_settings(database_url, kafka_bootstrap, unique("ta"), unique("tb"))
    async with running_ledger(settings) as running:
        yield running


def settlement(reference: str | None = None, amount: int = 2_500, **change: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "reference": reference or unique("ref-"),
        "payee": "payee-7",
        "destination": "acct_1Q2w3E",
        "amount": amount,
        "currency": "EUR",
        "metadata": {"order": "o-1"},
    }
    body.update(change)
    return body


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    return dict(body["error"])


@asynccontextmanager
async def key_held_elsewhere(pool: asyncpg.Pool, tenant: str, key: str) -> AsyncIterator[None]:
    """Another replica mid-booking `key`: its uncommitted claim holds the row until the block
    ends (rolled back), so a booking that needs the key waits on it."""
    async with pool.acquire() as other:
        transaction = other.transaction()
        await transaction.start()
        try:
            await other.execute(
                """INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, state,
                       locked_until, created_at)
                   VALUES ($1, $2, $3, 'POST', '/v1/settlements', 'in_flight',
                           now() + interval '30 s', now())""",
                tenant,
                key,
                bytes(32),
            )
            yield
        finally:
            await transaction.rollback()


async def age_key(pool: asyncpg.Pool, tenant: str, key: str, by: timedelta) -> None:
    """Move a key's first use back in time, as if `by` had passed since."""
    status = await pool.execute(
        "UPDATE idempotency_keys SET created_at = created_at - $3::interval"
        " WHERE tenant = $1 AND key = $2",
        tenant,
        key,
        by,
    )
    assert status == "UPDATE 1"


# --- idempotent booking --------------------------------------------------------------------


async def test_create_then_retry_replays_the_same_bytes_and_reads_back(api: Api) -> None:
    key, body = unique("key-"), settlement(amount=2_500)
    created = await api.post(api.a, key, body)
    assert created.status_code == 201, created.text
    assert "idempotent-replayed" not in created.headers
    first = created.json()
    assert (first["status"], first["amount"], first["currency"]) == ("accepted", 2_500, "EUR")
    assert first["reference"] == body["reference"]

    retried = await api.post(api.a, key, body)
    assert retried.status_code == 201
    assert retried.content == created.content
    assert retried.headers["idempotent-replayed"] == "true"

    read = await api.client.get(f"/v1/settlements/{first['id']}", headers=api.auth(api.a))
    assert read.status_code == 200
    got = read.json()
    assert (got["id"], got["status"], got["amount"]) == (first["id"], "accepted", 2_500)
    instruction_key = await api.pool.fetchval(
        "SELECT idempotency_key FROM rail_instructions WHERE settlement_id = $1",
        uuid.UUID(first["id"]),
    )
    assert got["rail_idempotency_key"] == first["rail_idempotency_key"] == instruction_key
    assert len(got["rail_idempotency_key"]) == 64
    history = [(t["sequence"], t["from_status"], t["to_status"]) for t in got["transitions"]]
    assert history == [(1, None, "accepted")]
    assert sum(p["amount"] for p in got["postings"]) == 0
    assert {p["account_id"]: p["amount"] for p in got["postings"]} == {
        f"{api.a}:funding:EUR": -2_500,
        f"{api.a}:payable:EUR": 2_500,
    }
    assert [s["id"] for s in await api.settlements_of(api.a)] == [uuid.UUID(first["id"])]


@pytest.mark.parametrize("replicas", [1, 2], ids=["one-replica", "two-replicas"])
async def test_fifty_concurrent_identical_posts_book_one_settlement(
    api: Api, replicas: int
) -> None:
    key, body = unique("key-"), settlement()
    async with AsyncExitStack() as stack:
        # A second replica on its own pool: the key is contended across transactions too,
        # not only folded inside one replica's batch.
        apis = [api] + [
            await stack.enter_async_context(running_ledger(api.settings))
            for _ in range(replicas - 1)
        ]
        responses = await asyncio.gather(
            *(apis[n % replicas].post(api.a, key, body) for n in range(50))
        )

    rows = await api.pool.fetch(
        "SELECT id FROM settlements WHERE tenant = $1 AND reference = $2",
        api.a,
        body["reference"],
    )
    assert len(rows) == 1
    created = [r for r in responses if r.status_code == 201]
    assert created, [r.status_code for r in responses]
    assert {r.content for r in created} == {created[0].content}
    assert created[0].json()["id"] == str(rows[0]["id"])
    # Exactly one of them booked; every other 201 is a replay of its bytes.
    assert sum("idempotent-replayed" not in r.headers for r in created) == 1
    for response in responses:
        if response.status_code != 201:
            assert response.status_code == 409, response.text
            assert error_of(response)["code"] == "idempotency_key_in_use"
            assert int(response.headers["retry-after"]) > 0


async def test_integral_amount_spellings_are_one_request_and_fractions_are_refused(
    api: Api,
) -> None:
    key, reference = unique("key-"), unique("ref-")
    template = (
        '{"reference":"%s","payee":"p-1","destination":"acct_1","amount":%s,"currency":"USD"}'
    )
    created = await api.post(api.a, key, (template % (reference, "100")).encode())
    assert created.status_code == 201, created.text
    assert created.json()["amount"] == 100

    for spelling in ("100.0", "1e2", "100.000"):
        same = await api.post(api.a, key, (template % (reference, spelling)).encode())
        assert same.status_code == 201, (spelling, same.text)
        assert same.content == created.content, spelling
        assert same.headers["idempotent-replayed"] == "true"

    fraction = await api.post(api.a, key, (template % (reference, "100.5")).encode())
    assert fraction.status_code == 400
    error = error_of(fraction)
    assert (error["code"], error["field"]) == ("invalid_amount", "amount")
    assert [s["amount"] for s in await api.settlements_of(api.a)] == [100]


async def test_same_key_with_another_body_is_422_and_nothing_runs(api: Api) -> None:
    key, body = unique("key-"), settlement(amount=100)
    first = await api.post(api.a, key, body)
    assert first.status_code == 201

    for change in ({"amount": 1_000}, {"reference": unique("ref-")}, {"metadata": {}}):
        refused = await api.post(api.a, key, body | change)
        assert refused.status_code == 422, change
        error = error_of(refused)
        assert (error["code"], error["field"]) == ("idempotency_key_reused", "Idempotency-Key")
        assert "idempotent-replayed" not in refused.headers

    stored = await api.settlements_of(api.a)
    assert [(s["reference"], s["amount"]) for s in stored] == [(body["reference"], 100)]
    # The refusals did not disturb the key: the first request still replays.
    again = await api.post(api.a, key, body)
    assert (again.status_code, again.content) == (201, first.content)


async def test_keys_expire_after_the_replay_window_and_are_new_after_the_tombstone(
    database_url: str, kafka_bootstrap: str
) -> None:
    settings = ledger_settings(
        database_url,
        kafka_bootstrap,
        unique("ta"),
        unique("tb"),
        SETTLE_IDEMPOTENCY_REPLAY_SECONDS="1",
        SETTLE_IDEMPOTENCY_TOMBSTONE_SECONDS="2",
    )
    async with running_ledger(settings) as api:
        key, body = unique("key-"), settlement()
        first = await api.post(api.a, key, body)
        assert first.status_code == 201
        replay = await api.post(api.a, key, body)
        assert (replay.status_code, replay.content) == (201, first.content)

        await age_key(api.pool, api.a, key, timedelta(seconds=1.5))
        for request in (body, settlement()):  # whatever the body, within the tombstone
            expired = await api.post(api.a, key, request)
            assert expired.status_code == 410, expired.text
            error = error_of(expired)
            assert (error["code"], error["field"]) == (
                "idempotency_key_expired",
                "Idempotency-Key",
            )
            assert "idempotent-replayed" not in expired.headers
        assert len(await api.settlements_of(api.a)) == 1

        await age_key(api.pool, api.a, key, timedelta(seconds=2))  # 3.5 s > replay + tombstone
        fresh_body = settlement(amount=7_700)
        fresh = await api.post(api.a, key, fresh_body)
        assert fresh.status_code == 201, fresh.text
        assert "idempotent-replayed" not in fresh.headers
        assert fresh.json()["id"] != first.json()["id"]
        assert fresh.json()["amount"] == 7_700
        stored = await api.settlements_of(api.a)
        assert [s["reference"] for s in stored] == [body["reference"], fresh_body["reference"]]
        # The reused key now replays its new response.
        again = await api.post(api.a, key, fresh_body)
        assert (again.status_code, again.content) == (201, fresh.content)


async def test_same_reference_under_another_key_is_409_duplicate_reference(api: Api) -> None:
    body = settlement()
    first = await api.post(api.a, unique("key-"), body)
    assert first.status_code == 201

    other_key = unique("key-")
    duplicate = await api.post(api.a, other_key, body | {"amount": 9_999})
    assert duplicate.status_code == 409
    error = error_of(duplicate)
    assert (error["code"], error["field"]) == ("duplicate_reference", "reference")
    assert "retry-after" not in duplicate.headers
    # The refusal is that key's stored answer: retried, it replays.
    again = await api.post(api.a, other_key, body | {"amount": 9_999})
    assert (again.status_code, again.content) == (409, duplicate.content)
    assert again.headers["idempotent-replayed"] == "true"

    stored = await api.settlements_of(api.a)
    assert [(s["reference"], s["amount"]) for s in stored] == [(body["reference"], 2_500)]
    # Another tenant has references of its own.
    assert (await api.post(api.b, unique("key-"), body)).status_code == 201


# --- tenants ---------------------------------------------------------------------------------


async def test_tenants_see_only_their_own_settlements_and_accounts(api: Api) -> None:
    body = settlement(payee="payee-of-a", destination="acct_of_a")
    created = await api.post(api.a, unique("key-"), body)
    assert created.status_code == 201
    a_id = created.json()["id"]
    own = await api.post(api.b, unique("key-"), settlement())
    assert own.status_code == 201
    b_id = own.json()["id"]

    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "token-x"}):
        post = await api.client.post(
            "/v1/settlements", json=settlement(), headers={**headers, "Idempotency-Key": "k"}
        )
        assert post.status_code == 401
        assert error_of(post)["code"] == "unauthorized"
        get = await api.client.get(f"/v1/settlements/{a_id}", headers=headers)
        assert get.status_code == 401
        assert a_id not in get.text
    assert len(await api.settlements_of(api.a)) == 1

    foreign = await api.client.get(f"/v1/settlements/{a_id}", headers=api.auth(api.b))
    assert foreign.status_code == 404
    assert error_of(foreign)["code"] == "not_found"
    for secret in (a_id, body["reference"], "payee-of-a", "acct_of_a", api.a):
        assert secret not in foreign.text

    for path in (
        f"/v1/accounts/{api.a}:payable:EUR/balance",
        f"/v1/accounts/{api.a}:payable:EUR/entries",
    ):
        response = await api.client.get(path, headers=api.auth(api.b))
        assert response.status_code == 404, path
        assert error_of(response)["code"] == "not_found"
        assert "2500" not in response.text and a_id not in response.text

    listed = await api.client.get("/v1/settlements", headers=api.auth(api.b))
    assert listed.status_code == 200
    assert [s["id"] for s in listed.json()["data"]] == [b_id]
    by_reference = await api.client.get(
        "/v1/settlements", params={"reference": body["reference"]}, headers=api.auth(api.b)
    )
    assert by_reference.json()["data"] == []
    mine = await api.client.get(
        "/v1/settlements", params={"reference": body["reference"]}, headers=api.auth(api.a)
    )
    assert [s["id"] for s in mine.json()["data"]] == [a_id]


# --- validation through the real stack ----------------------------------------------------


def _raw(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body).encode()


def _without(name: str) -> bytes:
    return _raw({k: v for k, v in settlement().items() if k != name})


@pytest.mark.parametrize(
    ("raw", "status", "code", "field_name"),
    [
        (_raw(settlement(amount=-5)), 400, "invalid_amount", "amount"),
        (_raw(settlement(amount=0)), 400, "invalid_amount", "amount"),
        (_raw(settlement(amount=2**63)), 400, "invalid_amount", "amount"),
        (_raw(settlement(amount=10**15 + 1)), 400, "invalid_amount", "amount"),
        (_raw(settlement(amount=2**62)), 400, "invalid_amount", "amount"),
        (_raw(settlement(currency="XYZ")), 400, "invalid_currency", "currency"),
        (_without("payee"), 400, "missing_field", "payee"),
        (b'{"reference": "r-1", "amount": ', 400, "malformed_json", None),
        (_raw(settlement()) + b" " * MAX_BODY_BYTES, 413, "body_too_large", None),
    ],
    ids=[
        "negative",
        "zero",
        "2**63",
        "10**15+1",
        "2**62",
        "XYZ",
        "no-payee",
        "malformed",
        "over-16KiB",
    ],
)
async def test_an_invalid_request_is_refused_naming_the_field_and_books_nothing(
    api: Api, raw: bytes, status: int, code: str, field_name: str | None
) -> None:
    key = unique("key-")
    response = await api.post(api.a, key, raw)
    assert response.status_code == status, response.text
    error = error_of(response)
    assert (error["code"], error["field"]) == (code, field_name)
    assert await api.settlements_of(api.a) == []
    # Nothing was stored under the key either: a valid request with it books normally.
    assert (await api.post(api.a, key, settlement())).status_code == 201


async def test_a_missing_idempotency_key_is_400_and_books_nothing(api: Api) -> None:
    response = await api.client.post("/v1/settlements", json=settlement(), headers=api.auth(api.a))
    assert response.status_code == 400
    error = error_of(response)
    assert (error["code"], error["field"]) == ("missing_idempotency_key", "Idempotency-Key")
    assert await api.settlements_of(api.a) == []


# --- failing closed, readiness, metrics ------------------------------------------------------


async def test_an_unreachable_postgres_fails_closed_with_503(
    api: Api, kafka_bootstrap: str
) -> None:
    ready = await api.admin.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"kafka": True, "postgres": True})

    dead = ledger_settings(DEAD_DATABASE_URL, kafka_bootstrap, unique("ta"), unique("tb"))
    async with running_ledger(dead) as down:
        response = await down.post(down.a, unique("key-"), settlement())
        assert response.status_code == 503, response.text
        assert int(response.headers["retry-after"]) > 0
        assert error_of(response)["code"] == "store_unavailable"
        assert "idempotent-replayed" not in response.headers

        unready = await down.admin.get("/readyz")
        assert unready.status_code == 503
        assert unready.json() == {"kafka": True, "postgres": False}
        assert (
            down.metrics.registry.get_sample_value(
                "settle_ledger_requests_total", {"outcome": "unavailable", "tenant": down.a}
            )
            == 1
        )


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus exposition, by name and labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_count_created_and_replayed_requests_and_batch_sizes(api: Api) -> None:
    bodies = {unique("key-"): settlement() for _ in range(2)}
    for key, body in bodies.items():
        assert (await api.post(api.a, key, body)).status_code == 201
    key, body = next(iter(bodies.items()))
    for _ in range(3):
        assert (await api.post(api.a, key, body)).headers["idempotent-replayed"] == "true"
    assert (await api.post(api.a, key, settlement(amount=-1))).status_code == 400

    response = await api.admin.get("/metrics")
    assert response.status_code == 200
    samples = scrape(response.text)

    def requests(outcome: str) -> float:
        return samples[("settle_ledger_requests_total", (("outcome", outcome), ("tenant", api.a)))]

    assert (requests("created"), requests("replayed"), requests("invalid")) == (2, 3, 1)
    assert requests("mismatch") == requests("unavailable") == 0
    # One request at a time: each went to PostgreSQL alone, the invalid one not at all.
    assert samples[("settle_ledger_batch_size_count", ())] == 5
    assert samples[("settle_ledger_batch_size_sum", ())] == 5
    assert samples[("settle_ledger_batch_size_bucket", (("le", "1.0"),))] == 5
    assert samples[("settle_ledger_accept_seconds_count", ())] == 5


# --- balances --------------------------------------------------------------------------------


async def test_balance_is_the_sum_of_the_tenants_postings_and_entries_list_them(
    api: Api,
) -> None:
    amounts = [1_050, 20_000, 7, 999_999]
    ids = []
    for amount in amounts:
        response = await api.post(api.a, unique("key-"), settlement(amount=amount, currency="USD"))
        assert response.status_code == 201
        ids.append(response.json()["id"])
    assert (await api.post(api.a, unique("key-"), settlement(amount=5, currency="EUR"))).is_success
    assert (await api.post(api.b, unique("key-"), settlement(amount=3, currency="USD"))).is_success

    for kind, sign in (("payable", 1), ("funding", -1)):
        account = f"{api.a}:{kind}:USD"
        response = await api.client.get(f"/v1/accounts/{account}/balance", headers=api.auth(api.a))
        assert response.status_code == 200
        posted = await api.pool.fetchval(
            "SELECT sum(amount) FROM postings WHERE account_id = $1", account
        )
        assert response.json() == {
            "account": account,
            "currency": "USD",
            "balance": sign * sum(amounts),
        }
        assert response.json()["balance"] == posted

        entries = await api.client.get(
            f"/v1/accounts/{account}/entries", params={"limit": 100}, headers=api.auth(api.a)
        )
        assert entries.status_code == 200
        page = entries.json()
        assert page["next_cursor"] is None
        # Newest first, one posting per settlement, the settlement's amount with the sign.
        assert [e["settlement_id"] for e in page["data"]] == ids[::-1]
        assert [e["amount"] for e in page["data"]] == [sign * a for a in amounts[::-1]]
        assert {(e["kind"], e["currency"]) for e in page["data"]} == {("accepted", "USD")}

    eur = await api.client.get(f"/v1/accounts/{api.a}:payable:EUR/balance", headers=api.auth(api.a))
    assert eur.json()["balance"] == 5


# --- a request the books cannot hold, and stopping with requests in flight ---------------


async def near_overflow(api: Api, tenant: str) -> None:
    """Open `tenant`'s EUR accounts and set every payable shard a few units short of the
    largest bigint, as only a lifetime of maximum amounts could: one more credit overflows."""
    assert (await api.post(tenant, unique("key-"), settlement(amount=1))).status_code == 201
    await api.pool.execute(
        "UPDATE account_balances SET balance = $2 WHERE account_id = $1",
        f"{tenant}:payable:EUR",
        2**63 - 10,
    )


async def test_a_request_the_books_cannot_hold_does_not_fail_another_tenants_request(
    database_url: str, kafka_bootstrap: str
) -> None:
    settings = ledger_settings(database_url, kafka_bootstrap, unique("ta"), unique("tb"))
    # One worker, held busy, so the three requests below are queued into one batch.
    async with running_ledger(settings, workers=1) as api:
        await near_overflow(api, api.a)
        held = unique("key-")
        async with key_held_elsewhere(api.pool, api.a, held):
            blocker = asyncio.create_task(api.post(api.a, held, settlement()))
            await asyncio.sleep(0.3)
            batch = [
                asyncio.create_task(api.post(api.a, unique("key-"), settlement(amount=100))),
                asyncio.create_task(api.post(api.a, unique("key-"), settlement(amount=100))),
                asyncio.create_task(api.post(api.b, unique("key-"), settlement(amount=100))),
            ]
            await asyncio.sleep(0.3)
        assert (await blocker).status_code == 422  # the held one overflows too
        *refused, innocent = await asyncio.gather(*batch)
        assert [r.status_code for r in refused] == [422, 422]
        assert innocent.status_code == 201, innocent.text
        assert len(await api.settlements_of(api.b)) == 1
        assert len(await api.settlements_of(api.a)) == 1  # the one that opened the accounts


async def test_unbookable_answers_a_fixed_message_and_logs_the_database_error(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    await near_overflow(api, api.a)
    key = unique("key-")
    with caplog.at_level(logging.ERROR, logger="services.ledger.answers"):
        response = await api.post(api.a, key, settlement(amount=100))
    assert response.status_code == 422, response.text
    assert error_of(response) == {
        "code": "unbookable",
        "message": "the books cannot hold this settlement",
        "field": "amount",
    }
    # The database's words stay in the log, with the request they belong to.
    logged = [r.getMessage() for r in caplog.records if "unbookable" in r.getMessage()]
    assert len(logged) == 1
    assert key in logged[0] and api.a in logged[0] and "out of range" in logged[0]
    assert len(await api.settlements_of(api.a)) == 1


async def test_stopping_the_ledger_still_answers_a_request_in_flight(api: Api) -> None:
    held = unique("key-")
    async with key_held_elsewhere(api.pool, api.a, held):
        in_flight = asyncio.create_task(api.post(api.a, held, settlement()))
        await asyncio.sleep(0.3)  # its batch is waiting on the held key
        await api.ledger.stop()
        # Cancelled (503) or drained (409 once the 2 s lock wait ends): answered either way.
        done, _ = await asyncio.wait([in_flight], timeout=3)
        in_flight.cancel()
    assert done, "the request in flight was never answered"
    response = in_flight.result()
    assert response.status_code in (409, 503), response.text
    assert int(response.headers["retry-after"]) > 0

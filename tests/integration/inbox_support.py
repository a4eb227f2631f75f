"""What the inbox tests share: a database of their own, settlements in a chosen status,
rail events as the rail renders them, signed posts, and a worker on a clock the test moves."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from railsim.objects import event, json_bytes
from railsim.webhooks import signature_header
from services.apps.inbox import create_admin_app
from services.apps.reconciler import operator_routes
from services.apps.reconciler_admin import build_app
from services.domain.settlement import SettlementStatus as S
from services.inbox.apply import apply_events
from services.inbox.http import create_app
from services.inbox.metrics import create_metrics
from services.inbox.signature import SignatureCheck
from services.inbox.worker import ApplyEvents, InboxWorker, RetryPolicy
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.operations.approval_policy import ONE_PERSON
from services.operations.rail_lookup import NoRail
from services.platform.bearer import BearerAuth
from services.reconcile.metrics import create_metrics as create_reconcile_metrics
from services.settlement.transitions import apply_transition
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS

SECRET = "whsec_inbox_test"
DESTINATION = "acct_1Q2w3E"  # where `request` (and so `settlement`) sends the money
OPERATOR_TOKEN = "ops-test-token"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    """A pool on a database of this module's own: its workers see only its events."""
    async with scratch_database(infra.database_url, "settle_inbox_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=6)
        # The workers judge every row they see: the module's database starts with none.
        assert await pool.fetchval("SELECT count(*) FROM inbox_events") == 0
        yield pool
        await pool.close()


class Clock:
    """A clock the test moves; the worker and the HTTP layer read it."""

    def __init__(self, start: datetime = T0) -> None:
        self.at = start

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


class Inbox:
    """The inbox's HTTP apps (`http` the rail's, `admin` its readiness and metrics), the
    operator API (`operators`: the reconciler's, where operators list and replay inbox
    events) and the worker over one pool, with the test's clock."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        secrets: tuple[str, ...] = (SECRET,),
        attempts: int = 3,
        max_body: int = 65536,
        as_stored: bool = True,
        apply: ApplyEvents = apply_events,
    ) -> None:
        """`as_stored`: webhooks are applied in the transaction that stores them, as the
        service runs; else stored rows wait for the worker (`deliver` drains it). `apply`: the
        worker's apply step (the inbox's own, unless a test watches it)."""
        self.pool, self.clock, self.metrics = pool, Clock(), create_metrics()
        self.worker = InboxWorker(
            pool, self.metrics, RetryPolicy(attempts, 1.0, 60.0), clock=self.clock, apply=apply
        )
        app = create_app(
            pool,
            SignatureCheck(secrets),
            self.metrics,
            max_body_bytes=max_body,
            applier=self.worker if as_stored else None,
            clock=self.clock,
        )
        admin = create_admin_app(pool, self.metrics)
        operators = BearerAuth({OPERATOR_TOKEN: "alice"})
        served = operator_routes(pool, NoRail(), operators, self.clock, ONE_PERSON)
        api = build_app(create_reconcile_metrics(), lambda: True, served)
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://i")
        self.admin = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=admin), base_url="http://admin"
        )
        self.operators = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://operators"
        )

    async def post(
        self, body: bytes, secret: str = SECRET, age: float = 0, header: str | None = None
    ) -> httpx.Response:
        """POST a webhook signed with `secret`, `age` seconds ago (or with `header` as given)."""
        if header is None:
            header = signature_header(body, secret, int(time.time() - age))
        return await self.http.post(
            "/v1/webhooks/stripe", content=body, headers={"Stripe-Signature": header}
        )

    async def deliver(self, *bodies: bytes) -> None:
        """Post each body (all must answer 200), then apply everything due."""
        for body in bodies:
            assert (await self.post(body)).status_code == 200
        await self.worker.drain()


def rail_event(
    type_: str,
    object_id: str,
    settlement_id: str | None,
    *,
    amount: int = 900,
    currency: object = "usd",
    destination: object = DESTINATION,
    account: str | None = None,
) -> bytes:
    """A rail event body as the simulator (and Stripe) render it, with a fresh event id: by
    default about the money `settlement` sends; `account` makes it a connected account's."""
    kind = "payout" if type_.startswith("payout.") else "transfer"
    metadata = {"settlement_id": settlement_id} if settlement_id else {}
    obj = {
        "id": object_id,
        "object": kind,
        "amount": amount,
        "currency": currency,
        "destination": destination,
        "metadata": metadata,
    }
    body = event(type_, obj, int(time.time()))
    if account is not None:
        body["account"] = account
    return json_bytes(body)


def event_id(body: bytes) -> str:
    """The event id inside a body."""
    return str(json.loads(body)["id"])


async def settlement(
    pool: asyncpg.Pool,
    *path: S,
    rail_reference: str | None = None,
    destination: str = DESTINATION,
) -> str:
    """A new settlement (900 USD to `destination`) moved along `path`; the last move records
    `rail_reference`."""
    body = {
        "reference": unique("ref-"),
        "payee": "payee-7",
        "destination": destination,
        "amount": 900,
        "currency": "USD",
    }
    booked = parse_settlement_body(unique("t"), unique("key-"), json.dumps(body).encode())
    results = await Ledger(pool, Books(WINDOWS)).accept_many([booked])
    sid = str(json.loads(results[0].body)["id"])
    async with pool.acquire() as conn, conn.transaction():
        for n, target in enumerate(path):
            ref = rail_reference if n == len(path) - 1 else None
            moved = await apply_transition(
                conn, sid, target, actor="relay", now=T0, rail_reference=ref
            )
            assert moved is not None
    return sid


async def status_of(pool: asyncpg.Pool, sid: str) -> str:
    """The settlement's status now."""
    return str(await pool.fetchval("SELECT status FROM settlements WHERE id = $1", uuid.UUID(sid)))


async def nets(pool: asyncpg.Pool, sid: str) -> dict[str, int]:
    """Net postings of one settlement by account kind, leaving out zeros."""
    rows = await pool.fetch(
        """SELECT p.account_id, sum(p.amount) AS net FROM postings p
           JOIN journal_entries e ON e.id = p.entry_id WHERE e.settlement_id = $1
           GROUP BY p.account_id""",
        uuid.UUID(sid),
    )
    return {r["account_id"].split(":")[1]: int(r["net"]) for r in rows if r["net"]}


async def moves(pool: asyncpg.Pool, sid: str) -> list[str]:
    """The settlement's transitions' target statuses, in order."""
    rows = await pool.fetch(
        "SELECT to_status FROM settlement_transitions WHERE settlement_id = $1 ORDER BY sequence",
        uuid.UUID(sid),
    )
    return [r["to_status"] for r in rows]


async def inbox_rows(pool: asyncpg.Pool, rail_event_id: str) -> list[asyncpg.Record]:
    """The inbox rows stored under one rail event id."""
    return await pool.fetch("SELECT * FROM inbox_events WHERE rail_event_id = $1", rail_event_id)

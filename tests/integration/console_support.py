"""The console over a world of its own (tests.integration.operator_support): its app on an
in-process HTTP client, operators erin and frank, tenant acme, and a clock the test moves."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from services.apps.console import create_app
from services.console.auth import Gate
from services.console.sessions import SessionStore
from services.console.web import Console, templates
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.operations.approval_policy import ONE_PERSON, Policy
from services.operations.rail_lookup import StripeLookup
from services.platform.bearer import BearerAuth
from tests.conftest import unique
from tests.integration.check_support import TENANT, World
from tests.integration.test_ledger_books import WINDOWS

ERIN = "erin-operator-token-0123456789"
FRANK = "frank-operator-token-0123456789"
TENANT_TOKEN = "acme-tenant-token-0123456789"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]{64})"')


class Clock:
    """Now, moved on by the test."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def console_of(
    world: World,
    rail: StripeLookup,
    clock: Clock,
    *,
    secure: bool = False,
    policy: Policy = ONE_PERSON,
) -> Console:
    """The console's parts over the world's database and rail, approving by `policy`."""
    gate = Gate(
        BearerAuth({ERIN: "erin", FRANK: "frank"}),
        BearerAuth({TENANT_TOKEN: "acme"}),
        SessionStore(world.pool, clock),
        secure=secure,
    )
    return Console(world.pool, rail, gate, templates(), clock, policy)


def client_of(console: Console, base: str = "http://console") -> httpx.AsyncClient:
    """An HTTP client on the console's app, keeping cookies like a browser."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(create_app(console)), base_url=base)


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def sign_in(client: httpx.AsyncClient, token: str, next_path: str = "/") -> httpx.Response:
    """Sign in as a browser does: the form first (with its form token and cookie), then POST."""
    form = await client.get("/login", params={"next": next_path})
    found = CSRF.search(form.text)
    assert found is not None
    return await client.post(
        "/login", data={"token": token, "next": next_path, "csrf": found.group(1)}
    )


@pytest.fixture
async def browser(
    world: World, rail: StripeLookup, clock: Clock
) -> AsyncIterator[httpx.AsyncClient]:
    """A client signed in as erin, by the form."""
    async with client_of(console_of(world, rail, clock)) as client:
        signed = await sign_in(client, ERIN)
        assert signed.status_code == 303
        yield client


def bearer(token: str = ERIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def csrf_of(client: httpx.AsyncClient, path: str = "/") -> str:
    """The form token a page of the signed-in client carries."""
    found = CSRF.search((await client.get(path)).text)
    assert found is not None
    return found.group(1)


def error_code(page: httpx.Response) -> str | None:
    """The machine-readable code of the error a page shows."""
    found = re.search(r'id="error"[^>]*data-code="([a-z_]+)"', page.text)
    return found.group(1) if found else None


def outcomes(page: httpx.Response) -> dict[str, tuple[str, str]]:
    """Each item's outcome a page shows after a bulk action: id -> (done|proposed|refused,
    code)."""
    rows = re.findall(
        r'<tr class="outcome" data-id="([^"]+)" data-outcome="(done|proposed|refused)" '
        r'data-code="([^"]*)"',
        page.text,
    )
    return {item: (outcome, code) for item, outcome, code in rows}


def row_ids(page: httpx.Response, css: str) -> list[str]:
    """The data-id of each `tr.<css>` of a page, in order."""
    return re.findall(rf'<tr class="{css}" data-id="([^"]+)"', page.text)


async def plant_inbox(pool: asyncpg.Pool, status: str, settlement_id: str | None = None) -> int:
    """An inbox row in `status` (dead, parked or mismatch) with a reason; its row id."""
    mismatch = json.dumps([{"field": "amount", "expected": 700, "received": 500}])
    row_id: int = await pool.fetchval(
        """INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, settlement_id,
                                     payload, status, reason, mismatch)
           VALUES ('stripe', $1, 'transfer.paid', $2, $3::uuid, '\\x7b7d', $4,
                   'planted for the console', CASE WHEN $4 = 'mismatch' THEN $5::jsonb END)
           RETURNING id""",
        unique("evt_"),
        unique("tr_"),
        settlement_id,
        status,
        mismatch,
    )
    return row_id


async def accept(
    world: World,
    *,
    reference: str | None = None,
    payee: str = "payee-7",
    destination: str = "acct_1Q2w3E",
    amount: int = 700,
) -> str:
    """A settlement accepted by the ledger with these fields; its id."""
    body = {
        "reference": reference or unique("ref-"),
        "payee": payee,
        "destination": destination,
        "amount": amount,
        "currency": "EUR",
    }
    request = parse_settlement_body(TENANT, unique("key-"), json.dumps(body).encode())
    result = await Ledger(world.pool, Books(WINDOWS)).accept_many([request])
    return str(json.loads(result[0].body)["id"])

"""The service roles of migration 0024: each service's role may run every statement of its
service and nothing it does not need (the inbox cannot redirect a payout, the console cannot
post to the ledger, the relay records an instruction's status, the ledger books); and no one,
the tables' owner included, changes what a rail instruction pays once it is written."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import asyncpg
import pytest
from sqlalchemy.engine import make_url

import services
from tests.conftest import asyncpg_dsn, unique
from tests.harness import Servers
from tests.integration.test_ledger_api import ledger_settings, running_ledger

pytestmark = pytest.mark.integration
ROLES = ("settle_ledger", "settle_relay", "settle_inbox", "settle_reconciler", "settle_console")
# The statements each service runs: its modules' SQL (module, or module:NAME for one).
SQL_OF = {
    "settle_ledger": ("services.ledger",),
    "settle_relay": ("services.relay", "services.settlement.transition_sql"),
    "settle_inbox": (
        "services.inbox",
        "services.settlement.transition_sql",
        "services.operations.proposal_rows",
    ),
    "settle_reconciler": (
        "services.reconcile",
        "services.settlement",
        "services.inbox.intake",
        "services.inbox.store",
        "services.inbox.apply",
        "services.operations",
    ),
    "settle_console": (
        "services.console",
        "services.operations.review:LIST",
        "services.operations.review:SHOW",
        "services.operations.breaks",
        "services.operations.break_notes",
        "services.operations.proposal_rows",
        "services.operations.audit",
        "services.inbox.operator",
    ),
}
OWNERS_ONLY = ("services.operations.archive",)  # run by an operator as the tables' owner
SQL = re.compile(r"^\s*(WITH|SELECT|INSERT|UPDATE|DELETE)\b.*\b(FROM|INTO|SET)\b", re.S)


def _statements(wanted: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(name, SQL) of every statement the modules of `wanted` hold at module level."""
    for found in pkgutil.walk_packages(services.__path__, "services."):
        name = found.name
        if not name.startswith(tuple(w.partition(":")[0] for w in wanted)):
            continue
        if name.startswith(OWNERS_ONLY) or ".migrations" in name:
            continue
        for attribute, value in vars(importlib.import_module(name)).items():
            values = value.values() if isinstance(value, dict) else [value]
            where = f"{name}:{attribute}"
            if any(w == where or (":" not in w and name.startswith(w)) for w in wanted):
                yield from ((where, v) for v in values if isinstance(v, str) and SQL.match(v))


@asynccontextmanager
async def as_role(conn: asyncpg.Connection, role: str | None) -> AsyncIterator[None]:
    """A transaction of `conn` as `role` (None: as the connection's own), rolled back after."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        if role is not None:
            await conn.execute(f"SET LOCAL ROLE {role}")
        yield
    finally:
        await transaction.rollback()


async def _refused(conn: asyncpg.Connection, role: str, sql: str) -> bool:
    """Whether `role` lacks a privilege `sql` needs: planned as the role, never run."""
    count = max((int(n) for n in re.findall(r"\$(\d+)", sql)), default=0)
    arguments = f"({', '.join(['NULL'] * count)})" if count else ""
    try:
        async with as_role(conn, role):
            await conn.execute(f"PREPARE statement_under_test AS {sql}")
            await conn.execute(f"EXPLAIN EXECUTE statement_under_test{arguments}")
    except asyncpg.InsufficientPrivilegeError:
        return True
    finally:
        await conn.execute("DEALLOCATE ALL")  # a prepared statement outlives its transaction
    return False


@pytest.fixture
async def owner(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url), statement_cache_size=0)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture(scope="module")
async def booked(infra: Servers, database_url: str, kafka_bootstrap: str) -> str:
    """A settlement booked by the ledger connected as a login of `settle_ledger`; its id."""
    login = unique("settle_ledger_login_")
    admin = await asyncpg.connect(asyncpg_dsn(infra.database_url))
    try:
        await admin.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE settle_ledger')
        url = make_url(database_url).set(username=login).render_as_string(hide_password=False)
        settings = ledger_settings(url, kafka_bootstrap, unique("a"), unique("b"))
        async with running_ledger(settings) as api:
            body = {
                "reference": unique("r"),
                "payee": "p",
                "destination": "acct_1",
                "amount": 1050,
                "currency": "EUR",
            }
            response = await api.post(api.a, unique("k"), body)
            assert response.status_code == 201, response.text
            return str(response.json()["id"])
    finally:
        await admin.execute(f'DROP ROLE IF EXISTS "{login}"')
        await admin.close()


async def test_the_roles_exist_and_own_nothing(owner: asyncpg.Connection) -> None:
    rows = await owner.fetch(
        "SELECT rolname, rolcanlogin, rolsuper FROM pg_roles WHERE rolname = ANY($1::text[])",
        list(ROLES),
    )
    assert sorted((r["rolname"], r["rolcanlogin"], r["rolsuper"]) for r in rows) == sorted(
        (role, False, False) for role in ROLES
    )
    owned = "SELECT count(*) FROM pg_class WHERE relowner = ANY($1::regrole[]::oid[])"
    assert await owner.fetchval(owned, list(ROLES)) == 0


@pytest.mark.parametrize("role", ROLES)
async def test_each_role_may_run_every_statement_of_its_service(
    owner: asyncpg.Connection, role: str
) -> None:
    statements = list(_statements(SQL_OF[role]))
    assert statements
    refused = [name for name, sql in statements if await _refused(owner, role, sql)]
    assert refused == []


async def test_the_reconciler_role_keeps_the_history_months_ahead(
    owner: asyncpg.Connection,
) -> None:
    async with as_role(owner, "settle_reconciler"):
        assert await owner.fetchval("SELECT settle_ensure_month_partitions(14)") >= 0


@pytest.mark.parametrize(
    ("role", "statement"),
    [
        ("settle_inbox", "UPDATE rail_instructions SET destination = 'acct_thief'"),
        ("settle_relay", "UPDATE rail_instructions SET amount = amount * 10"),
        (
            "settle_console",
            "INSERT INTO postings (entry_id, account_id, amount, currency, "
            "occurred_at) VALUES (gen_random_uuid(), 'platform:funding:EUR', 1, 'EUR', now())",
        ),
        ("settle_console", "UPDATE settlements SET status = 'paid'"),
        ("settle_ledger", "UPDATE settlements SET status = 'paid'"),
        ("settle_ledger", "DELETE FROM postings"),
        ("settle_reconciler", "UPDATE idempotency_keys SET settlement_id = NULL"),
        ("settle_relay", "DELETE FROM rail_instructions"),
    ],
)
async def test_a_role_cannot_do_what_its_service_never_does(
    owner: asyncpg.Connection, role: str, statement: str
) -> None:
    assert await _refused(owner, role, statement)


async def test_the_relay_role_records_an_instructions_status(
    owner: asyncpg.Connection, booked: str
) -> None:
    async with as_role(owner, "settle_relay"):
        moved = await owner.execute(
            "UPDATE rail_instructions SET status = 'processing', fence = fence + 1,"
            " lease_until = now() + interval '30 seconds', claimed_by = 'relay-test',"
            " attempts = attempts + 1, first_sent_at = now(), updated_at = now()"
            " WHERE settlement_id = $1 AND status = 'pending'",
            booked,
        )
        assert moved == "UPDATE 1"


@pytest.mark.parametrize("change", ["amount = amount + 1", "currency = 'USD'", "destination = 'x'"])
@pytest.mark.parametrize("role", [None, "settle_relay"], ids=["owner", "relay"])
async def test_no_one_changes_what_an_instruction_pays_not_even_the_owner(
    owner: asyncpg.Connection, booked: str, change: str, role: str | None
) -> None:
    expected = (
        asyncpg.RestrictViolationError if role is None else asyncpg.InsufficientPrivilegeError
    )
    with pytest.raises(expected):
        async with as_role(owner, role):
            await owner.execute(
                f"UPDATE rail_instructions SET {change} WHERE settlement_id = $1", booked
            )
    # What the trigger guards is the money alone: the owner may still move the status.
    async with as_role(owner, None):
        moved = "UPDATE rail_instructions SET status = 'failed' WHERE settlement_id = $1"
        assert await owner.execute(moved, booked) == "UPDATE 1"

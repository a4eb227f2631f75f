"""The service role of deploy/postgres/service_role.sql: it books settlements and keeps the
history's months, but cannot rewrite an append-only table, truncate one or disable its
trigger; and production mode refuses to start on the tables' owner instead."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from services.adapters.postgres.database import create_pool
from services.domain.errors import ConfigError
from services.platform.config import Deployment
from services.platform.sections import DatabaseSection
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_api import ledger_settings, running_ledger
from tools.infra.paths import repo_root

pytestmark = pytest.mark.integration
SCRIPT = repo_root() / "deploy" / "postgres" / "service_role.sql"
REFUSED = [
    "UPDATE postings SET amount = amount",
    "DELETE FROM settlement_transitions",
    "TRUNCATE postings",
    "ALTER TABLE postings DISABLE TRIGGER postings_append_only",
    "ALTER TABLE settlements DISABLE TRIGGER ALL",
    "DROP TABLE outbox",
    "CREATE TABLE settle_probe (id int)",
]


@dataclass(frozen=True)
class Roles:
    """One migrated database, as its owner and as the service role granted by the script."""

    owner_url: str
    service_url: str


async def _run(url: str, sql: str) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _grant(url: str, role: str) -> subprocess.CompletedProcess[str]:
    """Run the grants script as the owner of `url`'s database, for `role`."""
    args = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"service_role={role}"]
    args += ["-f", str(SCRIPT), asyncpg_dsn(url)]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
async def roles(infra: Servers) -> AsyncIterator[Roles]:
    role = unique("settle_app_")
    await _run(infra.database_url, f'CREATE ROLE "{role}" LOGIN')
    try:
        async with scratch_database(infra.database_url, "settle_role_") as url:
            done = await asyncio.to_thread(_grant, url, role)
            assert done.returncode == 0, done.stderr
            service = make_url(url).set(username=role).render_as_string(hide_password=False)
            yield Roles(url, service)
    finally:
        await _run(infra.database_url, f'DROP ROLE IF EXISTS "{role}"')


@pytest.mark.parametrize("statement", REFUSED)
async def test_the_service_role_cannot_rewrite_history_or_the_schema(
    roles: Roles, statement: str
) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await _run(roles.service_url, statement)


async def test_the_service_role_books_a_settlement(roles: Roles, kafka_bootstrap: str) -> None:
    settings = ledger_settings(roles.service_url, kafka_bootstrap, unique("a"), unique("b"))
    async with running_ledger(settings) as api:
        body = {
            "reference": unique("r"),
            "payee": "p",
            "destination": "acct_1",
            "amount": 1050,
            "currency": "USD",
        }
        response = await api.post(api.a, unique("k"), body)
        assert response.status_code == 201, response.text
        assert len(await api.settlements_of(api.a)) == 1


async def test_the_service_role_keeps_the_history_months_ahead(roles: Roles) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(roles.service_url))
    try:
        assert await conn.fetchval("SELECT settle_ensure_month_partitions(14)") > 0
    finally:
        await conn.close()


def _production(url: str) -> DatabaseSection:
    # Built past validation: this test server speaks no TLS, and the owner check is the one
    # under test here.
    return DatabaseSection.model_construct(env=Deployment.PRODUCTION, database_url=url)


async def test_production_refuses_to_start_as_the_tables_owner(roles: Roles) -> None:
    with pytest.raises(ConfigError) as caught:
        await create_pool(_production(roles.owner_url))
    assert caught.value.variable == "SETTLE_DATABASE_URL"
    assert "owner" in caught.value.problem
    pool = await create_pool(_production(roles.service_url))
    try:
        assert await pool.fetchval("SELECT count(*) FROM settlements") >= 0
    finally:
        await pool.close()


async def test_production_refuses_a_role_that_may_become_the_owner(
    infra: Servers, roles: Roles
) -> None:
    owner = make_url(roles.owner_url).username
    member = unique("settle_member_")
    # NOINHERIT: it holds none of the owner's rights until it runs SET ROLE, which it may.
    await _run(infra.database_url, f'CREATE ROLE "{member}" LOGIN NOINHERIT IN ROLE "{owner}"')
    try:
        url = make_url(roles.owner_url).set(username=member).render_as_string(hide_password=False)
        with pytest.raises(ConfigError, match=r"^SETTLE_DATABASE_URL: "):
            await create_pool(_production(url))
    finally:
        await _run(infra.database_url, f'DROP ROLE "{member}"')

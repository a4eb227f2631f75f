"""The ledger through PgBouncer in transaction mode (Debian's pgbouncer, started here on a free
port in front of the real PostgreSQL, clients logging in with SCRAM from its userlist): with
`SETTLE_DATABASE_POOLED=true` it accepts settlements over HTTP and reads them back, on more
client connections than the bouncer has server connections, so consecutive transactions of
one client run on different server sessions. The relay and the reconciler, which need
sessions, refuse the pooled URL at start naming the variable.

PgBouncer missing and not installable fails these tests (tools.infra.pgbouncer says how)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url

from tests.conftest import asyncpg_dsn, unique
from tests.harness import Servers
from tests.integration.test_ledger_api import ledger_settings, running_ledger, settlement
from tools.cli import cli
from tools.infra.pgbouncer import Bouncer, pgbouncer

pytestmark = pytest.mark.integration

COUNT = 24


@pytest.fixture(scope="module")
def bouncer(infra: Servers) -> Iterator[Bouncer]:
    """PgBouncer before the test server, two server connections per database and role."""
    with pgbouncer(infra.database_url, pool_size=2) as running:
        yield running


def pooled_url(bouncer: Bouncer, database_url: str) -> str:
    return bouncer.url(str(make_url(database_url).database))


async def test_the_ledger_accepts_and_reads_back_through_pgbouncer(
    bouncer: Bouncer, database_url: str, kafka_bootstrap: str
) -> None:
    url = pooled_url(bouncer, database_url)
    a, b = unique("pa"), unique("pb")
    settings = ledger_settings(url, kafka_bootstrap, a, b, SETTLE_DATABASE_POOLED="true")
    async with running_ledger(settings) as api:
        bodies = [settlement(amount=1_000 + n) for n in range(COUNT)]
        created = await asyncio.gather(*(api.post(a, unique("key-"), body) for body in bodies))
        assert [r.status_code for r in created] == [201] * COUNT, created[0].text
        # Read back all at once: the pool's connections share the bouncer's two.
        reads = await asyncio.gather(
            *(
                api.client.get(f"/v1/settlements/{r.json()['id']}", headers=api.auth(a))
                for r in created
            )
        )
        assert [r.status_code for r in reads] == [200] * COUNT
        got = [(r.json()["reference"], r.json()["amount"]) for r in reads]
        assert got == [(body["reference"], body["amount"]) for body in bodies]
        stored = await api.settlements_of(a)
        assert sorted(r["amount"] for r in stored) == [1_000 + n for n in range(COUNT)]
        # Nothing named was prepared on the server sessions the bouncer lent this pool.
        assert await api.pool.fetchval("SELECT count(*) FROM pg_prepared_statements") == 0


async def test_a_statement_cache_through_the_bouncer_is_what_breaks(
    bouncer: Bouncer, database_url: str
) -> None:
    # The control: asyncpg's default named statements, prepared on one server session, are
    # looked for on another once the bouncer lends the client a different one.
    url = asyncpg_dsn(pooled_url(bouncer, database_url))
    pool = await asyncpg.create_pool(url, min_size=4, max_size=4)
    try:

        async def reads(n: int) -> None:
            for _ in range(20):
                async with pool.acquire() as conn:
                    await conn.fetchval("SELECT $1::int + count(*) FROM pg_class", n)

        with pytest.raises(asyncpg.PostgresError, match="prepared statement"):
            await asyncio.gather(*(reads(n) for n in range(8)))
    finally:
        pool.terminate()


@pytest.mark.parametrize(
    ("command", "service"),
    [(["relay", "--port", "1"], "relay"), (["reconciler", "--port", "1"], "reconciler")],
)
def test_the_services_that_need_sessions_refuse_the_pooled_url_at_start(
    bouncer: Bouncer, database_url: str, command: list[str], service: str
) -> None:
    env = {
        "SETTLE_DATABASE_URL": pooled_url(bouncer, database_url),
        "SETTLE_DATABASE_POOLED": "true",
    }
    done = CliRunner().invoke(cli, command, env=env)
    assert done.exit_code == 1, done.output
    assert "SETTLE_DATABASE_POOLED: is true, but this service needs" in done.output
    assert "direct SETTLE_DATABASE_URL" in done.output

"""Session fixtures: a PostgreSQL database migrated to head and a Kafka bootstrap.

Tests never clean tables: each one works under ids and topic names of its own.

A skipped test proves nothing, so a skip fails the run unless `SETTLE_ALLOW_SKIPS=1` says it
may pass (for a run against servers someone else runs, where the launcher's own test skips).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from services.adapters.postgres.history_months import open_months_since
from services.adapters.postgres.migrate import upgrade
from tests.harness import INFRA_MARK, Servers, servers, stop_what_the_run_started

ALLOW_SKIPS = "SETTLE_ALLOW_SKIPS"
# Tests stamp history with fixed clocks from this month on (inbox_support's T0, ...), while
# the migration makes the history's monthly partitions only around today: a test database
# gets these months too, so a fixed clock finds its month whenever the suite runs.
FIXED_CLOCKS_FROM = datetime(2026, 1, 1)


def unique(prefix: str = "") -> str:
    """A short id no other test or run uses."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def asyncpg_dsn(database_url: str) -> str:
    """The plain libpq form of a SQLAlchemy URL, for asyncpg and psql."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def with_database(database_url: str, name: str) -> str:
    """`database_url` pointing at database `name` on the same server."""
    return make_url(database_url).set(database=name).render_as_string(hide_password=False)


async def create_database(server_url: str, name: str, template: str | None = None) -> str:
    """Create database `name` on the server of `server_url` (a copy of `template`, if one is
    named); return its URL."""
    copy = f' TEMPLATE "{template}"' if template else ""
    conn = await asyncpg.connect(asyncpg_dsn(server_url))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"{copy}')
    finally:
        await conn.close()
    return with_database(server_url, name)


async def drop_database(server_url: str, name: str) -> None:
    """Drop database `name`, disconnecting whoever still uses it."""
    conn = await asyncpg.connect(asyncpg_dsn(server_url))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def migrate(url: str) -> None:
    """Migrate the database at `url` to head, with the history's months from
    FIXED_CLOCKS_FROM on."""
    await asyncio.to_thread(upgrade, url)
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await open_months_since(conn, FIXED_CLOCKS_FROM)
    finally:
        await conn.close()


@asynccontextmanager
async def scratch_database(
    server_url: str, prefix: str, *, migrated: bool = True
) -> AsyncIterator[str]:
    """A database of its own on the server (migrated to head unless told not to); its URL.
    Dropped on the way out, whoever still uses it."""
    name = unique(prefix)
    url = await create_database(server_url, name)
    try:
        if migrated:
            await migrate(url)
        yield url
    finally:
        await drop_database(server_url, name)


async def assert_books_balance(pool: asyncpg.Pool) -> None:
    """Every journal entry sums to zero per currency, and every account's balance shards add
    up to its postings."""
    unbalanced = await pool.fetchval(
        "SELECT count(*) FROM (SELECT entry_id FROM postings GROUP BY entry_id, currency "
        "HAVING sum(amount) <> 0) u"
    )
    assert unbalanced == 0
    drift = await pool.fetchval(
        """SELECT count(*) FROM (SELECT account_id, sum(balance) AS b FROM account_balances
                                 GROUP BY account_id) b
             FULL JOIN (SELECT account_id, sum(amount) AS p FROM postings GROUP BY account_id) p
             USING (account_id)
            WHERE coalesce(b, 0) <> coalesce(p, 0)"""
    )
    assert drift == 0


def pytest_configure(config: pytest.Config) -> None:
    """In the run's controlling process (not an xdist worker): name the mark file a process
    that starts the servers leaves, before any worker starts (see tests/harness.py)."""
    if not hasattr(config, "workerinput"):
        mark = Path(tempfile.gettempdir()) / f"settle-test-infra-{os.getpid()}"
        os.environ[INFRA_MARK] = str(mark)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's last step, once every worker is done: stop what the run started."""
    if not hasattr(config, "workerinput"):
        stop_what_the_run_started()


@pytest.fixture(scope="session")
def infra() -> Iterator[Servers]:
    """The session's PostgreSQL server and Kafka broker (see tests/harness.py)."""
    with servers() as found:
        yield found


@pytest.fixture(scope="session")
async def database_url(infra: Servers) -> AsyncIterator[str]:
    """A database of this session's own, migrated to head, dropped afterwards."""
    async with scratch_database(infra.database_url, "settle_test_") as url:
        yield url


@pytest.fixture(scope="module")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on the session's database, one per test module."""
    pool = await asyncpg.create_pool(asyncpg_dsn(database_url), min_size=1, max_size=10)
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An async SQLAlchemy engine on the session's database."""
    engine = create_async_engine(database_url, pool_size=5)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
def kafka_bootstrap(infra: Servers) -> str:
    """Bootstrap servers of the session's Kafka."""
    return infra.kafka_bootstrap


@pytest.fixture
def topic_prefix() -> str:
    """A topic-name prefix no other test uses, for `SETTLE_TOPIC_PREFIX`."""
    return unique("t") + "."


def skips_allowed() -> bool:
    """Whether this run lets a skipped test pass: only when `SETTLE_ALLOW_SKIPS=1`."""
    return os.environ.get(ALLOW_SKIPS) == "1"


def fail_a_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn a skip report into a failure that keeps the skip's reason."""
    if not report.skipped or hasattr(report, "wasxfail") or skips_allowed():
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = f"skipped ({reason}); a skip fails the run unless {ALLOW_SKIPS}=1"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """A test that skips fails instead (see the module docstring)."""
    report: pytest.TestReport = yield
    fail_a_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    """A module that skips as a whole fails instead."""
    report: pytest.CollectReport = yield
    fail_a_skip(report)
    return report

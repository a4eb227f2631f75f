"""The benchmarks' own database beside the service's, so their rows never mix, made afresh for
every run, one per running bench process."""

from __future__ import annotations

import asyncio
import json
import os

import asyncpg
from sqlalchemy.engine import make_url

from services.adapters.postgres.migrate import upgrade
from services.apps.ledger import windows
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.platform.service_settings import Settings
from tools.infra.procs import pid_alive


def libpq_env(database_url: str) -> dict[str, str]:
    """The environment psql and pgbench need beside their arguments (the password, if any)."""
    password = make_url(database_url).password
    return {**os.environ, "PGPASSWORD": str(password)} if password else dict(os.environ)


def libpq_args(database_url: str) -> list[str]:
    """Connection options for psql and pgbench taken from a SQLAlchemy URL."""
    url = make_url(database_url)
    args = [f"--host={url.host or '127.0.0.1'}", f"--port={url.port or 5432}"]
    args += [f"--username={url.username}"] if url.username else []
    return [*args, str(url.database)]  # the database last: pgbench takes it only positionally


def _run_of(name: str, prefix: str) -> int | None:
    """The pid of the bench run that made database `name`, if it is one of `prefix`'s."""
    suffix = name.removeprefix(prefix)
    return int(suffix) if name.startswith(prefix) and suffix.isdigit() else None


async def _recreate(server_url: str, prefix: str, name: str) -> None:
    dsn = make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        names = [str(r["datname"]) for r in await conn.fetch("SELECT datname FROM pg_database")]
        ended = [n for n in names if (run := _run_of(n, prefix)) is not None and not pid_alive(run)]
        for stale in [*ended, name]:
            await conn.execute(f'DROP DATABASE IF EXISTS "{stale}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def bench_database(database_url: str) -> str:
    """URL of `<database>_bench_<pid>` on the same server, made afresh and migrated: every run
    starts from empty tables, so figures do not drift as earlier runs' rows pile up, and two
    runs at once (the server is shared) never drop each other's. Databases of bench runs that
    have ended are dropped on the way."""
    url = make_url(database_url)
    prefix = f"{url.database}_bench_"
    name = f"{prefix}{os.getpid()}"
    asyncio.run(_recreate(database_url, prefix, name))
    bench_url = url.set(database=name).render_as_string(hide_password=False)
    upgrade(bench_url)
    return bench_url


async def book_settlements(
    pool: asyncpg.Pool, settings: Settings, tenant: str, prefix: str, count: int
) -> list[str]:
    """Book `count` settlements of `tenant` (references `<prefix>-<n>`) through the ledger's
    own acceptor, as a benchmark's starting point; their ids."""
    requests = [
        parse_settlement_body(
            tenant,
            f"{prefix}-{n}",
            json.dumps(
                {
                    "reference": f"{prefix}-{n}",
                    "payee": "p",
                    "destination": f"acct_{n % 50}",
                    "amount": 100 + n,
                    "currency": "USD",
                }
            ).encode(),
        )
        for n in range(count)
    ]
    results = await Ledger(pool, Books(windows(settings))).accept_many(requests)
    return [r.settlement_id for r in results if r.settlement_id]

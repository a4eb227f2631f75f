"""Alembic environment: runs migrations over asyncpg, one migrator at a time, each migration
in a transaction of its own under bounded lock waits (see migration_run beside migrate.py)."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from services.adapters.postgres.migrate import LOCK_TIMEOUT, migration_engine
from services.adapters.postgres.migration_run import (
    LOCK_TIMEOUT_MS,
    STATEMENT_TIMEOUT_MS,
    release,
    set_bounds,
    with_retries,
)


def _once(connection: Connection) -> None:
    # Each migration commits on its own: a lock one takes is held only while it runs, and a
    # migration that fails leaves the ones before it done. The connection must be outside a
    # transaction here, or alembic would run them all in that one.
    context.configure(connection=connection, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection: Connection) -> None:
    lock_timeout_ms = int(context.config.attributes.get(LOCK_TIMEOUT, LOCK_TIMEOUT_MS))
    set_bounds(connection, lock_timeout_ms, STATEMENT_TIMEOUT_MS)
    try:
        with_retries(lambda: _once(connection), lock_timeout_ms, connection.rollback)
        connection.commit()
    finally:
        release(connection)


async def _migrate(url: str) -> None:
    engine = migration_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


url = context.config.get_main_option("sqlalchemy.url")
if url is None:
    raise RuntimeError("sqlalchemy.url is not set; run migrations through `settle migrate`")
asyncio.run(_migrate(url))

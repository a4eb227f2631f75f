"""Alembic environment: runs migrations over asyncpg, one migrator at a time."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from services.adapters.postgres.migrate import migration_engine

# Any number of processes may run `settle migrate` at once (replicas starting together,
# parallel test sessions); a transaction-scoped advisory lock makes them take turns.
MIGRATION_LOCK_ID = 0x5E771E


def _run(connection: Connection) -> None:
    context.configure(connection=connection, transaction_per_migration=False)
    with context.begin_transaction():
        connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
        context.run_migrations()


async def _migrate(url: str) -> None:
    engine = migration_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


url = context.config.get_main_option("sqlalchemy.url")
if url is None:
    raise RuntimeError("sqlalchemy.url is not set; run migrations through `settle migrate`")
asyncio.run(_migrate(url))

"""The PostgreSQL connection pool every service opens the same way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg

from services.shared.config import Settings, libpq_dsn

Reset = Callable[[asyncpg.Connection], Awaitable[None]]


async def keep_session(conn: asyncpg.Connection) -> None:
    """A pool `reset` that sends nothing, for a service that keeps no session state (LISTEN,
    advisory locks, session SETs): asyncpg still rolls back a transaction left open."""


async def create_pool(
    settings: Settings,
    max_size: int = 10,
    server_settings: dict[str, str] | None = None,
    reset: Reset | None = None,
) -> asyncpg.Pool:
    """A connection pool that opens connections on demand, so start-up never needs PostgreSQL.

    `reset` runs as a connection goes back to the pool; by default asyncpg's full reset, one
    round trip per release that clears listeners, advisory locks and session settings."""
    pool = await asyncpg.create_pool(
        libpq_dsn(settings.database_url), min_size=0, max_size=max_size, command_timeout=30,
        server_settings=server_settings, reset=reset,
    )  # fmt: skip
    if pool is None:  # asyncpg types the awaited pool as optional; it never is once awaited
        raise RuntimeError("asyncpg.create_pool returned no pool")
    return pool

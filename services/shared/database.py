"""The PostgreSQL connection pool every service opens the same way."""

from __future__ import annotations

import asyncpg

from services.shared.config import Settings, libpq_dsn


async def _keep_session(_: asyncpg.Connection) -> None:
    """A released connection goes back as it is (an open transaction is still rolled back)."""


async def create_pool(
    settings: Settings, max_size: int = 10, server_settings: dict[str, str] | None = None,
    keep_sessions: bool = False,
) -> asyncpg.Pool:  # fmt: skip
    """A connection pool that opens connections on demand, so start-up never needs PostgreSQL.

    `keep_sessions` skips the reset query on every release (a round trip and a transaction of
    its own), for a service that leaves no session state behind: no SET, advisory lock, open
    cursor or LISTEN on a connection it gives back."""
    pool = await asyncpg.create_pool(
        libpq_dsn(settings.database_url), min_size=0, max_size=max_size, command_timeout=30,
        server_settings=server_settings, reset=_keep_session if keep_sessions else None,
    )  # fmt: skip
    if pool is None:  # asyncpg types the awaited pool as optional; it never is once awaited
        raise RuntimeError("asyncpg.create_pool returned no pool")
    return pool

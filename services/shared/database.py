"""The PostgreSQL connection pool every service opens the same way."""

from __future__ import annotations

import asyncpg

from services.shared.config import Settings, libpq_dsn


async def create_pool(
    settings: Settings, max_size: int = 10, server_settings: dict[str, str] | None = None
) -> asyncpg.Pool:
    """A connection pool that opens connections on demand, so start-up never needs PostgreSQL."""
    pool = await asyncpg.create_pool(
        libpq_dsn(settings.database_url), min_size=0, max_size=max_size, command_timeout=30,
        server_settings=server_settings,
    )  # fmt: skip
    if pool is None:  # asyncpg types the awaited pool as optional; it never is once awaited
        raise RuntimeError("asyncpg.create_pool returned no pool")
    return pool

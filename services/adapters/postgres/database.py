"""The PostgreSQL connection pool every service opens the same way."""

from __future__ import annotations

import asyncpg

from services.domain.errors import ConfigError
from services.platform.config import Deployment, libpq_dsn
from services.platform.sections import DatabaseSection

# A table of settle's schema whose owner the connected role is or may become (the owner, a
# member of the owner's role, a superuser): such a role could disable the append-only triggers.
OWNED_TABLE = """
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
   AND pg_has_role(current_user, c.relowner, 'MEMBER')
 ORDER BY c.relname LIMIT 1
"""


async def _keep_session(_: asyncpg.Connection) -> None:
    """A released connection goes back as it is (an open transaction is still rolled back)."""


async def create_pool(
    settings: DatabaseSection,
    max_size: int = 10,
    server_settings: dict[str, str] | None = None,
    keep_sessions: bool = False,
    as_owner: bool = False,
) -> asyncpg.Pool:
    """A connection pool that opens connections on demand, so start-up never needs PostgreSQL
    (but in production mode, which first refuses a role owning the tables: refuse_table_owner).

    `keep_sessions` skips the reset query on every release (a round trip and a transaction of
    its own), for a service that leaves no session state behind: no SET, advisory lock, open
    cursor or LISTEN on a connection it gives back. `as_owner`: a command doing the owner's
    work (detaching partitions) skips the refusal.

    Through a transaction pooler (`SETTLE_DATABASE_POOLED`) a connection's next transaction
    may run on another server session, so nothing is prepared to be used later: the
    statement cache is off (asyncpg then parses each statement again in the message
    sequence that binds and runs it)."""
    pool = await asyncpg.create_pool(
        libpq_dsn(settings.database_url),
        min_size=0,
        max_size=max_size,
        command_timeout=30,
        server_settings=server_settings,
        reset=_keep_session if keep_sessions else None,
        **pooled_options(settings),
    )
    if pool is None:  # asyncpg types the awaited pool as optional; it never is once awaited
        raise RuntimeError("asyncpg.create_pool returned no pool")
    if settings.env is Deployment.PRODUCTION and not as_owner:
        try:
            await refuse_table_owner(pool)
        except BaseException:
            await pool.close()
            raise
    return pool


def pooled_options(settings: DatabaseSection) -> dict[str, int]:
    """asyncpg's options for the settings' URL: no statement cache through a pooler."""
    return {"statement_cache_size": 0} if settings.database_pooled else {}


async def refuse_table_owner(pool: asyncpg.Pool) -> None:
    """Raise ConfigError naming SETTLE_DATABASE_URL when its role holds the owner's rights
    over a settle table; return when it may only read and write rows."""
    owned = await pool.fetchval(OWNED_TABLE)
    if owned is not None:
        raise ConfigError(
            "SETTLE_DATABASE_URL",
            f"connects as a role with the owner's rights over table {owned} (it could disable "
            "the append-only triggers); in production mode connect as the service role of "
            "deploy/postgres/service_role.sql",
        )

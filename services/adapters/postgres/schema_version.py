"""A service starts only against a schema at least as new as the code needs.

The rule (`schema_problem`): the database's revision must be this code's head, or a revision
newer than any this code knows. Newer is allowed because every migration keeps the code of
the release before it working (the expand/contract policy of docs/migrations.md): during a
rolling upgrade the schema moves first, and a binary rolled back meets a schema ahead of it.
A known revision other than the head is older: refused, naming both revisions. Revisions are
numbered (`0001`, `0002`, ...), so a revision this code does not know is newer when its number
is above the head's; anything else is not settle's schema.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import asyncpg

from services.adapters.postgres.migrate import REVISION, head_revision, known_revisions
from services.adapters.postgres.store_errors import UNREACHABLE
from services.domain.errors import ConfigError

log = logging.getLogger(__name__)


def schema_problem(found: str | None, head: str, known: Collection[str]) -> str | None:
    """Why a schema at revision `found` (None: never migrated) cannot serve code whose newest
    revision is `head` among `known`; None when it can."""
    if found == head:
        return None
    if found is None:
        return f"schema has no revision, this settle needs {head}: run settle migrate"
    if found in known:
        return f"schema at {found}, this settle needs {head}: run settle migrate"
    if found.isdigit() and head.isdigit() and int(found) > int(head):
        return None  # a later release's (migrate.is_ahead)
    return f"schema at {found}, unknown to this settle (it needs {head})"


async def _revision(pool: asyncpg.Pool) -> str | None:
    try:
        return await pool.fetchval(REVISION)  # type: ignore[no-any-return]
    except asyncpg.UndefinedTableError:
        return None


async def require_schema(pool: asyncpg.Pool) -> None:
    """Close `pool` and raise ConfigError naming SETTLE_DATABASE_URL when the database's
    schema is older than this code's head (or not settle's); return when it is at or past it.
    A database out of reach is left to the readiness checks: the service starts, and says it
    is not ready."""
    head = head_revision()
    found: str | None = None
    try:
        found = await _revision(pool)
    except UNREACHABLE as e:
        log.warning("schema revision not checked: the database is out of reach (%s)", e)
        return
    except asyncpg.InsufficientPrivilegeError:
        # The service roles may read alembic_version from 0029 on.
        problem: str | None = (
            f"schema older than 0029, this settle needs {head}: run settle migrate"
        )
    else:
        problem = schema_problem(found, head, known_revisions())
    if problem is not None:
        await pool.close()
        raise ConfigError("SETTLE_DATABASE_URL", problem)
    if found != head:
        log.info("schema at %s, ahead of this settle's %s: running on it", found, head)

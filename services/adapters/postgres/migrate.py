"""Bring a PostgreSQL database to the schema this code needs (Alembic, to head), or to any
revision this code knows, up or down; how each migration runs is migration_run's."""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from services.adapters.postgres.migration_run import LOCK_TIMEOUT_MS
from services.platform.config import libpq_dsn

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
LOCK_TIMEOUT = "lock_timeout_ms"  # the alembic attribute env.py reads it from
BASE = "base"  # the empty schema, below the first revision
REVISION = "SELECT version_num FROM alembic_version"


class UnknownRevision(ValueError):
    """A revision this code does not know, asked for or found in the database."""


def _config(
    database_url: str, production: bool = False, lock_timeout_ms: int = LOCK_TIMEOUT_MS
) -> Config:
    config = Config()
    # A database first migrated in production mode starts with two-person mode on (0026).
    config.attributes["production"] = production
    config.attributes[LOCK_TIMEOUT] = lock_timeout_ms
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolation would choke on a '%' in a password.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def migration_engine(database_url: str) -> AsyncEngine:
    """An engine whose connections asyncpg opens from the libpq DSN of `database_url`, as the
    services' pools are opened, so `sslmode`, `sslrootcert` and the rest reach asyncpg."""
    # SQLAlchemy would pass the URL's query on as keyword arguments, and asyncpg.connect takes
    # no `sslmode=`: migrating over TLS would fail before the first statement.
    dsn = libpq_dsn(database_url)
    return create_async_engine("postgresql+asyncpg://", async_creator=lambda: asyncpg.connect(dsn))


def upgrade(
    database_url: str,
    revision: str = "head",
    *,
    production: bool = False,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
) -> None:
    """Migrate the database at `database_url` up to `revision`; safe to run concurrently.
    `production`: the database is a production one (its two-person mode starts on).
    `lock_timeout_ms`: how long a statement waits for a table's lock before its migration is
    rolled back and tried again."""
    command.upgrade(_config(database_url, production, lock_timeout_ms), revision)


def downgrade(database_url: str, revision: str, *, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
    """Migrate the database at `database_url` down to `revision` (`base` empties it, `-1` is
    one step down)."""
    command.downgrade(_config(database_url, lock_timeout_ms=lock_timeout_ms), revision)


@cache
def known_revisions() -> tuple[str, ...]:
    """Every revision this code knows, oldest first."""
    script = ScriptDirectory.from_config(_config("postgresql://unused"))
    return tuple(reversed([r.revision for r in script.walk_revisions()]))


def head_revision() -> str:
    """The newest revision this code knows."""
    return known_revisions()[-1]


async def _read_revision(database_url: str) -> str | None:
    conn = await asyncpg.connect(libpq_dsn(database_url))
    try:
        return await conn.fetchval(REVISION)  # type: ignore[no-any-return]
    except asyncpg.UndefinedTableError:
        return None
    finally:
        await conn.close()


def is_ahead(revision: str, head: str) -> bool:
    """Whether `revision`, unknown to this code, is a later release's: numbered above `head`."""
    unknown = revision not in known_revisions()
    return unknown and revision.isdigit() and head.isdigit() and int(revision) > int(head)


def current_revision(database_url: str) -> str | None:
    """The revision the database at `database_url` is at; None before its first migration."""
    return asyncio.run(_read_revision(database_url))


def _position(revision: str, where: str) -> int:
    """`revision`'s place among known_revisions (-1 for base); UnknownRevision otherwise."""
    if revision == BASE:
        return -1
    known = known_revisions()
    if revision not in known:
        raise UnknownRevision(
            f"{where} {revision!r} is not a revision this settle knows "
            f"({known[0]} to {known[-1]}, or head, or base)"
        )
    return known.index(revision)


def migrate_to(
    database_url: str,
    target: str,
    *,
    production: bool = False,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
) -> tuple[str | None, str | None]:
    """Move the database at `database_url` up or down to `target` (a known revision, `head`
    or `base`); the revisions before and after. UnknownRevision for a target, or a database
    revision, this code does not know; but to `head` a schema already ahead of it (a later
    release's, this code rolled back) stays as it is."""
    goal = _position(head_revision() if target == "head" else target, "revision")
    before = current_revision(database_url)
    if target == "head" and before is not None and is_ahead(before, head_revision()):
        return before, before
    now = _position(before or BASE, "the database's revision")
    if goal > now:
        upgrade(
            database_url,
            known_revisions()[goal],
            production=production,
            lock_timeout_ms=lock_timeout_ms,
        )
    elif goal < now:
        downgrade(
            database_url,
            known_revisions()[goal] if goal >= 0 else BASE,
            lock_timeout_ms=lock_timeout_ms,
        )
    return before, current_revision(database_url)


def step_down(
    database_url: str, *, lock_timeout_ms: int = LOCK_TIMEOUT_MS
) -> tuple[str | None, str | None]:
    """Undo the database's latest migration; the revisions before and after."""
    before = current_revision(database_url)
    if before is None:
        raise UnknownRevision("the database has no revision: nothing to downgrade")
    now = _position(before, "the database's revision")
    downgrade(
        database_url,
        known_revisions()[now - 1] if now > 0 else BASE,
        lock_timeout_ms=lock_timeout_ms,
    )
    return before, current_revision(database_url)

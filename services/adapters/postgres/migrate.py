"""Bring a PostgreSQL database to the schema this code needs (Alembic, to head)."""

from __future__ import annotations

from pathlib import Path

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from services.platform.config import libpq_dsn

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _config(database_url: str, production: bool = False) -> Config:
    config = Config()
    # A database first migrated in production mode starts with two-person mode on (0026).
    config.attributes["production"] = production
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


def upgrade(database_url: str, revision: str = "head", *, production: bool = False) -> None:
    """Migrate the database at `database_url` up to `revision`; safe to run concurrently.
    `production`: the database is a production one (its two-person mode starts on)."""
    command.upgrade(_config(database_url, production), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Migrate the database at `database_url` down to `revision` (`base` empties it)."""
    command.downgrade(_config(database_url), revision)


def head_revision() -> str:
    """The newest revision this code knows."""
    head = ScriptDirectory.from_config(_config("postgresql://unused")).get_current_head()
    assert head is not None
    return head

"""Bring a PostgreSQL database to the schema this code needs (Alembic, to head)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolation would choke on a '%' in a password.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate the database at `database_url` up to `revision`; safe to run concurrently."""
    command.upgrade(_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Migrate the database at `database_url` down to `revision` (`base` empties it)."""
    command.downgrade(_config(database_url), revision)


def head_revision() -> str:
    """The newest revision this code knows."""
    head = ScriptDirectory.from_config(_config("postgresql://unused")).get_current_head()
    assert head is not None
    return head

"""The bank's state on disk: one SQLite database in the state directory, in WAL mode.

Every change (a file taken, a day turned, the clock advanced) is one transaction, begun
IMMEDIATE so it holds the write lock from its first statement; a simulator killed at any
moment restarts on the state before or after a change, never inside one. The tables are
defined next to the code that owns them; here are only the bank's settings (`meta`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from banksim.intake import DDL as INTAKE_DDL
from banksim.ledger import DDL as LEDGER_DDL
from banksim.reports import DDL as REPORTS_DDL

DATABASE = "banksim.sqlite3"
META_DDL = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"


class Store:
    """The connection to the state database, and its transactions."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / DATABASE
        # Autocommit (isolation_level None): transactions are begun here, explicitly
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA foreign_keys=ON")
        tables = "".join((META_DDL, INTAKE_DDL, LEDGER_DDL, REPORTS_DDL))
        self.db.executescript(f"BEGIN IMMEDIATE; {tables} COMMIT;")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic change: committed if the block ends, rolled back if it raises."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def meta(self, key: str) -> str | None:
        """The setting `key`, or None if it was never set."""
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def close(self) -> None:
        """Close the database; the store is unusable afterwards."""
        self.db.close()


def set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
    """Set the setting `key`, inside the caller's transaction."""
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )

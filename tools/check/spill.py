"""A spill to disk for the facts not read in settlement id order: the events topic and the
rail's effect counts, written once and read back one settlement id range at a time.

An SQLite file in a private temporary directory, removed on close. The process keeps
SQLite's page cache (CACHE_KIB) and the rows of one range, whatever the topic's size; the file
takes about 150 bytes per event read and 100 per settlement with an effect (rows and index):
some 7 GB at 10 million settlements of four events each. Rows are appended as read and
indexed by settlement once, when writing is done (one sort, not a random insert per row).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType

from tools.check.facts import EventFact
from tools.check.pages import IdRange

CACHE_KIB = 8 * 1024

SCHEMA = (
    # rowid keeps the topic's order, so a later copy under one event id wins, as in a dict.
    """CREATE TABLE events (settlement_id TEXT NOT NULL, event_id TEXT NOT NULL,
                            sequence INTEGER NOT NULL, type TEXT NOT NULL, status TEXT)""",
    # One row per settlement per page of the rail's count: a settlement may recur on pages.
    "CREATE TABLE effects (settlement_id TEXT NOT NULL, n INTEGER NOT NULL)",
)
EventRow = tuple[str, str, int, str, str | None]  # settlement id, event id, sequence, type, status


class FactSpill:
    """Events and effect counts on disk, readable per settlement id range once sealed."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="settle-check-")
        self._db = sqlite3.connect(Path(self._dir.name) / "facts.sqlite")
        for pragma in ("journal_mode = OFF", "synchronous = OFF", f"cache_size = -{CACHE_KIB}"):
            self._db.execute(f"PRAGMA {pragma}")
        for statement in SCHEMA:
            self._db.execute(statement)
        self.effect_count = 0  # settlements the rail counted effects for, once sealed

    def __enter__(self) -> FactSpill:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Drop the file."""
        self._db.close()
        self._dir.cleanup()

    def add_events(self, rows: Iterable[EventRow]) -> None:
        """Append events as read from the topic."""
        self._db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", rows)

    def add_effects(self, effects: Mapping[str, int]) -> None:
        """One page of the rail's effect count per settlement id (added to earlier pages)."""
        self._db.executemany("INSERT INTO effects VALUES (?, ?)", effects.items())

    def seal(self) -> None:
        """Index what was written by settlement: writing is done, reading by range starts."""
        self._db.execute("CREATE INDEX events_by_settlement ON events (settlement_id)")
        self._db.execute("CREATE INDEX effects_by_settlement ON effects (settlement_id, n)")
        self._db.commit()
        (self.effect_count,) = self._db.execute(
            "SELECT count(DISTINCT settlement_id) FROM effects"
        ).fetchone()

    def events_in(self, ids: IdRange) -> dict[str, dict[str, EventFact]]:
        """Events per settlement id in `ids`, deduplicated by event id (the last copy kept)."""
        where, args = _where(ids)
        rows = self._db.execute(
            "SELECT settlement_id, event_id, sequence, type, status FROM events"
            f" WHERE {where} ORDER BY settlement_id, rowid",
            args,
        )
        by_settlement: dict[str, dict[str, EventFact]] = {}
        for sid, event_id, sequence, kind, status in rows:
            by_settlement.setdefault(sid, {})[event_id] = EventFact(sequence, kind, status)
        return by_settlement

    def effects_in(self, ids: IdRange) -> dict[str, int]:
        """The rail's effect count per settlement id in `ids`."""
        where, args = _where(ids)
        rows = self._db.execute(
            f"SELECT settlement_id, sum(n) FROM effects WHERE {where} GROUP BY settlement_id", args
        )
        return dict(rows)


def _where(ids: IdRange) -> tuple[str, list[str]]:
    """The SQL condition on settlement_id for `ids`, and its arguments."""
    conditions, args = ["1"], list[str]()
    if ids.after is not None:
        conditions.append("settlement_id > ?")
        args.append(ids.after)
    if ids.through is not None:
        conditions.append("settlement_id <= ?")
        args.append(ids.through)
    return " AND ".join(conditions), args

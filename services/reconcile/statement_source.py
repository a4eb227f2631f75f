"""The rail side of a reconciliation read from a statement file instead of the rail's API.

A drop-in for RailSource (`rail_source.RailReader`): objects by created window and by id,
from what the file says. The file is read once, a line at a time, when the source is opened;
a file that cannot be opened, decoded or parsed raises StatementUnreadable before any run
starts. The run's evidence names the file and counts its lines.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from datetime import UTC, date, datetime
from pathlib import Path

from services.adapters.stripe.source import PAGE_SIZE, STRIPE_API_RAILS
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RailObject, RunKind
from services.reconcile import windows
from services.reconcile.errors import StatementUnreadable
from services.reconcile.statement import Statement, read_statement
from services.reconcile.windows import Window

SOURCE_PREFIX = "statement:"
MAX_SOURCE = 64  # reconciliation_sources.source holds at most this many characters


class StatementSource:
    """A statement file's transfers and payouts, read as the rail's for a reconciliation."""

    rails = STRIPE_API_RAILS

    def __init__(self, name: str, statement: Statement) -> None:
        self.source = (SOURCE_PREFIX + name)[:MAX_SOURCE]
        self.statement = statement

    @classmethod
    def open(cls, path: Path) -> StatementSource:
        """Read the statement at `path`; StatementUnreadable if it cannot be read or parsed."""
        try:
            # newline="": the csv module handles line ends, quoted ones included
            with path.open(encoding="utf-8-sig", newline="") as lines:
                statement = read_statement(lines)
        except (OSError, UnicodeDecodeError) as e:
            raise StatementUnreadable(None, f"{path} cannot be read: {e}") from e
        return cls(path.name, statement)

    def window(self, day: date | None = None) -> Window:
        """The run's window: the whole UTC `day` if given, else the seconds from the file's
        earliest object to its latest; StatementUnreadable if the file has none to span."""
        if day is not None:
            return Window(RunKind.STATEMENT, *windows.end_of_day(day)[1:])
        created = [o.created for o in self.statement.objects.values()]
        if not created:
            raise StatementUnreadable(None, "no transfer or payout line: name its --day")
        start, end = min(created), max(created) + 1
        return Window(RunKind.STATEMENT, _utc(start), _utc(end))

    def rows_read(self, objects: int) -> int:
        """The lines the file had, whatever number of objects they made."""
        return self.statement.lines

    async def objects(self, start: int, end: int) -> list[RailObject]:
        """Every transfer and payout in the file created in [start, end), transfers first."""
        found = [o for o in self.statement.objects.values() if start <= o.created < end]
        return sorted(
            found, key=lambda o: (o.kind is not PayoutMethod.TRANSFER, o.created, o.object_id)
        )

    async def pages(self, start: int, end: int) -> AsyncIterator[list[RailObject]]:
        """The same objects, `PAGE_SIZE` at a time, as the API's pages come."""
        found = await self.objects(start, end)
        for i in range(0, len(found), PAGE_SIZE):
            yield found[i : i + PAGE_SIZE]

    async def retrieve(self, object_ids: Iterable[str]) -> list[RailObject]:
        """The transfers and payouts with these ids; an id the file does not name is left out."""
        objects = self.statement.objects
        return [objects[i] for i in sorted(set(object_ids)) if i in objects]

    async def aclose(self) -> None:
        """Nothing is held open: the file was read, and closed, when opened."""


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)

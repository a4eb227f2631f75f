"""The rail side of a reconciliation read from Stripe's report-run files instead of its API.

A drop-in for RailSource (`source.RailReader`). Opening reads each file's header only: a file
that cannot be opened, or whose columns make it neither report (statement.py), raises
StatementUnreadable before any run starts. The files are read during the run, a line at a
time, while PostgreSQL stores what they say (`Staging.copy_in`): no run holds them in memory.
Every transfer and payout is staged, listed if created in the run's window, else only there
to be found by a settlement's reference (as the API's objects retrieved by id are). Then the
lines that amend others are applied to the staged rows (statement_amend.py), and a line that
cannot be read fails the run with StatementUnreadable naming it, kept in `unreadable`.

Without `--day` the window spans the files' transfers and payouts, which takes one more read
of the files before the run. Lines of categories settle does not make are counted by category
(`out_of_scope`); the run's evidence names the files and counts every line.
"""

from __future__ import annotations

import contextlib
import csv
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, NamedTuple

from services.adapters.stripe.source import PAGE_SIZE, STRIPE_API_RAILS, RailSource
from services.domain.reconciliation import RailObject, RunKind
from services.reconcile import windows
from services.reconcile.errors import StatementUnreadable
from services.reconcile.staging import Staging
from services.reconcile.statement import (
    Item,
    ReportKind,
    Return,
    Reversal,
    Rows,
    read_report,
    report_kind,
)
from services.reconcile.statement_amend import Amends, amend
from services.reconcile.windows import Window

SOURCE_PREFIX = "statement:"
MAX_SOURCE = 64  # reconciliation_sources.source holds at most this many characters
MAX_CATEGORIES = 100  # categories counted by name (Stripe has some forty); the rest as one
OTHER_CATEGORIES = "(other categories)"


class StatementFile(NamedTuple):
    """One report file and what its header says it is."""

    path: Path
    kind: ReportKind
    header: list[str]


class StatementSource:
    """Report files' transfers and payouts, read as the rail's for a reconciliation."""

    rails = STRIPE_API_RAILS

    def __init__(self, files: Sequence[StatementFile], api: RailSource | None = None) -> None:
        self.files = list(files)
        self.api = api  # the rail's API, for the transfers reversed in the files but made before
        names = "+".join(f.path.name for f in self.files)
        self.source = (SOURCE_PREFIX + names)[:MAX_SOURCE]
        self.lines = 0  # data lines read (headers not counted), every category included
        self.out_of_scope: Counter[str] = Counter()  # lines not compared, by category
        self.amends = Amends()
        self.unreadable: StatementUnreadable | None = None  # why the run could not read them
        self._name, self._line = "", 0  # the file and line of the last item read

    @classmethod
    def open(cls, paths: Sequence[Path], api: RailSource | None = None) -> StatementSource:
        """The report files at `paths`, by their headers; StatementUnreadable if one cannot be
        read or is neither report."""
        if not paths:
            raise StatementUnreadable(None, "no report file given")
        files = []
        for path in paths:
            with _rows(path) as rows:
                header = next(iter(rows), [])
            files.append(StatementFile(path, report_kind(header, path.name), header))
        return cls(files, api)

    def window(self, day: date | None = None) -> Window:
        """The run's window: the whole UTC `day` if given, else the seconds from the files'
        earliest transfer or payout to their latest; StatementUnreadable if none spans."""
        if day is not None:
            return Window(RunKind.STATEMENT, *windows.end_of_day(day)[1:])
        first: int | None = None
        last: int | None = None
        for item in self._items():
            if isinstance(item, RailObject):
                first = item.created if first is None else min(first, item.created)
                last = item.created if last is None else max(last, item.created)
        if first is None or last is None:
            raise StatementUnreadable(None, "no transfer or payout line: name its --day")
        return Window(RunKind.STATEMENT, _utc(first), _utc(last + 1))

    def rows_read(self, objects: int) -> int:
        """The lines the files had, whatever number of objects they made."""
        return self.lines

    def pages(self, start: int, end: int) -> Listing:
        """The transfers and payouts created in [start, end), as the lines state them; staged,
        every object is, and the files' reversals and returns amend them."""
        return Listing(self, start, end)

    async def retrieve(self, object_ids: Iterable[str]) -> list[RailObject]:
        """Nothing: every object the files name is staged (listed or not) when they are read,
        and what they do not name they do not show."""
        return []

    async def aclose(self) -> None:
        """Close the rail's API, if one was given (the files are closed once read)."""
        if self.api is not None:
            await self.api.aclose()

    def summary(self) -> dict[str, Any]:
        """What the files held besides what was compared, for the run's report."""
        return {
            "files": [{"file": f.path.name, "report": f.kind.value} for f in self.files],
            "lines": self.lines,
            "out_of_scope": dict(sorted(self.out_of_scope.items())),
            "not_compared": self.amends.uncompared,
        }

    def objects(self, start: int, end: int) -> Iterator[tuple[bool, RailObject]]:
        """Each transfer and payout of the files, listed if created in [start, end); the
        lines that amend others are kept aside, the others counted."""
        self.lines, self.out_of_scope, self.amends = 0, Counter(), Amends()
        lines = 0
        for item in self._items():
            lines += 1
            if isinstance(item, RailObject):
                yield start <= item.created < end, item
            elif isinstance(item, Reversal):
                self.amends.reversals.append((self._name, item))
            elif isinstance(item, Return):
                self.amends.returns.append((self._name, item))
            elif item in self.out_of_scope or len(self.out_of_scope) < MAX_CATEGORIES:
                self.out_of_scope[item] += 1
            else:  # a file of made-up categories is still read in flat memory
                self.out_of_scope[OTHER_CATEGORIES] += 1
        self.lines = lines

    def second_line(self, object_id: str) -> tuple[str, int]:
        """The file and line that name `object_id` a second time (read again: only a file
        refused for it pays for this)."""
        seen = 0
        for item in self._items():
            if isinstance(item, RailObject) and item.object_id == object_id:
                seen += 1
                if seen == 2:
                    return self._name, self._line
        return self._name, 0

    def _items(self) -> Iterator[Item]:
        """Every line's item, file after file; `_name` and `_line` say where the last was."""
        for file in self.files:
            self._name = file.path.name
            with _rows(file.path) as rows:
                next(iter(rows), None)  # the header, read when the file was opened
                for item in read_report(rows, file.kind, file.header, self._name):
                    self._line = rows.line_num
                    yield item


class Listing:
    """A statement's objects for one window: paged as the lines state them, or staged."""

    def __init__(self, source: StatementSource, start: int, end: int) -> None:
        self.source, self.start, self.end = source, start, end
        self._pages: AsyncIterator[list[RailObject]] | None = None

    def __aiter__(self) -> Listing:
        return self

    async def __anext__(self) -> list[RailObject]:
        if self._pages is None:
            self._pages = self._paged()
        return await anext(self._pages)

    async def stage(self, staging: Staging) -> None:
        """Stage every object of the files, then amend them and judge the window in SQL."""
        source = self.source
        try:
            await staging.copy_in(source.objects(self.start, self.end))
            await amend(staging, source.amends, source.api, source.second_line)
        except StatementUnreadable as e:
            source.unreadable = e
            raise
        await staging.analyze()

    async def _paged(self) -> AsyncIterator[list[RailObject]]:
        page: list[RailObject] = []
        for listed, obj in self.source.objects(self.start, self.end):
            if listed:
                page.append(obj)
            if len(page) >= PAGE_SIZE:
                yield page
                page = []
        if page:
            yield page


@contextlib.contextmanager
def _rows(path: Path) -> Iterator[Rows]:
    """A report file's csv rows; StatementUnreadable if it cannot be read, decoded or parsed."""
    try:
        # newline="": the csv module handles line ends, quoted ones included
        file = path.open(encoding="utf-8-sig", newline="")
    except OSError as e:
        raise StatementUnreadable(None, f"{path} cannot be read: {e}") from e
    rows = csv.reader(file)
    with file:
        try:
            yield rows
        except (OSError, UnicodeDecodeError) as e:
            raise StatementUnreadable(None, f"{path} cannot be read: {e}") from e
        except csv.Error as e:
            raise StatementUnreadable(rows.line_num, f"{path.name}: not CSV: {e}") from e


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)

"""What a reconciliation run is asked to read and what it found: `ById` (a re-check of named
items) and `Outcome` (the breaks, pending items and heals of one run, and how it ended)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from services.domain.breaks import BreakStatus, BreakType
from services.domain.reconciliation import Break, Pending, RailObject, Report, RunStatus
from services.domain.reconciliation import break_key as sort_key
from services.reconcile import store
from services.reconcile.windows import Window

# Objects out of scope listed by id in a run's report; the rest are only counted (an account
# shared with another system may hold millions).
FOREIGN_LISTED = 100


class ById(NamedTuple):
    """A re-check: settlements and rail objects compared again by id, not by window."""

    settlement_ids: frozenset[str]
    object_ids: frozenset[str]


@dataclass
class Outcome:
    """What one run found and how it ended."""

    run_id: int
    window: Window
    status: RunStatus
    breaks: list[Break] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    stored: dict[str, BreakStatus] = field(default_factory=dict)  # status by stored key
    error: str | None = None  # why a source could not be read
    healed: int = 0  # status drifts this run healed through the inbox
    paid_after: list[float] = field(default_factory=list)  # accepted -> paid, of heals to paid
    foreign: dict[str, int] = field(default_factory=dict)  # objects out of scope, by kind
    foreign_listed: list[RailObject] = field(default_factory=list)  # the first FOREIGN_LISTED

    def out_of_scope(self, objects: Iterable[RailObject]) -> None:
        """Count (and list the first few of) rail objects that are not settle's."""
        for obj in objects:
            self.foreign[obj.kind.value] = self.foreign.get(obj.kind.value, 0) + 1
            if len(self.foreign_listed) < FOREIGN_LISTED:
                self.foreign_listed.append(obj)

    def report(self) -> Report:
        """The breaks and pending items found, in the stable order."""
        return Report(
            tuple(sorted(set(self.breaks), key=sort_key)),
            tuple(sorted(set(self.pending), key=lambda p: (p.settlement_id, p.would_be.value))),
        )

    def status_of(self, item: Break) -> BreakStatus:
        """The break's stored status: open unless it was healed or resolved since."""
        return self.stored.get(store.stored_key(item), BreakStatus.OPEN)

    @property
    def open_breaks(self) -> int:
        """How many of the breaks found are still open."""
        return sum(1 for b in set(self.breaks) if self.status_of(b) is BreakStatus.OPEN)

    @property
    def quiet(self) -> bool:
        """Whether every item agreed with the rail: nothing pending, drifting or healed."""
        drifts = any(b.break_type is BreakType.STATUS_DRIFT for b in self.breaks)
        return not (self.pending or self.healed or drifts)

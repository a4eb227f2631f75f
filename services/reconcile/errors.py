"""Errors of reconciliation.

ReconcileError (SettleError)    base; a source reconciliation cannot read is never "no breaks"
                                (a rail that cannot be read raises RailReadError, domain/rail.py)
├── StatementUnreadable         a statement file could not be read, or a line of it parsed
├── StagedRowsLost              the run's staged rail objects are gone (PostgreSQL restarted)
├── RunNotRunning               the run is finished (or unknown); its record is final
├── BreakNotFound               no stored break has that id
└── BreakChanged                a break changed under its row lock; never retried
"""

from __future__ import annotations

from services.domain.errors import SettleError


class ReconcileError(SettleError):
    """Base of reconciliation's errors."""


class RunNotRunning(ReconcileError):
    """The run is finished or does not exist: its evidence is final and nothing was written."""

    retriable = False

    def __init__(self, run_id: int) -> None:
        super().__init__(f"reconciliation run {run_id} is not running; its record is final")
        self.run_id = run_id


class BreakNotFound(ReconcileError):
    """No stored break has this id; nothing was changed."""

    def __init__(self, break_id: int) -> None:
        super().__init__(f"no reconciliation break {break_id}")
        self.break_id = break_id


class BreakChanged(ReconcileError):
    """The break changed under its row lock: a bug or a manual edit; nothing was changed."""

    def __init__(self, break_id: int) -> None:
        super().__init__(f"reconciliation break {break_id} changed under its lock")
        self.break_id = break_id


class StatementUnreadable(ReconcileError):
    """A statement file could not be read or parsed: comparing part of it could hide money."""

    retriable = False

    def __init__(self, line: int | None, detail: str) -> None:
        where = "the statement" if line is None else f"statement line {line}"
        super().__init__(f"{where}: {detail}")
        self.line = line  # the file's line (the header is 1), or None: the file as a whole
        self.detail = detail


class StagedRowsLost(ReconcileError):
    """The run's staged rail objects are gone: PostgreSQL restarted after a crash and emptied
    the unlogged staging table. Read on, the run would retrieve by id what its settlements
    name and never see what only the listing shows (a second transfer for a settlement, one
    naming none), yet report itself complete; it fails instead and the next run lists the rail
    again."""

    retriable = True

    def __init__(self, run_id: int, staged: int) -> None:
        super().__init__(
            f"reconciliation run {run_id} staged {staged} rail objects and they are gone:"
            " PostgreSQL lost them in a crash restart; the next run lists the rail again"
        )
        self.run_id = run_id
        self.staged = staged

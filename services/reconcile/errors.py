"""Errors of reconciliation.

ReconcileError (SettleError)    base; a source reconciliation cannot read is never "no breaks"
└── UnreadableRailObject        the rail answered with an object reconciliation cannot read
"""

from __future__ import annotations

from services.shared.errors import SettleError


class ReconcileError(SettleError):
    """Base of reconciliation's errors."""


class UnreadableRailObject(ReconcileError):
    """A rail object lacks a field, or has one of the wrong type; reading on could hide money."""

    retriable = False

    def __init__(self, object_id: object, detail: str) -> None:
        super().__init__(f"rail object {object_id!r} cannot be read: {detail}")
        self.object_id = object_id
        self.detail = detail

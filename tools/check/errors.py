"""Errors of the invariant checker.

SettleError
└── CheckError                  base of the checker's errors
    └── SourceUnavailable       PostgreSQL, Kafka or the rail could not be read (exit 2)
"""

from __future__ import annotations

from services.domain.errors import SettleError


class CheckError(SettleError):
    """Base of the invariant checker's errors."""


class SourceUnavailable(CheckError):
    """A source of facts could not be read, so no verdict can be given; names the source."""

    retriable = True

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(f"{source}: {detail}")
        self.source = source
        self.detail = detail

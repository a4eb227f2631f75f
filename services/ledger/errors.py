"""Errors of the ledger service, each mapped to an HTTP status and a machine-readable code.

LedgerError (ApiError)      base; `status` and `code` are what the HTTP edge sends
├── InvalidRequest          400 (413 for a body too large): bad body, header or field
└── StoreUnavailable        503 with Retry-After: PostgreSQL cannot be reached; retriable
"""

from __future__ import annotations

from services.shared.edge import ApiError


class LedgerError(ApiError):
    """Base of the ledger's errors; `status` and `code` map it to an HTTP response."""


class InvalidRequest(LedgerError):
    """The request cannot be accepted as sent; `field` names the offending part, if one does."""

    status = 400
    code = "invalid_request"

    def __init__(
        self, message: str, *, code: str, field: str | None = None, status: int = 400
    ) -> None:
        super().__init__(message, code=code, field=field)
        self.status = status


class StoreUnavailable(LedgerError):
    """PostgreSQL did not answer; nothing was booked, the caller should retry later."""

    status = 503
    code = "store_unavailable"
    retriable = True
    retry_after_seconds = 2

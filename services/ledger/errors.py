"""Errors of the ledger service, each mapped to an HTTP status and a machine-readable code.

LedgerError (ApiError)      base; `status` and `code` are what the HTTP edge sends
├── InvalidRequest          400 (413 for a body too large, 422 over a tenant's limits): bad
│                           body, header or field, or a settlement the tenant may not make
├── RateLimited             429 `rate_limited` with Retry-After: the tenant's rate is spent
└── Overloaded              503 `overloaded` with Retry-After: too many requests held at once

Unauthorized (401) is the HTTP edge's own (services.platform.edge); PostgreSQL out of reach is the
shared StoreUnavailable (services.domain.errors): 503 with Retry-After, answered in the same
shape.
"""

from __future__ import annotations

from services.domain.errors import ApiError


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


class RateLimited(LedgerError):
    """The tenant sent settlement requests (or reads) faster than its configured rate;
    nothing ran."""

    status = 429
    code = "rate_limited"
    retriable = True

    def __init__(self, retry_after: int, what: str = "settlement requests") -> None:
        super().__init__(f"too many {what}; retry in {retry_after} s")
        self.retry_after_seconds = retry_after


class Overloaded(LedgerError):
    """The ledger holds as many settlement requests as it may; nothing ran."""

    status = 503
    code = "overloaded"
    retriable = True
    retry_after_seconds = 1

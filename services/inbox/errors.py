"""Errors of the inbox, each with the HTTP status and machine-readable code it answers with.

InboxError (ApiError)       base; `status` and `code` are what the HTTP edge sends
├── BadSignature            400: missing, wrong or stale Stripe-Signature; nothing stored
├── MalformedEvent          400: signed, but not an event; stored `rejected` with the reason
├── ChangePending           503: a parked event of another id holds the change; send it again
├── NotFound                404: no inbox event with that id
├── NotReplayable           409: the event is not dead or parked
│   └── MismatchNotReplayable   409: a mismatch: its object differs from what was sent
└── ClaimedEventChanged     an inbox row changed while a worker held it; never retried

PostgreSQL out of reach is the shared StoreUnavailable (services.domain.errors): 503 with
Retry-After, answered in the same shape.
"""

from __future__ import annotations

from services.domain.errors import ApiError


class InboxError(ApiError):
    """Base of the inbox's errors; `status` and `code` map it to an HTTP response."""


class BadSignature(InboxError):
    """The request is not signed by any active secret within the tolerance."""

    status = 400
    code = "invalid_signature"


class MalformedEvent(InboxError):
    """The signed body is not a rail event the inbox can read."""

    status = 400
    code = "malformed_event"


class ChangePending(InboxError):
    """A parked event of another id holds this event's change, and nobody knows yet which of
    the two is the rail's own: this one is not stored now, so the rail sends it again, and by
    then the parked one has applied (this one is its twin) or given the change up."""

    status = 503
    code = "change_pending"
    retry_after_seconds = 60

    def __init__(self) -> None:
        super().__init__("a parked event of another id holds this change; send this one again")


class NotFound(InboxError):
    """No inbox event answers to the given id."""

    status = 404
    code = "not_found"


class NotReplayable(InboxError):
    """Only dead or parked events can be replayed."""

    status = 409
    code = "not_replayable"


class MismatchNotReplayable(NotReplayable):
    """A mismatch is never applied: replaying it cannot make the rail's object match."""

    code = "mismatch_not_replayable"


class ClaimedEventChanged(InboxError):
    """A claimed row was not in the status it was claimed in: a bug or a manual edit."""

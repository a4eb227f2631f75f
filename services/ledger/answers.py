"""What a request to book gets when nothing of it is booked: the first answer replayed, a
refusal of its idempotency key or of its reference, or the books' refusal. Each body is the
edge's error shape, rendered once."""

from __future__ import annotations

import logging

import asyncpg

from services.domain.trace_context import carried
from services.ledger.idempotency import Decision
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.platform.edge import error_body

log = logging.getLogger(__name__)
IN_USE_RETRY_AFTER = 1


def duplicate_reference(r: SettlementRequest) -> AcceptResult:
    """The 409 of a reference already booked under another idempotency key."""
    body = error_body(
        "duplicate_reference",
        f"reference {r.reference!r} is already booked under another idempotency key",
        "reference",
    )
    return AcceptResult(Outcome.DUPLICATE_REFERENCE, 409, body)


def answer_for(decision: Decision, row: asyncpg.Record) -> AcceptResult:
    """What a request whose key is already held gets: the first answer replayed, or the
    refusal its key's state calls for (`row`: the key's record)."""
    if decision is Decision.REPLAY:
        sid = str(row["settlement_id"]) if row["settlement_id"] else None
        trace = carried(row["traceparent"], row["tracestate"])
        status, body = row["response_status"], row["response_body"]
        return AcceptResult(Outcome.REPLAYED, status, body, sid, trace=trace)
    if decision is Decision.MISMATCH:
        body = error_body(
            "idempotency_key_reused",
            "this idempotency key was used with a different request",
            "Idempotency-Key",
        )
        return AcceptResult(Outcome.MISMATCH, 422, body)
    if decision is Decision.EXPIRED:
        body = error_body(
            "idempotency_key_expired",
            "this idempotency key is past its replay window; use a new key",
            "Idempotency-Key",
            original_request_at=row["created_at"].isoformat(),
        )
        return AcceptResult(Outcome.EXPIRED, 410, body)
    return in_use_result()


def in_use_result() -> AcceptResult:
    """The 409 a request gets while another request with its key is still in flight."""
    body = error_body(
        "idempotency_key_in_use",
        "a request with this idempotency key is still in flight; retry later",
        "Idempotency-Key",
    )
    return AcceptResult(Outcome.IN_USE, 409, body, retry_after=IN_USE_RETRY_AFTER)


def unbookable_result(request: SettlementRequest, error: Exception) -> AcceptResult:
    """The 422 of a valid request the books cannot hold; nothing of it was stored. The
    database's words are logged with the request's tenant and key, never sent: they name
    tables, constraints and values of the books."""
    log.error(
        "unbookable settlement request tenant=%r idempotency_key=%r reference=%r: %s: %s",
        request.tenant,
        request.idempotency_key,
        request.reference,
        type(error).__name__,
        error,
    )
    body = error_body("unbookable", "the books cannot hold this settlement", "amount")
    return AcceptResult(Outcome.UNBOOKABLE, 422, body)

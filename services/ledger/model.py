"""The values that cross the ledger's layers: a validated request and what accepting it gave."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from services.domain.trace_context import TraceContext


@dataclass(frozen=True, slots=True)
class SettlementRequest:
    """A validated request to pay `payee` `amount` minor units of `currency`, from HTTP or Kafka."""

    tenant: str  # who asks; namespaces the idempotency key and the reference
    idempotency_key: str  # 1..255 printable ASCII characters, chosen by the caller
    reference: str  # the caller's own unique id for this payout
    payee: str  # who is paid
    destination: str  # the rail account money goes to
    amount: int  # minor units, 1 .. MAX_SETTLEMENT_AMOUNT (10**15)
    currency: str  # ISO 4217 code, upper case
    rail: str | None = None  # the rail asked for, or None for the default
    metadata: dict[str, str] = field(default_factory=dict)  # caller's string map, echoed back
    fingerprint: bytes = b""  # SHA-256 over tenant, method, path and canonical body
    trace: TraceContext | None = None  # the accept span's; not part of the fingerprint


class Outcome(StrEnum):
    """What the idempotency layer and the books made of one request."""

    CREATED = "created"  # a new settlement was booked
    REPLAYED = "replayed"  # same key and fingerprint: the first response, byte for byte
    MISMATCH = "mismatch"  # same key, other fingerprint: 422, nothing ran
    IN_USE = "in_use"  # same key still in flight after the bounded wait: 409
    EXPIRED = "expired"  # key past its replay window, inside the tombstone window: 410
    DUPLICATE_REFERENCE = "duplicate_reference"  # reference booked under another key: 409
    UNBOOKABLE = "unbookable"  # valid, but the books cannot hold it (a balance overflow): 422
    INSUFFICIENT_FUNDS = "insufficient_funds"  # a pre-funded tenant's funds fall short: 422


@dataclass(frozen=True, slots=True)
class AcceptResult:
    """The stored response of one request: what HTTP sends and what a Kafka command counts as."""

    outcome: Outcome
    status: int  # HTTP status code
    body: bytes  # exact response bytes; a replay returns the first request's bytes
    settlement_id: str | None = None  # the settlement booked or replayed, if any
    retry_after: int | None = None  # seconds, for 409 idempotency_key_in_use
    trace: TraceContext | None = None  # the settlement's trace, when one was booked before

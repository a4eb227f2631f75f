"""The rail port: what settle asks of a payment rail, and the classes its answers come in.

Every adapter classifies what happened instead of raising, because the next move depends on
the class, not on the error's type:

    ACCEPTED    the rail created the transfer or payout (or replayed it under our key)
    REFUSED     the rail said no and will say no again: terminal, the settlement fails
    RETRYABLE   the rail did nothing (rate limit, refused connection): try again later
    AMBIGUOUS   the rail may have acted (timeout, 5xx after send): never assume either way
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from services.domain.errors import SettleError
from services.domain.payout import PayoutMethod
from services.domain.trace_context import TraceContext

# Reads a second a reconciliation may make of a rail's API: Stripe's limit for a live account
# (it answers 429 past it).
DEFAULT_READ_RATE = 100.0


class RailOutcome(StrEnum):
    """The class of a rail call's result; see the module docstring."""

    ACCEPTED = "accepted"
    REFUSED = "refused"
    RETRYABLE = "retryable"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True, slots=True)
class RailInstruction:
    """One instruction to move money at the rail, under our deterministic key."""

    settlement_id: str  # ours; sent in metadata so the rail can be searched by it
    tenant: str  # whose settlement; sent in metadata
    idempotency_key: str  # SHA-256 hex derived from the settlement: the same on every attempt
    destination: str  # the rail account that receives the money
    amount: int  # minor units
    currency: str  # ISO 4217, upper case (adapters send what the rail expects)
    method: PayoutMethod  # transfer or payout
    trace: TraceContext | None = None  # the settlement's; the call runs in a span child of it


@dataclass(frozen=True, slots=True)
class RailResult:
    """What one rail call came to."""

    outcome: RailOutcome
    rail_reference: str | None = None  # the rail's id (tr_..., po_...) when ACCEPTED
    detail: str = ""  # the rail's code or message, for the audit trail
    status: int | None = None  # HTTP status, when there was a response


class Rail(Protocol):
    """A payment rail: Stripe, or the rail simulator that speaks Stripe's API."""

    async def send(self, instruction: RailInstruction) -> RailResult:
        """Create the transfer or payout under the instruction's key; classify the result.

        The adapter's transport asks `send_gate.may_write()` at the last moment before its
        request leaves, with no await in between, and writes nothing when told no (settle's
        HTTP client does so for every HTTP rail; a rail of files asks before writing one)."""
        ...

    async def find(self, instruction: RailInstruction) -> str | None:
        """The rail reference of a transfer or payout already made for this settlement."""
        ...


class RailReadError(SettleError):
    """The rail could not be read, or answered what cannot be read: its silence or its
    garbage is never "nothing there"."""


class UnreadableRailObject(RailReadError):
    """A rail object lacks a field, or has one of the wrong type; reading on could hide money."""

    retriable = False

    def __init__(self, object_id: object, detail: str) -> None:
        super().__init__(f"rail object {object_id!r} cannot be read: {detail}")
        self.object_id = object_id
        self.detail = detail


class RailUnreadable(RailReadError):
    """The rail did not answer a read, or answered an error: its silence is never "no breaks"."""

    retriable = True

    def __init__(self, detail: str) -> None:
        super().__init__(f"the rail could not be read: {detail}")
        self.detail = detail

"""The rail port: what the relay asks of a payment rail, and how it reads the answers.

Every adapter classifies what happened instead of raising, because the relay's next move
depends on the class, not on the error's type:

    ACCEPTED    the rail created the transfer or payout (or replayed it under our key)
    REFUSED     the rail said no and will say no again: terminal, the settlement fails
    RETRYABLE   the rail did nothing (rate limit, refused connection): try again later
    AMBIGUOUS   the rail may have acted (timeout, 5xx after send): never assume either way
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from opentelemetry.trace import SpanKind

from services.shared import send_gate
from services.shared.domain.payout import PayoutMethod
from services.shared.logs import about_settlement
from services.shared.tracing import TraceContext, traced

log = logging.getLogger(__name__)


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


async def call_rail(
    rail: Rail, instruction: RailInstruction, may_write: Callable[[], bool]
) -> RailResult | None:
    """`rail.send(instruction)` in a span child of the settlement's trace, its answer logged
    under the settlement (`debug` when accepted, routine; `info` otherwise). The transport
    asks `may_write()` at the moment of writing (services/shared/send_gate.py); when it says
    no, nothing is written and the answer is None."""
    sid, trace = instruction.settlement_id, instruction.trace
    with (
        about_settlement(sid, instruction.tenant, trace),
        traced("rail.send", trace, SpanKind.CLIENT, {"settlement.id": sid}),
    ):
        with send_gate.guarded(may_write) as gate:
            result = await rail.send(instruction)
        if gate.refused:
            log.info(
                "nothing sent to the rail under key %s: the lease ran out before the write",
                instruction.idempotency_key,
            )
            return None
        level = logging.DEBUG if result.outcome is RailOutcome.ACCEPTED else logging.INFO
        if log.isEnabledFor(level):
            detail = f": {result.detail}" if result.detail else ""
            log.log(
                level,
                "rail answered %s to key %s%s",
                result.outcome,
                instruction.idempotency_key,
                detail,
            )
    return result

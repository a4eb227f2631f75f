"""Calling the rail from the relay: in a span of the settlement's trace, through the send gate
that keeps a holder whose lease ran out from writing (services/platform/send_gate.py), the
answer logged under the settlement. The port itself is services/domain/rail.py."""

from __future__ import annotations

import logging
from collections.abc import Callable

from opentelemetry.trace import SpanKind

from services.domain.rail import Rail, RailInstruction, RailOutcome, RailResult
from services.platform import send_gate
from services.platform.logs import about_settlement
from services.platform.tracing import traced

log = logging.getLogger(__name__)


async def call_rail(
    rail: Rail, instruction: RailInstruction, may_write: Callable[[], bool]
) -> RailResult | None:
    """`rail.send(instruction)` in a span child of the settlement's trace, its answer logged
    under the settlement (`debug` when accepted, routine; `info` otherwise). The transport
    asks `may_write()` at the moment of writing (services/platform/send_gate.py); when it says
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

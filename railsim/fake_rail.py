"""The simulator's core as an in-process rail: the relay's fake, with the simulator's faults.

Answers are classified as the Stripe adapter classifies them (services/relay/stripe_outcomes):
2xx accepted, 400/404 refused, idempotency_error and 5xx ambiguous, 401/409/429 retryable.
A held answer (the timeout fault) longer than `timeout` is the ambiguous "timeout", at once.
Webhooks stay in the core's outbox for the test to take (`sim.take_webhooks()`), except early
ones, which go to `deliver` before `send` returns when a deliverer is given.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime

from railsim.core import RailSim
from railsim.params import Kind
from railsim.replies import Delivery, Reply
from services.domain.payout import PayoutMethod
from services.domain.rail import RailInstruction, RailOutcome, RailResult

Deliver = Callable[[Delivery], Awaitable[None]]
_RETRYABLE = frozenset({401, 403, 409, 429})


class SimRail:
    """The `Rail` port over a `RailSim` in the same process."""

    def __init__(self, sim: RailSim, *, timeout: float = 10.0, deliver: Deliver | None = None):
        self.sim = sim
        self._timeout = timeout
        self._deliver = deliver

    async def send(self, instruction: RailInstruction) -> RailResult:
        """Create the transfer or payout under the instruction's key; classify, never raise."""
        kind = Kind.TRANSFER if instruction.method is PayoutMethod.TRANSFER else Kind.PAYOUT
        pairs = [
            ("amount", str(instruction.amount)),
            ("currency", instruction.currency.lower()),
            ("destination", instruction.destination),
            ("metadata[settlement_id]", instruction.settlement_id),
            ("metadata[tenant]", instruction.tenant),
            ("description", f"settle settlement {instruction.settlement_id}"),
        ]
        if kind is Kind.TRANSFER:
            pairs.append(("transfer_group", instruction.settlement_id))
        reply = self.sim.create(kind, pairs, instruction.idempotency_key)
        if reply.webhooks_first and self._deliver is not None:
            for delivery in reply.webhooks:
                await self._deliver(delivery)
        else:
            self.sim.queue_webhooks(reply.webhooks)
        return classify(reply, self._timeout)

    async def find(
        self, instruction: RailInstruction, *, since: datetime | None = None
    ) -> str | None:
        """The newest transfer or payout whose metadata names this settlement, or None."""
        wanted = "transfer" if instruction.method is PayoutMethod.TRANSFER else "payout"
        floor = int(since.timestamp()) if since is not None else 0
        for obj in self.sim.objects_for(instruction.settlement_id):
            if obj["object"] == wanted and obj["created"] >= floor:
                return str(obj["id"])
        return None


def classify(reply: Reply, timeout: float) -> RailResult:
    """The rail port's outcome for one simulator answer, as a client with `timeout` sees it."""
    if reply.hold_seconds >= timeout:
        return RailResult(RailOutcome.AMBIGUOUS, detail="timeout")
    body = json.loads(reply.body)
    if reply.ok:
        detail = "idempotent_replayed" if reply.replayed else ""
        return RailResult(RailOutcome.ACCEPTED, str(body["id"]), detail, reply.status)
    error = body["error"]
    detail = error.get("code") or error.get("type") or f"http_{reply.status}"
    if reply.status in _RETRYABLE:
        return RailResult(RailOutcome.RETRYABLE, detail=detail, status=reply.status)
    if reply.status in (400, 402, 404) and error.get("type") != "idempotency_error":
        return RailResult(RailOutcome.REFUSED, detail=detail, status=reply.status)
    return RailResult(RailOutcome.AMBIGUOUS, detail=detail, status=reply.status)

"""One change at the rail becomes one or more webhook deliveries, as the faults decide."""

from __future__ import annotations

from railsim.faults import Dice, Faults
from railsim.objects import Wire, event, json_bytes
from railsim.replies import Delivery


def announce(
    type_: str,
    obj: Wire,
    *,
    at: float,
    subject: str,
    faults: Faults,
    dice: Dice,
    request_id: str | None = None,
    idempotency_key: str | None = None,
) -> tuple[Delivery, ...]:
    """The deliveries announcing `obj` changed at `at`: one, plus duplicates and twins."""
    deliveries = [_delivery(type_, obj, at, request_id, idempotency_key)]
    if dice.chance("webhook_twin", subject, faults.webhook_twin):
        # Stripe may emit two events (two ids) for one change: dedupe by id is not enough
        deliveries.append(_delivery(type_, obj, at, request_id, idempotency_key))
    if dice.chance("webhook_duplicate", subject, faults.webhook_duplicate):
        deliveries.append(deliveries[0])
    if dice.chance("webhook_reorder", subject, faults.webhook_reorder):
        held = at + faults.reorder_delay_ms / 1000
        deliveries = [
            Delivery(d.event_id, d.event_type, d.payload, max(d.not_before, held))
            for d in deliveries
        ]
    return tuple(deliveries)


def _delivery(
    type_: str, obj: Wire, at: float, request_id: str | None, idempotency_key: str | None
) -> Delivery:
    body = event(type_, obj, int(at), request_id, idempotency_key)
    return Delivery(body["id"], type_, json_bytes(body), at)

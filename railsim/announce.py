"""One change at the rail becomes one or more webhook deliveries, as the faults decide."""

from __future__ import annotations

from collections import deque

from railsim.faults import Dice, Faults
from railsim.objects import Wire, event, json_bytes
from railsim.replies import Delivery


class Withheld:
    """Events the webhook_drop fault kept from ever being sent, for tests and verdicts to read."""

    def __init__(self, limit: int = 10_000) -> None:
        self._recent: deque[Wire] = deque(maxlen=limit)
        self.count = 0  # every drop, also those no longer in the recent list

    def keep(self, deliveries: list[Delivery], obj: Wire, at: float) -> None:
        """Note each event of `deliveries` (about `obj`) as never sent."""
        for delivery in deliveries:
            self.count += 1
            self._recent.append(
                {
                    "event_id": delivery.event_id,
                    "type": delivery.event_type,
                    "object_id": obj["id"],
                    "settlement_id": obj.get("metadata", {}).get("settlement_id"),
                    "created": int(at),
                }
            )

    def recent(self) -> list[Wire]:
        """The latest withheld events, oldest first."""
        return list(self._recent)


def announce(
    type_: str,
    obj: Wire,
    *,
    at: float,
    subject: str,
    faults: Faults,
    dice: Dice,
    withheld: Withheld,
    request_id: str | None = None,
    idempotency_key: str | None = None,
) -> tuple[Delivery, ...]:
    """The deliveries announcing `obj` changed at `at`: one, plus duplicates and twins; none
    when the change is dropped (then noted in `withheld`)."""
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
    # Rolled last, so turning drops on leaves every other fault's decisions as they were
    if dice.chance("webhook_drop", subject, faults.webhook_drop):
        withheld.keep(list(dict.fromkeys(deliveries)), obj, at)
        return ()
    return tuple(deliveries)


def _delivery(
    type_: str, obj: Wire, at: float, request_id: str | None, idempotency_key: str | None
) -> Delivery:
    body = event(type_, obj, int(at), request_id, idempotency_key)
    return Delivery(body["id"], type_, json_bytes(body), at)

"""What the rail proves about a status drift, as the webhook the rail would have sent: pure.

A status drift is healed only from what the rail object shows now, and only as the event the
rail sends for that state, so the inbox applies it by its own decision table:

    rail object                                  event it proves
    transfer, nothing reversed                   transfer.created
    transfer, reversed in full or in part        transfer.reversed
    payout paid                                  payout.paid
    payout failed / canceled                     payout.failed / payout.canceled
    payout pending or in transit                 nothing: the money is still on its way

The rail proves as much when a transfer shows more reversed than the ledger booked (a later
part of a reversal whose webhook was lost): its `transfer.reversed` carries the cumulative
amount, which the inbox applies as it applies the rail's own. A drift is healed only when it
is its settlement's one disagreement: an object that differs in amount, currency or
destination, or one of several, is no proof of this settlement's money, and every such break
waits for an operator.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from services.adapters.stripe.wire import rail_object_of
from services.domain.breaks import PROVEN_BY_THE_RAIL, BreakType
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import Break, MoneyState, money_state
from services.domain.settlement import SettlementStatus
from services.reconcile.compare import AGREES

# Says where a row of inbox_events came from: no rail event id starts so.
EVENT_PREFIX = "evt_reconcile_"

_PAYOUT_EVENTS: Mapping[str, str] = {
    "paid": "payout.paid",
    "failed": "payout.failed",
    "canceled": "payout.canceled",
}


def proven_event(wire: Mapping[str, Any]) -> str | None:
    """The type of the event the rail sends for the object's state now; None while a payout
    is still on its way (nothing is proven). UnreadableRailObject if `wire` is malformed."""
    obj = rail_object_of(wire)
    if obj.kind is PayoutMethod.TRANSFER:
        return "transfer.created" if obj.amount_reversed == 0 else "transfer.reversed"
    return _PAYOUT_EVENTS.get(obj.status or "")


def dated_by(wire: Mapping[str, Any]) -> str | None:
    """The id of the balance transaction that moved the money of the change the object shows
    (its `created` is when the rail did it), if the object names one: a failed payout's
    `failure_balance_transaction`, a reversed transfer's latest reversal's, a transfer's
    own."""
    if wire.get("object") == "payout":
        moved = wire.get("failure_balance_transaction") if wire.get("status") == "failed" else None
    elif wire.get("object") == "transfer":
        reversals = wire.get("reversals")
        parts = reversals.get("data") if isinstance(reversals, Mapping) else None
        made = [p for p in parts if isinstance(p, Mapping)] if isinstance(parts, list) else []
        # The latest reversal, whichever order the list gives them in.
        last = max(reversed(made), key=lambda p: _created(p), default=wire)
        moved = last.get("balance_transaction")
    else:
        moved = None
    if isinstance(moved, Mapping):  # expanded
        moved = moved.get("id")
    return moved if isinstance(moved, str) and moved else None


def synthetic_event(wire: Mapping[str, Any], event_type: str, created: int) -> bytes:
    """The body of the webhook announcing `wire` as `event_type`, shaped as the rail's own,
    under a fresh id that names reconciliation as its source."""
    body = {
        "id": f"{EVENT_PREFIX}{uuid.uuid4().hex}",
        "object": "event",
        "created": created,
        "data": {"object": dict(wire)},
        "livemode": bool(wire.get("livemode", False)),
        "pending_webhooks": 0,  # nothing was delivered: reconciliation read the object
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def agrees(status: SettlementStatus, wire: Mapping[str, Any]) -> bool:
    """True if a settlement in `status` agrees with the object's money state."""
    state: MoneyState = money_state(rail_object_of(wire))
    return state in AGREES[status]


def healable(breaks: Iterable[Break]) -> list[Break]:
    """The breaks the rail proves (`proven`) that are their settlement's only break, in
    order."""
    found = list(breaks)
    others = {b.settlement_id for b in found if not proven(b)}
    return [
        b
        for b in found
        if proven(b)
        and b.settlement_id is not None
        and b.rail_object_id is not None
        and b.settlement_id not in others
    ]


def proven(item: Break) -> bool:
    """Whether the rail's object proves where the money is: a status drift, or more of a
    transfer reversed at the rail than the ledger booked (a later part of a reversal whose
    webhook was lost: the rail's cumulative amount is applied as the inbox applies it)."""
    if item.break_type in PROVEN_BY_THE_RAIL:
        return True
    return (
        item.break_type is BreakType.AMOUNT_MISMATCH
        and item.field == "amount_reversed"
        and (item.difference or 0) > 0
    )


def _created(part: Mapping[str, Any]) -> int:
    created = part.get("created")
    return created if isinstance(created, int) else 0

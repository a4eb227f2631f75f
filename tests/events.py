"""A settlement event as the ledger publishes it, for tests to vary."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

OCCURRED_AT = datetime(2026, 11, 26, tzinfo=UTC)


def settlement_event(kind: str = "created", **changes: Any) -> dict[str, Any]:
    """A `SettlementEvent` of type `kind` (status `accepted` for `created`, else `kind`) for a
    new settlement, with `changes` over its fields."""
    return {
        "event_id": str(uuid.uuid4()),
        "settlement_id": str(uuid.uuid4()),
        "tenant": "acme",
        "reference": "payout-42",
        "type": kind,
        "sequence": 1,
        "amount": 12_345,
        "currency": "EUR",
        "occurred_at": OCCURRED_AT,
        "rail_reference": None,
        "reason": None,
        "status": "accepted" if kind == "created" else kind,
    } | changes

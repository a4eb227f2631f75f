"""A webhook body read as a rail event: the fields the inbox stores and matches by."""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple, TypeGuard

import orjson

from services.domain.rail_event import signal_of
from services.domain.webhook_match import Reported, Value
from services.inbox.errors import MalformedEvent

MAX_MINOR_UNITS = 2**63 - 1  # an amount the inbox stores (a bigint)
MAX_TEXT_CHARS = 255  # of an event's id and type
# What PostgreSQL text columns hold: no NUL (it refuses the row, which would fail for good).
_TEXT_RULE = f"of at most {MAX_TEXT_CHARS} characters, without NUL"


class RailEvent(NamedTuple):
    """The parts of one rail event the inbox needs; the raw body is kept beside it."""

    event_id: str  # the rail's event id (`evt_...`), unique per rail
    event_type: str  # e.g. `transfer.created`
    object_id: str | None  # the transfer or payout the event is about (`tr_...`, `po_...`)
    settlement_id: uuid.UUID | None  # our id from `metadata.settlement_id`, if it is one
    created: int  # Unix seconds the rail created the event
    # Minor units come back in all: a transfer's cumulative `amount_reversed` on
    # transfer.reversed, a returned payout's whole amount on payout.failed; else None.
    amount_reversed: int | None = None
    # What the event says of its object's money, matched against the settlement before
    # anything is applied (`webhook_match`).
    reported: Reported | None = None

    @property
    def change_key(self) -> str | None:
        """Object and type, and for a reversal the amount back in all: two event ids
        announcing one change share it (Stripe may do that), each partial reversal has its own."""
        if self.object_id is None or signal_of(self.event_type) is None:
            return None
        if self.amount_reversed is not None:
            return f"{self.object_id}:{self.event_type}:{self.amount_reversed}"
        return f"{self.object_id}:{self.event_type}"


def parse_event(body: bytes) -> RailEvent:
    """The event in a webhook body; MalformedEvent (with the reason) if it is not one."""
    try:
        # orjson reads integers as int, never float (money and `created` stay exact), and
        # refuses what is not strict JSON (NaN, integers past 64 bits, invalid UTF-8).
        data = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise MalformedEvent(f"body is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise MalformedEvent("body is not a JSON object")
    event_id, event_type = data.get("id"), data.get("type")
    if not _text(event_id):
        raise MalformedEvent(f"`id` must be a non-empty string {_TEXT_RULE}")
    if not _text(event_type):
        raise MalformedEvent(f"`type` must be a non-empty string {_TEXT_RULE}")
    created = _integer(data.get("created", 0))
    if created is None:
        raise MalformedEvent("`created` must be an integer")
    obj = _object(data)
    object_id = obj.get("id")
    if signal_of(event_type) is not None and not (isinstance(object_id, str) and object_id):
        raise MalformedEvent(f"{event_type} must carry `data.object.id`")
    if isinstance(object_id, str) and "\x00" in object_id:
        raise MalformedEvent("`data.object.id` must not hold NUL")
    metadata = obj.get("metadata")
    meta_id = metadata.get("settlement_id") if isinstance(metadata, dict) else None
    object_id = object_id if isinstance(object_id, str) and object_id else None
    amount_back = _amount_back(event_type, obj, created)
    reported = Reported(
        object_id,
        _value(obj.get("amount")),
        _value(obj.get("currency")),
        _value(obj.get("destination")),
        _value(data.get("account")),
        amount_back,
    )
    return RailEvent(
        event_id, event_type, object_id, _uuid(meta_id), created, amount_back, reported
    )


def stored_event_facts(body: bytes) -> tuple[Reported | None, int | None]:
    """What the stored event in `body` says of its object's money, and when the rail created
    it (None when it does not say); (None, None) if the body is no longer readable."""
    try:
        event = parse_event(body)
    except MalformedEvent:
        return None, None
    return event.reported, event.created or None


def _value(value: object) -> Value:
    """A reported value as it came, if it is an integer or a string; else None (a float is
    never read as money)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _amount_back(event_type: str, obj: dict[str, Any], created: int) -> int | None:
    """What the event reports as come back in all (see `RailEvent.amount_reversed`)."""
    if event_type == "sepa.returned":
        return _positive(obj, "amount_reversed")  # what the payee's bank sent back
    if event_type == "transfer.reversed":
        # Without the field (an old body), the reversal is read as one of the whole amount.
        if "amount_reversed" not in obj:
            return None
        return _positive(obj, "amount_reversed")
    if event_type == "payout.failed":
        arrival = _integer(obj.get("arrival_date"))
        # A failure after the day the money was due to arrive is money that came back.
        if arrival is not None and created > arrival:
            return _positive(obj, "amount")
    return None


def _text(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT_CHARS and "\x00" not in value


def _integer(value: object) -> int | None:
    """`value` as an integer if it is one in JSON's number model, where 30712 and 30712.0 are
    the same number (orjson reads the second, and an integer past 64 bits, as a float); else
    None. A float is read to the integer it holds, exact up to 2**53."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else None


def _positive(obj: dict[str, Any], name: str) -> int:
    # Stored as a PostgreSQL bigint: a larger amount is not one the inbox can hold.
    value = _integer(obj.get(name))
    if value is None or not 0 < value <= MAX_MINOR_UNITS:
        raise MalformedEvent(
            f"`data.object.{name}` must be a positive integer of minor units, "
            f"at most {MAX_MINOR_UNITS}"
        )
    return value


def _object(data: dict[str, Any]) -> dict[str, Any]:
    inner = data.get("data")
    obj = inner.get("object") if isinstance(inner, dict) else None
    return obj if isinstance(obj, dict) else {}


def _uuid(value: object) -> uuid.UUID | None:
    # Not ours if it is not a UUID: such an event finds no settlement and ends parked, then dead.
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None

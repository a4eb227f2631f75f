"""Rail objects as the Stripe API renders them (a `to_dict()` of the library's objects, or a
list page's body as sent), read into reconciliation's values. Amounts must be JSON integers:
a float, a bool or a string is refused rather than rounded, and currencies are upper-cased
and must be ISO 4217 codes.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from services.adapters.stripe.paging import RawPage, page_of
from services.domain.money import is_currency
from services.domain.payout import PayoutMethod
from services.domain.rail import UnreadableRailObject
from services.domain.reconciliation import BalanceMove, RailObject

_KINDS: dict[object, PayoutMethod] = {m.value: m for m in PayoutMethod}


class ListPage(NamedTuple):
    """One page of a Stripe list answer, read."""

    objects: list[RailObject]  # in the order the rail listed them
    has_more: bool  # whether a page follows
    last_id: str | None  # the cursor for the next page (`starting_after`); None if empty


def raw_page_of(body: bytes) -> RawPage:
    """The items of one list page's JSON body; UnreadableRailObject if the body is not a
    Stripe list of objects."""
    try:
        # orjson reads JSON integers as int (never float) and refuses integers past 64 bits.
        return page_of(orjson.loads(body))
    except orjson.JSONDecodeError as e:
        raise UnreadableRailObject(None, f"the list page is not JSON: {e}") from None


def list_page_of(body: bytes) -> ListPage:
    """The transfers or payouts of one list page's JSON body; UnreadableRailObject if the body
    is not a Stripe list or an object in it is malformed."""
    raw = raw_page_of(body)
    objects = [rail_object_of(item) for item in raw.items]
    return ListPage(objects, raw.has_more, objects[-1].object_id if objects else None)


def rail_object_of(wire: Mapping[str, Any]) -> RailObject:
    """The transfer or payout in `wire`; UnreadableRailObject if it is neither or malformed."""
    object_id = _text(wire, "id")
    kind = _KINDS.get(wire.get("object"))  # a lookup: an Enum call cost a tenth of the read
    if kind is None:
        raise UnreadableRailObject(object_id, "`object` is neither transfer nor payout")
    transfer = kind is PayoutMethod.TRANSFER
    return RailObject(
        object_id,
        kind,
        _int(wire, "amount", object_id),
        _int(wire, "amount_reversed", object_id) if transfer else 0,
        _currency(wire, object_id),
        _ref(wire.get("destination")),
        None if transfer else _text(wire, "status"),
        _int(wire, "created", object_id),
        settlement_named(wire),
        None if transfer else _arrival(wire, object_id),
    )


def settlement_named(wire: Mapping[str, Any]) -> str | None:
    """The settlement an object carries settle's mark for: its `metadata.settlement_id`, else
    its `transfer_group` when that is a settlement id (settle sets both); None on an object
    another system made (no metadata, or a group of its own such as an order number)."""
    metadata = wire.get("metadata")
    named = metadata.get("settlement_id") if isinstance(metadata, Mapping) else None
    if isinstance(named, str) and named:
        return named
    group = wire.get("transfer_group")
    return group if isinstance(group, str) and _is_uuid(group) else None


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text.lower()
    except ValueError:
        return False


def _arrival(wire: Mapping[str, Any], object_id: str) -> int | None:
    """A payout's `arrival_date`, if it states one."""
    return None if wire.get("arrival_date") is None else _int(wire, "arrival_date", object_id)


def balance_move_of(wire: Mapping[str, Any]) -> BalanceMove:
    """The balance transaction in `wire`; UnreadableRailObject if it is malformed. With its
    `source` expanded, the move names the settlement the source carries settle's mark for
    and, for a transfer reversal, the transfer reversed."""
    move_id = _text(wire, "id")
    amount, fee = _int(wire, "amount", move_id), _int(wire, "fee", move_id)
    if _int(wire, "net", move_id) != amount - fee:
        raise UnreadableRailObject(move_id, "`net` must be `amount` less `fee`")
    source = wire.get("source")
    expanded = source if isinstance(source, Mapping) else {}
    return BalanceMove(
        move_id,
        _text(wire, "type"),
        amount,
        _currency(wire, move_id),
        _int(wire, "created", move_id),
        fee,
        _ref(source),
        settlement_named(expanded) if expanded else None,
        _ref(expanded.get("transfer")) if expanded.get("object") == "transfer_reversal" else None,
    )


def balance_of(wire: Mapping[str, Any]) -> dict[str, int]:
    """Per currency, the balance in `wire` (Stripe's `GET /v1/balance`): available plus
    pending, signed minor units; UnreadableRailObject if it is malformed."""
    totals: dict[str, int] = {}
    for part in ("available", "pending"):
        funds = wire.get(part)
        if not isinstance(funds, list):
            raise UnreadableRailObject("balance", f"`{part}` must be a list, not {funds!r}")
        for fund in funds:
            if not isinstance(fund, Mapping):
                raise UnreadableRailObject("balance", f"`{part}` holds {fund!r}, not an object")
            currency = _currency(fund, "balance")
            totals[currency] = totals.get(currency, 0) + _int(fund, "amount", "balance")
    return totals


def _text(wire: Mapping[str, Any], key: str) -> str:
    value = wire.get(key)
    if not isinstance(value, str) or not value:
        raise UnreadableRailObject(wire.get("id"), f"`{key}` must be a non-empty string")
    return value


def _int(wire: Mapping[str, Any], key: str, object_id: str) -> int:
    value = wire.get(key)
    if type(value) is not int:
        raise UnreadableRailObject(object_id, f"`{key}` must be an integer, not {value!r}")
    return value


def _currency(wire: Mapping[str, Any], object_id: str) -> str:
    value = wire.get("currency")
    code = value.upper() if isinstance(value, str) else ""
    if not is_currency(code):
        raise UnreadableRailObject(object_id, f"`currency` must be an ISO 4217 code, not {value!r}")
    return code


def _ref(value: object) -> str | None:
    # Stripe sends an id, or the whole object when the request asked to expand it.
    if isinstance(value, Mapping):
        value = value.get("id")
    return value if isinstance(value, str) and value else None

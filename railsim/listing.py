"""Stripe list objects: newest first, filtered, paged with limit and starting_after."""

from __future__ import annotations

from collections.abc import Sequence

from railsim.errors import ApiError
from railsim.objects import Wire
from railsim.params import Form, Kind

OBJECT_FILTERS = {
    Kind.TRANSFER: frozenset({"transfer_group", "destination"}),
    Kind.PAYOUT: frozenset({"status", "destination"}),
}
# `payout` names an automatic payout; the simulator makes none, so that filter finds nothing
BALANCE_TRANSACTION_FILTERS = frozenset({"currency", "payout", "source", "type"})
_PAGING = frozenset({"limit", "starting_after", "ending_before", "created", "expand"})
_COMPARISONS = {
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
}


def page(url: str, filters: frozenset[str], newest_first: Sequence[Wire], form: Form) -> Wire:
    """The list object `GET <url>` answers for `form`'s `filters` (exact values) and paging."""
    for key in form:
        if key not in filters | _PAGING:
            raise ApiError(
                f"Received unknown parameter: {key}", code="parameter_unknown", param=key
            )
    matching = [o for o in newest_first if _matches(o, filters, form)]
    limit = _limit(form)
    after, before = form.get("starting_after"), form.get("ending_before")
    if isinstance(after, str):
        start = _position(matching, after, "starting_after") + 1
        selected, has_more = matching[start : start + limit], len(matching) > start + limit
    elif isinstance(before, str):
        end = _position(matching, before, "ending_before")
        selected, has_more = matching[max(0, end - limit) : end], end > limit
    else:
        selected, has_more = matching[:limit], len(matching) > limit
    return {"object": "list", "data": selected, "has_more": has_more, "url": url}


def _matches(obj: Wire, filters: frozenset[str], form: Form) -> bool:
    for key in filters:
        wanted = form.get(key)
        if isinstance(wanted, str) and obj.get(key) != wanted:
            return False
    created = form.get("created")
    if isinstance(created, str):
        return bool(obj["created"] == _integer(created, "created"))
    for op, bound in (created or {}).items():
        if op not in _COMPARISONS:
            raise ApiError(f"Invalid created[{op}]", code="parameter_unknown", param="created")
        if not _COMPARISONS[op](obj["created"], _integer(bound, f"created[{op}]")):
            return False
    return True


def _limit(form: Form) -> int:
    raw = form.get("limit")
    if raw is None:
        return 10
    limit = _integer(raw, "limit")
    if not 1 <= limit <= 100:
        raise ApiError(
            "This value must be between 1 and 100.", code="parameter_invalid_integer", param="limit"
        )
    return limit


def _integer(raw: object, param: str) -> int:
    if not isinstance(raw, str) or not raw.lstrip("-").isdigit():
        raise ApiError(f"Invalid integer: {raw}", code="parameter_invalid_integer", param=param)
    return int(raw)


def _position(objects: Sequence[Wire], object_id: str, param: str) -> int:
    for index, obj in enumerate(objects):
        if obj["id"] == object_id:
            return index
    raise ApiError(f"No such object: '{object_id}'", code="resource_missing", param=param)

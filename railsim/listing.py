"""Stripe list objects: newest first, filtered, paged with limit and starting_after or
ending_before."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Generic, TypeVar

from railsim.errors import ApiError
from railsim.objects import Wire
from railsim.params import Form, Kind

OBJECT_FILTERS = {
    Kind.TRANSFER: frozenset({"transfer_group", "destination"}),
    Kind.PAYOUT: frozenset({"status", "destination"}),
}
# `payout` names an automatic payout: the movements it paid out (none without the account's
# own activity, which alone makes automatic payouts)
BALANCE_TRANSACTION_FILTERS = frozenset({"currency", "payout", "source", "type"})
CHARGE_FILTERS = frozenset({"transfer_group", "customer", "payment_intent"})
R = TypeVar("R")
_PAGING = frozenset({"limit", "starting_after", "ending_before", "created", "expand"})
_COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b,
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
}


class Ordered(Generic[R]):
    """Records in the order the rail made them (so oldest first), each found by its id."""

    def __init__(self) -> None:
        self.records: list[R] = []
        self.position: dict[str, int] = {}

    def add(self, record_id: str, record: R) -> None:
        """Keep `record` as the newest."""
        self.position[record_id] = len(self.records)
        self.records.append(record)


def page(
    url: str,
    filters: frozenset[str],
    ordered: Ordered[R],
    form: Form,
    *,
    read: Callable[[R, str], object],
    wire: Callable[[R], Wire],
) -> Wire:
    """The list object `GET <url>` answers for `form`'s `filters` (exact values) and paging.

    Walks from the cursor and stops one match past the page, so paging through a long
    history costs each page its own length, not the history's; only a page's records are
    rendered (`wire`), and fields are read with `read`.
    """
    for key in form:
        if key not in filters | _PAGING:
            raise ApiError(
                f"Received unknown parameter: {key}", code="parameter_unknown", param=key
            )
    wanted = {k: v for k in filters if isinstance(v := form.get(k), str)}
    bounds = _created_bounds(form)
    records, limit = ordered.records, _limit(form)

    def matching(indices: range) -> list[R]:
        found = (r for i in indices if _matches(r := records[i], wanted, bounds, read))
        return list(itertools.islice(found, limit + 1))

    after, before = form.get("starting_after"), form.get("ending_before")
    if isinstance(before, str) and not isinstance(after, str):
        newer = matching(range(_cursor(ordered, before, "ending_before") + 1, len(records)))
        selected = newer[:limit][::-1]
    else:
        start = len(records)
        if isinstance(after, str):
            start = _cursor(ordered, after, "starting_after")
        newer = matching(range(start - 1, -1, -1))
        selected = newer[:limit]
    data = [wire(r) for r in selected]
    return {"object": "list", "data": data, "has_more": len(newer) > limit, "url": url}


def _matches(
    record: R,
    wanted: dict[str, str],
    bounds: list[tuple[Callable[[int, int], bool], int]],
    read: Callable[[R, str], object],
) -> bool:
    if any(read(record, key) != value for key, value in wanted.items()):
        return False
    created = read(record, "created")
    return all(compare(created, bound) for compare, bound in bounds)  # type: ignore[arg-type]


def _created_bounds(form: Form) -> list[tuple[Callable[[int, int], bool], int]]:
    created = form.get("created")
    if isinstance(created, str):
        return [(_COMPARISONS["eq"], _integer(created, "created"))]
    bounds = []
    for op, bound in (created or {}).items():
        if op not in _COMPARISONS or op == "eq":
            raise ApiError(f"Invalid created[{op}]", code="parameter_unknown", param="created")
        bounds.append((_COMPARISONS[op], _integer(bound, f"created[{op}]")))
    return bounds


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


def _cursor(ordered: Ordered[R], record_id: str, param: str) -> int:
    position = ordered.position.get(record_id)
    if position is None:
        raise ApiError(f"No such object: '{record_id}'", code="resource_missing", param=param)
    return position

"""Stripe's list paging, read one way wherever settle lists: a page is a list object whose
`data` holds objects and whose `has_more` says whether another follows; the next page starts
after the last object's id (`starting_after`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

from services.domain.rail import UnreadableRailObject


class RawPage(NamedTuple):
    """One page of a Stripe list answer, its items not yet read."""

    items: list[dict[str, Any]]  # in the order the rail listed them
    has_more: bool  # whether a page follows
    last_id: str | None  # the cursor for the next page (`starting_after`); None if empty


def page_of(page: object) -> RawPage:
    """The items of one decoded list answer; UnreadableRailObject if it is not a Stripe list
    of objects (a malformed page read as "nothing there" could pay twice)."""
    if not isinstance(page, dict) or page.get("object") != "list":
        raise UnreadableRailObject(None, "the answer is not a Stripe list object")
    data, has_more = page.get("data"), page.get("has_more")
    if not isinstance(data, list) or not isinstance(has_more, bool):
        raise UnreadableRailObject(None, "a list needs `data` (an array) and `has_more`")
    for item in data:
        if not isinstance(item, dict):
            raise UnreadableRailObject(None, f"a listed item is not an object: {item!r}")
    last = data[-1].get("id") if data else None
    return RawPage(data, has_more, last if isinstance(last, str) and last else None)


Fetch = Callable[[str | None], Awaitable[RawPage]]  # the page starting after a cursor


async def pages(fetch: Fetch, max_pages: int | None = None) -> AsyncIterator[RawPage]:
    """The pages `fetch` gives, the first with no cursor and each next one after the last id
    of the one before, until a page says it is the last (or `max_pages` have been read: the
    caller tells a bound reached by the last page's `has_more`)."""
    after: str | None = None
    read = 0
    while max_pages is None or read < max_pages:
        page = await fetch(after)
        read += 1
        yield page
        if not page.has_more or page.last_id is None:
            return
        after = page.last_id

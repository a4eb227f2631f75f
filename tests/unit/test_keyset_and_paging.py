"""Keyset cursors and Stripe list pages, each read one way everywhere."""

from __future__ import annotations

import pytest

from services.adapters.stripe.paging import RawPage, page_of, pages
from services.domain.keyset import next_after, parse_id
from services.domain.rail import UnreadableRailObject


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        ("007", 7),
        ("9" * 18, int("9" * 18)),
        ("9" * 19, None),
        ("", None),
        ("-1", None),
        ("1.5", None),
        ("²", None),
        ("١٢", None),
        (" 1", None),
    ],
)
def test_an_id_is_ascii_digits_that_fit_a_bigint(text: str, expected: int | None) -> None:
    assert parse_id(text) == expected


def test_a_full_page_points_at_the_next_and_a_short_one_at_none() -> None:
    assert next_after([3, 5, 8], 3) == 8
    assert next_after([3, 5], 3) is None
    assert next_after([], 3) is None


def listing(ids: list[str], has_more: bool) -> dict[str, object]:
    return {"object": "list", "data": [{"id": i} for i in ids], "has_more": has_more}


async def test_pages_follow_the_last_id_until_a_page_says_it_is_the_last() -> None:
    book = {None: listing(["a", "b"], True), "b": listing(["c"], True), "c": listing([], False)}
    asked: list[str | None] = []

    async def fetch(after: str | None) -> RawPage:
        asked.append(after)
        return page_of(book[after])

    read = [[item["id"] for item in page.items] async for page in pages(fetch)]
    assert read == [["a", "b"], ["c"], []]
    assert asked == [None, "b", "c"]


async def test_pages_stop_at_the_bound_and_the_last_page_says_more_were_there() -> None:
    async def endless(after: str | None) -> RawPage:
        return page_of(listing([f"{after or ''}x"], True))

    read = [page async for page in pages(endless, max_pages=3)]
    assert len(read) == 3 and read[-1].has_more


@pytest.mark.parametrize(
    "answer",
    [
        {"data": [], "has_more": False},
        {"object": "list", "data": {}, "has_more": False},
        {"object": "list", "data": [], "has_more": "no"},
        {"object": "list", "data": [1], "has_more": False},
        [],
        None,
    ],
)
def test_a_page_that_is_not_a_list_of_objects_is_unreadable(answer: object) -> None:
    with pytest.raises(UnreadableRailObject):
        page_of(answer)

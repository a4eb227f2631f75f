"""A Stripe list page read from its body as the rail sends it: each object as `wire.py` reads
one, the cursor for the next page, and refusal of a body that is no list, rather than a guess.
"""

from __future__ import annotations

import pytest

from railsim.objects import Payout, Transfer, json_bytes
from services.adapters.stripe.wire import list_page_of, rail_object_of
from services.domain.rail import UnreadableRailObject

SID = "6f1c2b1e-2f7e-4c1a-9d1e-3f6a9b2c4d5e"


def body(data: list[object], has_more: bool = False) -> bytes:
    return json_bytes({"object": "list", "data": data, "has_more": has_more, "url": "/v1/x"})


def test_a_page_reads_every_object_in_the_rails_order_with_the_next_cursor() -> None:
    newer = Transfer("tr_2", 2_500, "usd", "acct_2", 1_800_000_060, metadata={"settlement_id": SID})
    older = Transfer("tr_1", 1_000, "eur", "acct_1", 1_800_000_000)
    page = list_page_of(body([newer.to_wire(), older.to_wire()], has_more=True))
    assert page.objects == [rail_object_of(newer.to_wire()), rail_object_of(older.to_wire())]
    assert (page.has_more, page.last_id) == (True, "tr_1")
    assert page.objects[0].settlement_id == SID and page.objects[1].currency == "EUR"


def test_the_last_page_and_an_empty_one_say_no_more() -> None:
    payout = Payout("po_1", 500, "usd", "ba_1", 1_800_000_000, status="paid")
    last = list_page_of(body([payout.to_wire()]))
    assert (len(last.objects), last.has_more, last.last_id) == (1, False, "po_1")
    assert list_page_of(body([])) == ([], False, None)


def test_amounts_past_what_a_float_holds_stay_exact_integers() -> None:
    wire = Transfer("tr_1", 2**53 + 1, "usd", "acct_1", 1_800_000_000).to_wire()
    (read,) = list_page_of(body([wire])).objects
    assert read.amount == 2**53 + 1 and type(read.amount) is int


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b'{"object": "transfer", "id": "tr_1"}',  # an object, not a list
        b'{"object": "list", "data": {}, "has_more": false}',
        b'{"object": "list", "data": [], "has_more": "no"}',
        b'{"object": "list", "data": [], "has_more": 0}',
        b'{"object": "list", "data": ["tr_1"], "has_more": false}',
        b'{"object": "list", "data": [{"id": "tr_1", "object": "transfer", "amount": 1.5}],'
        b' "has_more": false}',
        b'{"object": "list", "data": [{"id": "tr_1", "object": "transfer", "amount":'
        b' 99999999999999999999999}], "has_more": false}',
    ],
)
def test_a_body_that_is_no_readable_list_is_refused(raw: bytes) -> None:
    with pytest.raises(UnreadableRailObject):
        list_page_of(raw)

"""The rail's balance read from `GET /v1/balance` as the simulator and Stripe render it: per
currency, available plus pending, in exact ints, or refused."""

from __future__ import annotations

from typing import Any

import pytest

from railsim.balance import BalanceBook, MovementType
from services.adapters.stripe.wire import balance_of
from services.domain.rail import UnreadableRailObject


def test_the_balance_is_available_plus_pending_per_currency() -> None:
    wire = {
        "object": "balance",
        "available": [{"amount": -700, "currency": "eur"}, {"amount": 25, "currency": "usd"}],
        "pending": [{"amount": 300, "currency": "eur"}, {"amount": 0, "currency": "usd"}],
    }
    assert balance_of(wire) == {"EUR": -400, "USD": 25}


def test_the_simulators_balance_reads_as_what_its_movements_add_up_to() -> None:
    book = BalanceBook()
    book.record(MovementType.TRANSFER, -1_000, "eur", "tr_1", 1_800_000_000)
    book.record(MovementType.TRANSFER_REFUND, 400, "eur", "tr_1", 1_800_000_050)
    assert balance_of(book.balance()) == {"EUR": -600}


@pytest.mark.parametrize(
    "fund",
    [
        {"amount": 10.0, "currency": "eur"},  # a float is refused, never rounded
        {"amount": "10", "currency": "eur"},
        {"amount": True, "currency": "eur"},
        {"amount": 10, "currency": "euro"},
        {"currency": "eur"},
        "10 eur",
    ],
)
def test_a_malformed_amount_is_refused(fund: Any) -> None:
    wire = {"available": [fund], "pending": []}
    with pytest.raises(UnreadableRailObject):
        balance_of(wire)


def test_a_balance_without_its_lists_is_refused() -> None:
    with pytest.raises(UnreadableRailObject, match="pending"):
        balance_of({"available": []})

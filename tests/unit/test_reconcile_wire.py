"""Rail objects read from the API's JSON as the simulator renders them: exact ints or refusal."""

from __future__ import annotations

from typing import Any

import pytest

from railsim.objects import Payout, Reversal, Transfer
from services.adapters.stripe.wire import balance_move_of, rail_object_of
from services.domain.payout import PayoutMethod
from services.domain.rail import UnreadableRailObject
from services.domain.reconciliation import BalanceMove, MoneyState, RailObject, money_state

SID = "6f1c2b1e-2f7e-4c1a-9d1e-3f6a9b2c4d5e"


def sent_transfer() -> Transfer:
    return Transfer("tr_1", 1_000, "eur", "acct_1", 1_800_000_000, metadata={"settlement_id": SID})


def test_a_transfer_and_its_full_reversal_read_as_the_rail_shows_them() -> None:
    transfer = sent_transfer()
    read = rail_object_of(transfer.to_wire())
    assert read == RailObject(
        "tr_1", PayoutMethod.TRANSFER, 1_000, 0, "EUR", "acct_1", None, 1_800_000_000, SID
    )
    assert money_state(read) is MoneyState.PAID
    transfer.reversals.append(Reversal("trr_1", 1_000, 1_800_000_100))
    assert money_state(rail_object_of(transfer.to_wire())) is MoneyState.REVERSED


@pytest.mark.parametrize(
    ("status", "state"),
    [("pending", MoneyState.IN_FLIGHT), ("paid", MoneyState.PAID), ("failed", MoneyState.FAILED)],
)
def test_a_payout_reads_with_its_status(status: Any, state: MoneyState) -> None:
    payout = Payout(
        "po_1", 500, "usd", "ba_1", 1_800_000_000, status=status, arrival_date=1_800_086_400
    )
    read = rail_object_of(payout.to_wire())
    assert (read.kind, read.amount, read.currency, read.destination, read.settlement_id) == (
        PayoutMethod.PAYOUT,
        500,
        "USD",
        "ba_1",
        None,
    )
    assert read.arrival == 1_800_086_400
    assert money_state(read) is state


def test_an_expanded_destination_reads_as_its_id() -> None:
    wire = sent_transfer().to_wire() | {"destination": {"id": "acct_1", "object": "account"}}
    assert rail_object_of(wire).destination == "acct_1"


@pytest.mark.parametrize(
    "change",
    [
        {"amount": 1_000.0},
        {"amount": True},
        {"amount": "1000"},
        {"amount_reversed": None},
        {"created": 1.8e9},
        {"currency": "eu"},
        {"currency": None},
        {"object": "charge"},
        {"id": ""},
    ],
)
def test_an_object_with_a_field_of_the_wrong_kind_is_refused_not_rounded(
    change: dict[str, Any],
) -> None:
    with pytest.raises(UnreadableRailObject) as caught:
        rail_object_of(sent_transfer().to_wire() | change)
    assert caught.value.retriable is False


def test_a_balance_transaction_keeps_its_sign() -> None:
    wire = {
        "id": "txn_1",
        "type": "transfer",
        "amount": -1_000,
        "fee": 0,
        "net": -1_000,
        "currency": "eur",
        "created": 7,
        "source": "tr_1",
    }
    assert balance_move_of(wire) == BalanceMove("txn_1", "transfer", -1_000, "EUR", 7, 0, "tr_1")
    with pytest.raises(UnreadableRailObject):
        balance_move_of(wire | {"amount": -10.5})


def test_a_balance_transaction_moves_the_balance_by_its_net() -> None:
    wire = {
        "id": "txn_2",
        "type": "charge",
        "amount": 1_000,
        "fee": 30,
        "net": 970,
        "currency": "usd",
        "created": 7,
        "source": "ch_1",
    }
    move = balance_move_of(wire)
    assert (move.amount, move.fee, move.net) == (1_000, 30, 970)
    with pytest.raises(UnreadableRailObject, match="net"):
        balance_move_of(wire | {"net": 1_000})


def test_an_expanded_source_names_the_settlement_and_the_transfer_reversed() -> None:
    sid = "0190a5c4-7d3e-7000-8000-000000000001"
    base = {"amount": -500, "fee": 0, "net": -500, "currency": "usd", "created": 7}
    transfer = balance_move_of(
        base
        | {
            "id": "txn_3",
            "type": "transfer",
            "source": {"id": "tr_9", "object": "transfer", "metadata": {"settlement_id": sid}},
        }
    )
    assert (transfer.source, transfer.settlement_id, transfer.reverses) == ("tr_9", sid, None)
    grouped = balance_move_of(
        base
        | {
            "id": "txn_4",
            "type": "transfer",
            "source": {"id": "tr_8", "object": "transfer", "metadata": {}, "transfer_group": sid},
        }
    )
    assert grouped.settlement_id == sid
    foreign = balance_move_of(
        base
        | {
            "id": "txn_5",
            "type": "transfer",
            "source": {"id": "tr_7", "object": "transfer", "transfer_group": "ORDER_95"},
        }
    )
    assert foreign.settlement_id is None
    reversal = balance_move_of(
        base
        | {
            "id": "txn_6",
            "type": "transfer_refund",
            "amount": 200,
            "net": 200,
            "source": {"id": "trr_1", "object": "transfer_reversal", "transfer": "tr_9"},
        }
    )
    assert (reversal.source, reversal.reverses, reversal.settlement_id) == ("trr_1", "tr_9", None)

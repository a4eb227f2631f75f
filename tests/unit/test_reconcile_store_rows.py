"""The rows the reconciliation store writes, without a database: a break's stored key is its
identity (the same break with other values is the same row), and its values stay exact."""

from __future__ import annotations

import json
import uuid

from services.domain.breaks import BreakType
from services.domain.reconciliation import Break, break_key
from services.reconcile.store import break_row, stored_key

SID = str(uuid.uuid4())
AMOUNT = Break(BreakType.AMOUNT_MISMATCH, SID, "tr_1", "amount", 1000, 900, -100, "USD")


def test_the_same_break_with_other_values_keeps_its_key() -> None:
    later = AMOUNT._replace(actual=800, difference=-200)
    assert stored_key(later) == stored_key(AMOUNT)


def test_each_part_of_the_identity_makes_another_break() -> None:
    others = [
        AMOUNT._replace(settlement_id=str(uuid.uuid4())),
        AMOUNT._replace(rail_object_id="tr_2"),
        AMOUNT._replace(rail_object_id=None),
        AMOUNT._replace(break_type=BreakType.STATUS_DRIFT),
        AMOUNT._replace(field="amount_reversed"),
        AMOUNT._replace(currency="EUR"),
    ]
    keys = {stored_key(item) for item in [AMOUNT, *others]}
    assert len(keys) == len(others) + 1


def test_the_key_reads_back_into_the_identity_so_no_two_breaks_share_it() -> None:
    # Decodable means one-to-one: text with commas or quotes cannot forge another break's key.
    odd = AMOUNT._replace(settlement_id=None, rail_object_id='a","b', field="x,y")
    for item in (AMOUNT, odd):
        assert tuple(json.loads(stored_key(item))) == break_key(item)


def test_a_row_keeps_amounts_exact_and_names_the_reason() -> None:
    huge = AMOUNT._replace(expected=2**63 - 1, actual=2**63 - 2, difference=-1)
    row = break_row(huge)
    assert (json.loads(row.expected), json.loads(row.actual)) == (2**63 - 1, 2**63 - 2)
    assert (row.settlement_id, row.reason, row.break_type) == (
        uuid.UUID(SID),
        "amount:-1",
        "amount_mismatch",
    )


def test_a_balance_break_names_no_settlement_and_no_object() -> None:
    balance = Break(BreakType.BALANCE_MISMATCH, None, None, "in_transit", 5, 7, 2, "EUR")
    row = break_row(balance)
    assert (row.settlement_id, row.rail_object_id, row.currency) == (None, None, "EUR")
    assert (row.expected, row.actual, row.reason) == ("5", "7", "in_transit:+2")

"""The nostro view: the rail's balance moves by what the ledger's sent accounts took in."""

from __future__ import annotations

from services.domain.breaks import BreakType
from services.domain.postings import AccountKind, Posting, postings_for
from services.domain.reconciliation import BalanceMove, Break
from services.domain.settlement import SettlementStatus
from services.reconcile.nostro import (
    balance_breaks,
    ledger_inflow,
    rail_outflow,
    statement_breaks,
)

S = SettlementStatus
K = AccountKind


def booked(tenant: str, amount: int, currency: str, *steps: SettlementStatus) -> list[Posting]:
    """The postings of a settlement accepted and moved through `steps` by the shared rules."""
    held, out = K.PAYABLE, []
    for target in steps:
        postings, held = postings_for(amount, currency, tenant, held, target)
        out += postings
    return out


def move(n: int, kind: str, amount: int, currency: str = "EUR") -> BalanceMove:
    return BalanceMove(f"txn_{n}", kind, amount, currency, 1_800_000_000 + n)


def test_money_sent_paid_and_returned_nets_the_same_on_both_sides() -> None:
    postings = booked("acme", 1_000, "EUR", S.SUBMITTED, S.PAID)
    postings += booked("a:b", 300, "EUR", S.PAID, S.REVERSED)  # a tenant with a colon
    postings += booked("acme", 50, "USD", S.SUBMITTED, S.FAILED)
    moves = [
        move(1, "transfer", -1_000),
        move(2, "transfer", -300),
        move(3, "transfer_refund", 300),
    ]
    moves += [move(4, "payout", -50, "USD"), move(5, "payout_failure", 50, "USD")]
    moves += [move(6, "charge", 99_999), move(7, "stripe_fee", -25)]  # not the ledger's business
    assert ledger_inflow(postings) == {"EUR": 1_000, "USD": 0}
    assert rail_outflow(moves) == {"EUR": 1_000, "USD": 0}
    assert balance_breaks(moves, postings) == []


def test_money_that_left_the_rail_without_a_booking_is_a_balance_mismatch() -> None:
    postings = booked("acme", 1_000, "EUR", S.SUBMITTED)
    moves = [move(1, "transfer", -1_000), move(2, "payout", -250), move(3, "payout", -9, "GBP")]
    assert balance_breaks(moves, postings) == [
        Break(BreakType.BALANCE_MISMATCH, None, None, "balance", 1_000, 1_250, 250, "EUR"),
        Break(BreakType.BALANCE_MISMATCH, None, None, "balance", 0, 9, 9, "GBP"),
    ]


def test_a_booking_the_rail_never_moved_is_a_balance_mismatch_the_other_way() -> None:
    found = balance_breaks([], booked("acme", 700, "EUR", S.PAID))
    assert [(b.expected, b.actual, b.difference) for b in found] == [(700, 0, -700)]


def test_the_rails_closing_balance_is_its_opening_plus_its_transactions() -> None:
    moves = [move(1, "charge", 5_000), move(2, "transfer", -1_000), move(3, "payout", -7, "USD")]
    closing = {"EUR": 14_000, "USD": 93}
    assert statement_breaks({"EUR": 10_000, "USD": 100}, closing, moves) == []
    (found,) = statement_breaks({"EUR": 10_000, "USD": 100}, closing, moves[1:])
    assert (found.field, found.expected, found.actual, found.difference, found.currency) == (
        "balance_transactions",
        9_000,
        14_000,
        5_000,
        "EUR",
    )


def test_a_foreign_charge_with_a_fee_moves_the_balance_by_its_net_and_breaks_nothing() -> None:
    charge = move(1, "charge", 1_000)._replace(fee=30, ours=False)
    assert statement_breaks({"EUR": 0}, {"EUR": 970}, [charge]) == []
    assert balance_breaks([charge], []) == []
    (found,) = statement_breaks({"EUR": 0}, {"EUR": 1_000}, [charge])
    assert found.difference == 30


def test_another_systems_transfers_and_payouts_are_no_payee_outflow_of_settles() -> None:
    sent = booked("acme", 1_000, "EUR", SettlementStatus.SUBMITTED)
    automatic = move(2, "payout", -5_000)._replace(ours=False)
    foreign = move(3, "transfer", -700)._replace(ours=False)
    ours = move(4, "transfer", -1_000)
    assert balance_breaks([ours, automatic, foreign], sent) == []
    (found,) = balance_breaks([ours, automatic._replace(ours=True)], sent)
    assert found.difference == 5_000


def test_a_fee_on_settles_payout_is_no_payee_money_but_moves_the_balance() -> None:
    sent = booked("acme", 1_000, "EUR", SettlementStatus.SUBMITTED)
    instant = move(5, "payout", -1_000)._replace(fee=15)
    assert balance_breaks([instant], sent) == []
    assert statement_breaks({"EUR": 2_000}, {"EUR": 985}, [instant]) == []

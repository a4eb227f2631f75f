"""Posting rules: every entry balances, and each settlement nets to what its final state implies."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.money import CURRENCIES, MAX_AMOUNT
from services.domain.postings import (
    AccountKind,
    Posting,
    accept_postings,
    account_id,
    charge_postings,
    entry_kind,
    expected_net,
    is_balanced,
    net_by_account,
    postings_for,
)
from services.domain.settlement import (
    TERMINAL,
    IllegalTransition,
    SettlementStatus,
    transition,
)

S = SettlementStatus
K = AccountKind
amounts = st.integers(1, MAX_AMOUNT)
currencies = st.sampled_from(sorted(CURRENCIES))


def test_account_ids_fit_the_accounts_table() -> None:
    assert account_id("acme", K.IN_TRANSIT, "EUR") == "acme:in_transit:EUR"
    assert {k.value for k in K} == {"funding", "payable", "in_transit", "paid_out"}


def test_acceptance_moves_the_amount_from_funding_to_payable() -> None:
    postings, held_in = accept_postings(1050, "EUR", "acme")
    assert postings == [
        Posting("acme:funding:EUR", -1050, "EUR"),
        Posting("acme:payable:EUR", 1050, "EUR"),
    ]
    assert held_in is K.PAYABLE


@pytest.mark.parametrize(
    ("held_in", "target", "debit", "credit"),
    [
        (K.PAYABLE, S.SUBMITTED, K.IN_TRANSIT, K.PAYABLE),
        (K.PAYABLE, S.PAID, K.PAID_OUT, K.PAYABLE),
        (K.IN_TRANSIT, S.PAID, K.PAID_OUT, K.IN_TRANSIT),
        (K.PAYABLE, S.FAILED, K.FUNDING, K.PAYABLE),
        (K.IN_TRANSIT, S.FAILED, K.FUNDING, K.IN_TRANSIT),
        (K.PAID_OUT, S.REVERSED, K.FUNDING, K.PAID_OUT),
    ],
)
def test_each_change_debits_the_new_holding_account_and_credits_the_old(
    held_in: AccountKind, target: SettlementStatus, debit: AccountKind, credit: AccountKind
) -> None:
    postings, now_in = postings_for(500, "USD", "acme", held_in, target)
    assert postings == [
        Posting(account_id("acme", credit, "USD"), -500, "USD"),
        Posting(account_id("acme", debit, "USD"), 500, "USD"),
    ]
    assert now_in is debit


@pytest.mark.parametrize(
    ("held_in", "target"),
    [
        (K.PAYABLE, S.DISPATCHING),
        (K.PAYABLE, S.NEEDS_REVIEW),
        (K.IN_TRANSIT, S.NEEDS_REVIEW),
        (K.IN_TRANSIT, S.SUBMITTED),
    ],
)
def test_changes_that_do_not_move_money_book_nothing(
    held_in: AccountKind, target: SettlementStatus
) -> None:
    assert postings_for(500, "USD", "acme", held_in, target) == ([], held_in)


@pytest.mark.parametrize("amount", [0, -1, MAX_AMOUNT + 1, True])
def test_amounts_outside_minor_unit_range_are_refused(amount: int) -> None:
    with pytest.raises(ValueError):
        accept_postings(amount, "USD", "acme")


def test_unknown_currencies_are_refused() -> None:
    with pytest.raises(ValueError):
        accept_postings(1, "usd", "acme")


def test_the_entry_kind_is_the_target_status() -> None:
    assert [entry_kind(s) for s in (S.ACCEPTED, S.PAID)] == ["accepted", "paid"]


def test_the_final_states_imply_these_net_positions() -> None:
    assert expected_net(7, "GBP", "acme", S.PAID) == {
        "acme:funding:GBP": -7,
        "acme:paid_out:GBP": 7,
    }
    assert expected_net(7, "GBP", "acme", S.FAILED) == {}
    assert expected_net(7, "GBP", "acme", S.REVERSED) == {}
    assert expected_net(7, "GBP", "acme", S.NEEDS_REVIEW, K.IN_TRANSIT) == {
        "acme:funding:GBP": -7,
        "acme:in_transit:GBP": 7,
    }
    with pytest.raises(ValueError):
        expected_net(7, "GBP", "acme", S.NEEDS_REVIEW)


def test_a_rails_charge_moves_from_settles_own_funding_to_its_rail_fees() -> None:
    assert charge_postings(35, "EUR") == [
        Posting("platform:funding:EUR", -35, "EUR"),
        Posting("platform:rail_fees:EUR", 35, "EUR"),
    ]
    with pytest.raises(ValueError, match="charge"):
        charge_postings(0, "EUR")


def test_an_unbalanced_set_is_detected() -> None:
    assert not is_balanced(
        [Posting("a:funding:USD", -5, "USD"), Posting("a:payable:EUR", 5, "EUR")]
    )
    assert net_by_account([Posting("x", 5, "USD"), Posting("x", -5, "USD")]) == {}


@given(
    amounts,
    currencies,
    st.sampled_from(list(K)),
    st.sampled_from(list(S)),
)
def test_every_posting_set_balances_per_currency(
    amount: int, currency: str, held_in: AccountKind, target: SettlementStatus
) -> None:
    postings, _ = postings_for(amount, currency, "acme", held_in, target)
    assert is_balanced(postings)
    assert sum(p.amount for p in postings) == 0
    assert all(p.amount != 0 and p.currency == currency for p in postings)
    assert is_balanced(accept_postings(amount, currency, "acme")[0])


@given(amounts, currencies, st.lists(st.sampled_from(list(S)), max_size=30))
def test_any_legal_path_nets_to_what_its_final_state_implies(
    amount: int, currency: str, targets: list[SettlementStatus]
) -> None:
    booked, held_in = accept_postings(amount, currency, "acme")
    kinds = [entry_kind(S.ACCEPTED)]
    state = S.ACCEPTED
    for target in targets:
        try:
            state = transition(state, target, reason="review").target
        except IllegalTransition:
            continue
        postings, held_in = postings_for(amount, currency, "acme", held_in, target)
        if postings:
            kinds.append(entry_kind(target))
        booked += postings
    assert net_by_account(booked) == expected_net(amount, currency, "acme", state, held_in)
    # The database allows one entry per kind per settlement.
    assert len(kinds) == len(set(kinds))
    if state in TERMINAL:
        assert net_by_account(booked) == expected_net(amount, currency, "acme", state)

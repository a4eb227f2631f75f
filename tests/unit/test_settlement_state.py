"""The settlement state machine: only the transitions SPEC 4.1 allows, whatever the sequence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.shared.domain.settlement import (
    TERMINAL,
    IllegalTransition,
    ReasonRequired,
    SettlementStatus,
    event_type,
    is_transition_valid,
    transition,
)
from services.shared.errors import SettleError

S = SettlementStatus

ALLOWED = {
    (S.ACCEPTED, S.DISPATCHING),
    (S.ACCEPTED, S.SUBMITTED),
    (S.ACCEPTED, S.PAID),
    (S.ACCEPTED, S.FAILED),
    (S.ACCEPTED, S.NEEDS_REVIEW),
    (S.DISPATCHING, S.SUBMITTED),
    (S.DISPATCHING, S.PAID),
    (S.DISPATCHING, S.FAILED),
    (S.DISPATCHING, S.NEEDS_REVIEW),
    (S.SUBMITTED, S.PAID),
    (S.SUBMITTED, S.FAILED),
    (S.SUBMITTED, S.NEEDS_REVIEW),
    (S.PAID, S.REVERSED),
    (S.NEEDS_REVIEW, S.SUBMITTED),
    (S.NEEDS_REVIEW, S.PAID),
    (S.NEEDS_REVIEW, S.FAILED),
}
PAIRS = [(a, b) for a in S for b in S]


def test_statuses_are_the_strings_the_database_stores() -> None:
    assert {s.value for s in S} == {
        "accepted",
        "dispatching",
        "submitted",
        "paid",
        "failed",
        "reversed",
        "needs_review",
    }
    assert {S.PAID, S.FAILED, S.REVERSED} == TERMINAL


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_the_table_allows_exactly_the_specified_transitions(
    source: SettlementStatus, target: SettlementStatus
) -> None:
    assert is_transition_valid(source, target) == ((source, target) in ALLOWED)


@pytest.mark.parametrize(("source", "target"), sorted(set(PAIRS) - ALLOWED))
def test_an_illegal_transition_raises_a_non_retriable_domain_error(
    source: SettlementStatus, target: SettlementStatus
) -> None:
    with pytest.raises(IllegalTransition) as caught:
        transition(source, target, reason="operator")
    assert isinstance(caught.value, SettleError) and caught.value.retriable is False
    assert (caught.value.source, caught.value.target) == (source, target)


def test_a_transition_names_its_event_and_keeps_its_reason() -> None:
    change = transition(S.SUBMITTED, S.FAILED, reason="account_closed")
    assert change == (S.SUBMITTED, S.FAILED, "failed", "account_closed")
    assert transition(S.ACCEPTED, S.PAID).event_type == "paid"


def test_the_first_event_is_created_and_the_others_are_named_after_their_status() -> None:
    assert event_type(S.ACCEPTED) == "created"
    assert {event_type(s) for s in S if s is not S.ACCEPTED} == {
        "dispatching",
        "submitted",
        "paid",
        "failed",
        "reversed",
        "needs_review",
    }


@pytest.mark.parametrize("reason", [None, ""])
def test_needs_review_requires_a_reason(reason: str | None) -> None:
    with pytest.raises(ReasonRequired):
        transition(S.SUBMITTED, S.NEEDS_REVIEW, reason=reason)
    assert (
        transition(S.SUBMITTED, S.NEEDS_REVIEW, "ambiguous timeout").reason == "ambiguous timeout"
    )


@given(st.lists(st.sampled_from(list(S)), max_size=40))
def test_no_sequence_of_requests_reaches_an_illegal_state(targets: list[SettlementStatus]) -> None:
    state = S.ACCEPTED
    for target in targets:
        before = state
        try:
            state = transition(state, target, reason="review").target
        except IllegalTransition:
            assert state is before
            assert (before, target) not in ALLOWED
            continue
        assert (before, state) in ALLOWED
        # Once terminal, the only way on is a recorded reversal of a paid settlement.
        if before in TERMINAL:
            assert (before, state) == (S.PAID, S.REVERSED)

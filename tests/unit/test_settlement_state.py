"""The settlement state machine: only the transitions SPEC 4.1 allows, whatever the sequence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.errors import SettleError
from services.domain.settlement import (
    TERMINAL,
    IllegalTransition,
    ReasonRequired,
    SettlementStatus,
    event_type,
    is_transition_valid,
    reversal_target,
    reversed_after,
    step_event_type,
    transition,
)

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
    (S.PAID, S.PARTLY_REVERSED),
    (S.PARTLY_REVERSED, S.PARTLY_REVERSED),
    (S.PARTLY_REVERSED, S.REVERSED),
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
        "partly_reversed",
        "needs_review",
    }
    assert {S.PAID, S.PARTLY_REVERSED, S.FAILED, S.REVERSED} == TERMINAL


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
        "partly_reversed",
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
        # Once terminal, the only way on is a recorded reversal of money that was paid.
        if before in TERMINAL:
            assert before in (S.PAID, S.PARTLY_REVERSED)
            assert state in (S.PARTLY_REVERSED, S.REVERSED)


def test_a_reversal_leads_to_partly_reversed_until_the_whole_amount_is_back() -> None:
    assert reversal_target(700, 200) is S.PARTLY_REVERSED
    assert reversal_target(700, 700) is S.REVERSED
    for wrong in (0, 701, -1):
        with pytest.raises(ValueError):
            reversal_target(700, wrong)


def test_a_reversal_step_must_bring_more_back_and_name_its_status() -> None:
    assert reversed_after(S.PAID, S.PARTLY_REVERSED, 700, 0, 200) == 200
    assert reversed_after(S.PARTLY_REVERSED, S.PARTLY_REVERSED, 700, 200, 500) == 500
    assert reversed_after(S.PARTLY_REVERSED, S.REVERSED, 700, 500, None) == 700
    assert reversed_after(S.SUBMITTED, S.PAID, 700, 0, 200) == 0  # not a reversal: unchanged
    for target, before, reported in [
        (S.PARTLY_REVERSED, 500, 500),  # the same part again
        (S.PARTLY_REVERSED, 500, 200),  # an older, smaller one
        (S.PARTLY_REVERSED, 0, 700),  # the whole amount is not a part
        (S.REVERSED, 0, 200),  # a part is not the whole
        (S.REVERSED, 0, 900),  # more than was paid
    ]:
        with pytest.raises(IllegalTransition):
            reversed_after(S.PAID, target, 700, before, reported)


def test_a_further_partial_reversal_is_a_step_with_its_own_event_not_a_reference() -> None:
    assert step_event_type(S.PARTLY_REVERSED, S.PARTLY_REVERSED) == "partly_reversed"
    assert step_event_type(S.PAID, S.PAID) == "rail_reference_recorded"

"""The inbox's pure decision: which moves a rail signal plans from each settlement status, and
that any order and duplication of one settlement's events ends where the rail's history says,
with the same net postings and never an illegal move or a posting rule applied twice."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.inbox.decision import (
    Signal,
    ignore_reason,
    plan,
    signal_of,
)
from services.inbox.errors import MalformedEvent
from services.inbox.events import parse_event
from services.shared.domain.postings import (
    AccountKind,
    Posting,
    holding_account,
    net_by_account,
    postings_for,
)
from services.shared.domain.settlement import SettlementStatus as S
from services.shared.domain.settlement import is_transition_valid

PRE_TERMINAL = (S.ACCEPTED, S.DISPATCHING, S.SUBMITTED, S.NEEDS_REVIEW)


@pytest.mark.parametrize("current", PRE_TERMINAL)
def test_before_paid_each_signal_reaches_what_the_rail_reported(current: S) -> None:
    assert plan(current, Signal.CONFIRMED) == (S.PAID,)
    assert plan(current, Signal.FAILED) == (S.FAILED,)
    assert plan(current, Signal.REVERSED) == (S.PAID, S.REVERSED)


def test_after_paid_only_money_coming_back_moves_it() -> None:
    assert plan(S.PAID, Signal.CONFIRMED) == ()
    assert plan(S.PAID, Signal.FAILED) == (S.REVERSED,)  # a paid payout returned
    assert plan(S.PAID, Signal.REVERSED) == (S.REVERSED,)


@pytest.mark.parametrize("final", [S.FAILED, S.REVERSED])
def test_final_states_plan_nothing(final: S) -> None:
    assert all(plan(final, signal) == () for signal in Signal)


def test_event_types_map_to_signals_or_are_ignored_with_a_reason() -> None:
    assert signal_of("transfer.created") is Signal.CONFIRMED
    assert signal_of("payout.paid") is Signal.CONFIRMED
    assert signal_of("payout.canceled") is Signal.FAILED
    assert signal_of("transfer.reversed") is Signal.REVERSED
    assert signal_of("payout.created") is None
    assert "informational" in ignore_reason("payout.created")
    assert signal_of("charge.succeeded") is None
    assert "unknown event type" in ignore_reason("charge.succeeded")


def test_parse_reads_the_fields_and_refuses_what_is_not_an_event() -> None:
    body = b'{"id":"evt_1","type":"payout.paid","created":5,"data":{"object":{"id":"po_1",'
    body += b'"metadata":{"settlement_id":"0190a8b4-4e9c-7a3e-9c1b-2f3a4b5c6d7e"}}}}'
    event = parse_event(body)
    assert (event.event_id, event.object_id, event.change_key) == (
        "evt_1",
        "po_1",
        "po_1:payout.paid",
    )
    assert str(event.settlement_id) == "0190a8b4-4e9c-7a3e-9c1b-2f3a4b5c6d7e"
    for bad in (
        b"{not json",
        b"[1]",
        b'{"type":"payout.paid"}',
        b'{"id":"e","type":"payout.paid"}',
    ):
        with pytest.raises(MalformedEvent):
            parse_event(bad)
    unknown = parse_event(b'{"id":"evt_2","type":"charge.succeeded","data":{"object":{}}}')
    assert unknown.change_key is None and unknown.settlement_id is None


# One settlement's rail history, as the events the rail sends for it.
TRANSFER_PAID = ("transfer.created",)
TRANSFER_REVERSED = ("transfer.created", "transfer.reversed")
PAYOUT_PAID = ("payout.created", "payout.paid")
PAYOUT_FAILED = ("payout.created", "payout.failed")
PAYOUT_RETURNED = ("payout.created", "payout.paid", "payout.failed")
RAIL_FINAL = {
    TRANSFER_PAID: S.PAID,
    TRANSFER_REVERSED: S.REVERSED,
    PAYOUT_PAID: S.PAID,
    PAYOUT_FAILED: S.FAILED,
    PAYOUT_RETURNED: S.REVERSED,
}


def fold(start: S, deliveries: list[str]) -> tuple[S, list[Posting], list[S]]:
    """Apply deliveries as the inbox does, checking each move; final status, postings, moves."""
    status, held, postings, moves = start, holding_account(start, AccountKind.FUNDING), [], []
    booked: set[S] = set()
    for event_type in deliveries:
        signal = signal_of(event_type)
        for target in plan(status, signal) if signal else ():
            assert is_transition_valid(status, target)
            lines, held = postings_for(700, "EUR", "t", held, target)
            if lines:
                assert target not in booked, "a posting rule ran twice"
                booked.add(target)
            postings += lines
            status = target
            moves.append(target)
    return status, postings, moves


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[tuple[str, ...], list[str]]:
    history = draw(st.sampled_from(sorted(RAIL_FINAL)))
    # Every event at least once (the rail retries until it is taken), some several times.
    events = [e for e in history for _ in range(draw(st.integers(1, 3)))]
    return history, draw(st.permutations(events))


@given(deliveries(), st.sampled_from([S.ACCEPTED, S.DISPATCHING, S.SUBMITTED]))
def test_any_order_and_duplication_ends_where_the_rail_did(
    case: tuple[tuple[str, ...], list[str]], start: S
) -> None:
    history, order = case
    final, postings, moves = fold(start, order)
    in_order, in_order_postings, _ = fold(start, list(history))
    assert in_order == RAIL_FINAL[history]
    assert net_by_account(postings) == net_by_account(in_order_postings)
    assert len(moves) == len(set(moves)), "a status was reached twice"
    if history == PAYOUT_RETURNED and order.index("payout.failed") < order.index("payout.paid"):
        # The returned payout's failure came first: nothing tells it from a plain failure.
        assert final is S.FAILED
    else:
        assert final is RAIL_FINAL[history]

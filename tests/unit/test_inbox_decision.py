"""The inbox's pure decision: which moves a rail signal plans from each settlement status, and
that any order and duplication of one settlement's events ends where the rail's history says,
with the same net postings and never an illegal move or a posting rule applied twice."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.params import Kind
from services.domain.postings import (
    AccountKind,
    Posting,
    entry_kind,
    expected_net,
    net_by_account,
    postings_for,
    step_postings,
)
from services.domain.rail_event import (
    Reversal,
    Signal,
    ignore_reason,
    plan,
    signal_for,
    signal_of,
)
from services.domain.settlement import SettlementStatus as S
from services.domain.settlement import is_transition_valid, reversed_after
from services.inbox.errors import MalformedEvent
from services.inbox.events import parse_event

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


def test_parse_reads_integers_as_json_does_and_refuses_what_the_store_cannot_hold() -> None:
    # 5 and 5.0 are one number (as the webhook's document, a JSON Schema, says); 5.5 is not
    # an integer. NUL, which no text column holds, and an amount past a bigint are refused
    # as malformed rather than failing the store on every redelivery.
    back = b'"data":{"object":{"id":"tr_1","amount_reversed":%b}}}'
    event = parse_event(b'{"id":"e","type":"transfer.reversed","created":5.0,' + back % b"7.0")
    assert (event.created, event.amount_reversed) == (5, 7)
    for bad in (
        b'{"id":"e","type":"x","created":5.5}',
        b'{"id":"e","type":"x","created":true}',
        b'{"id":"e\\u0000","type":"x"}',
        b'{"id":"e","type":"x\\u0000"}',
        b'{"id":"e","type":"x","data":{"object":{"id":"tr\\u0000"}}}',
        b'{"id":"e","type":"transfer.reversed",' + back % b"9223372036854775808",
        b'{"id":"e","type":"transfer.reversed",' + back % b"0",
    ):
        with pytest.raises(MalformedEvent):
            parse_event(bad)


@pytest.mark.parametrize("current", [S.PAID, S.PARTLY_REVERSED])
def test_a_partial_reversal_plans_its_own_step_and_the_last_part_ends_reversed(
    current: S,
) -> None:
    before = 0 if current is S.PAID else 200
    assert plan(current, Signal.REVERSED, Reversal(700, before, 500)) == (S.PARTLY_REVERSED,)
    assert plan(current, Signal.REVERSED, Reversal(700, before, 700)) == (S.REVERSED,)
    assert plan(S.SUBMITTED, Signal.REVERSED, Reversal(700, 0, 300)) == (
        S.PAID,
        S.PARTLY_REVERSED,
    )


def test_the_same_reversal_again_or_an_older_smaller_one_plans_nothing() -> None:
    assert plan(S.PARTLY_REVERSED, Signal.REVERSED, Reversal(700, 500, 500)) == ()
    assert plan(S.PARTLY_REVERSED, Signal.REVERSED, Reversal(700, 500, 200)) == ()
    assert plan(S.REVERSED, Signal.REVERSED, Reversal(700, 700, 200)) == ()
    assert plan(S.PARTLY_REVERSED, Signal.CONFIRMED) == ()  # a late transfer.created


def test_a_payout_failure_after_its_arrival_date_reverses_only_what_was_seen_paid() -> None:
    def failed(created: int) -> bytes:
        obj = b'{"id":"po_1","amount":700,"arrival_date":100,"metadata":{}}'
        return b'{"id":"evt_%d","type":"payout.failed","created":%d,"data":{"object":%s}}' % (
            created,
            created,
            obj,
        )

    returned, never_paid = parse_event(failed(101)), parse_event(failed(100))
    assert returned.amount_reversed == 700
    assert signal_for(returned.event_type, returned.amount_reversed) is Signal.RETURNED
    assert never_paid.amount_reversed is None
    assert signal_for(never_paid.event_type, never_paid.amount_reversed) is Signal.FAILED
    # Seen paid, the money came back; never seen paid, nothing says it ever arrived.
    assert plan(S.PAID, Signal.RETURNED, Reversal(700, 0, 700)) == (S.REVERSED,)
    assert plan(S.SUBMITTED, Signal.RETURNED, Reversal(700, 0, 700)) == (S.FAILED,)
    assert plan(S.FAILED, Signal.CONFIRMED) == ()  # a payout.paid after it changes nothing


def test_each_partial_reversal_is_its_own_change_and_a_duplicate_shares_it() -> None:
    def reversed_(event_id: str, amount_reversed: int) -> bytes:
        obj = f'{{"id":"tr_1","amount":700,"amount_reversed":{amount_reversed},"metadata":{{}}}}'
        return (
            f'{{"id":"{event_id}","type":"transfer.reversed","data":{{"object":{obj}}}}}'.encode()
        )

    first, twin = parse_event(reversed_("evt_1", 200)), parse_event(reversed_("evt_2", 200))
    second = parse_event(reversed_("evt_3", 500))
    assert first.change_key == twin.change_key == "tr_1:transfer.reversed:200"
    assert second.change_key == "tr_1:transfer.reversed:500"
    assert (
        parse_event(
            b'{"id":"e","type":"transfer.reversed","data":{"object":{"id":"tr_1"}}}'
        ).change_key
        == "tr_1:transfer.reversed"
    )  # a body without the amount: the whole amount
    with pytest.raises(MalformedEvent):
        parse_event(reversed_("evt_4", 0))


# One settlement's rail history, as the events the rail sends for it: (type, amount back).
AMOUNT = 700
Delivery = tuple[str, int | None]
CREATED: Delivery = ("transfer.created", None)
PAID: Delivery = ("payout.paid", None)
HISTORIES: dict[tuple[Delivery, ...], tuple[S, int]] = {
    (CREATED,): (S.PAID, 0),
    (CREATED, ("transfer.reversed", 700)): (S.REVERSED, 700),
    (CREATED, ("transfer.reversed", 200)): (S.PARTLY_REVERSED, 200),
    (CREATED, ("transfer.reversed", 200), ("transfer.reversed", 500)): (S.PARTLY_REVERSED, 500),
    (CREATED, ("transfer.reversed", 200), ("transfer.reversed", 500), ("transfer.reversed", 700)): (
        S.REVERSED,
        700,
    ),
    (("payout.created", None), PAID): (S.PAID, 0),
    (("payout.created", None), ("payout.failed", None)): (S.FAILED, 0),
    (("payout.created", None), PAID, ("payout.failed", 700)): (S.REVERSED, 700),
}


def fold(start: S, deliveries: list[Delivery]) -> tuple[S, int, list[Posting]]:
    """Apply deliveries as the inbox does, checking each move; final status, amount back,
    postings."""
    # The postings that brought the settlement to `start`, as booking and the relay made them.
    postings, held = postings_for(AMOUNT, "EUR", "t", AccountKind.FUNDING, start)
    status, back = start, 0
    booked: set[str] = set()
    for event_type, reported in deliveries:
        signal = signal_for(event_type, reported)
        reversal = None if reported is None else Reversal(AMOUNT, back, reported)
        for target in plan(status, signal, reversal) if signal else ():
            assert is_transition_valid(status, target)
            after = reversed_after(status, target, AMOUNT, back, reported)
            lines, held = step_postings(AMOUNT, "EUR", "t", held, target, back, after)
            if lines:
                kind = entry_kind(target, after)
                assert kind not in booked, "a posting rule ran twice"
                booked.add(kind)
            postings += lines
            status, back = target, after
    return status, back, postings


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[tuple[Delivery, ...], list[Delivery]]:
    history = draw(st.sampled_from(sorted(HISTORIES, key=repr)))
    # Every event at least once (the rail retries until it is taken), some several times.
    events = [e for e in history for _ in range(draw(st.integers(1, 3)))]
    return history, draw(st.permutations(events))


@given(deliveries(), st.sampled_from([S.ACCEPTED, S.DISPATCHING, S.SUBMITTED]))
def test_any_order_and_duplication_ends_where_the_rail_did_with_the_postings_it_implies(
    case: tuple[tuple[Delivery, ...], list[Delivery]], start: S
) -> None:
    history, order = case
    final, back, postings = fold(start, order)
    # Whichever reversal comes last, the largest amount reported stands. A returned payout
    # whose failure comes before its payout.paid was never seen paid: it ends failed.
    returned = ("payout.failed", 700)
    if returned in history and order.index(returned) < order.index(PAID):
        assert (final, back) == (S.FAILED, 0)
    else:
        assert (final, back) == HISTORIES[history]
    assert net_by_account(postings) == expected_net(AMOUNT, "EUR", "t", final, amount_reversed=back)


def test_the_simulators_returned_payout_and_partial_reversal_read_as_returns_and_reversals() -> (
    None
):
    clock = ManualClock()
    faults = Faults(payout_return=1, partial_reversal=1, payout_delay_ms=100, reversal_delay_ms=500)
    sim = RailSim(clock=clock, faults=faults)
    form = [("amount", "701"), ("currency", "eur"), ("destination", "acct_ok")]
    sim.create(Kind.PAYOUT, [*form, ("metadata[settlement_id]", "s-1")], "k-1")
    sim.create(Kind.TRANSFER, [*form, ("metadata[settlement_id]", "s-2")], "k-2")
    clock.advance(5)
    read = {e.event_type: e for e in map(parse_event, (d.payload for d in sim.take_webhooks()))}
    assert read["payout.failed"].amount_reversed == 701
    assert signal_for("payout.failed", read["payout.failed"].amount_reversed) is Signal.RETURNED
    assert read["transfer.reversed"].amount_reversed == 350  # half, rounded down
    assert read["payout.paid"].amount_reversed is None

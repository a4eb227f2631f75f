"""Each break type found in a small planted case, naming the right settlement and rail object."""

from __future__ import annotations

from datetime import date

import pytest

from services.domain.breaks import PAYOUT_FAILURE_WINDOW_SECONDS, PROVEN_DRIFT_SECONDS, BreakType
from services.domain.reconciliation import Break, LedgerRecord, RailObject, Report
from services.domain.settlement import SettlementStatus
from services.reconcile.compare import compare
from tests.unit.reconcile_cases import GRACE, NOW, payout, settled, sid, transfer

S = SettlementStatus
T = BreakType


def run(ledger: list[LedgerRecord], rail: list[RailObject]) -> Report:
    return compare(ledger, rail, NOW, grace=GRACE)


def only_break(report: Report) -> Break:
    assert report.pending == ()
    (found,) = report.breaks
    return found


def test_a_ledger_and_rail_that_agree_give_no_break() -> None:
    ledger = [settled(1), settled(2, S.SUBMITTED), settled(3, S.REVERSED), settled(4, S.FAILED)]
    ledger += [settled(5, S.SUBMITTED), settled(6, S.PAID), settled(7, S.REVERSED)]
    rail = [transfer(1), transfer(3, reversed_=1_000), payout(2, "in_transit")]
    rail += [payout(5, "pending"), payout(6, "paid"), payout(7, "failed")]
    assert run(ledger, rail) == Report((), ())


def test_a_paid_settlement_the_rail_never_saw_is_missing_at_rail() -> None:
    found = only_break(run([settled(1), settled(2, S.FAILED)], []))
    assert found.break_type is T.MISSING_AT_RAIL
    assert (found.settlement_id, found.rail_object_id) == (sid(1), None)


def test_an_object_without_settles_mark_is_out_of_scope_not_a_break() -> None:
    foreign = [transfer(9, settlement_id=None), payout(8, "paid", settlement_id=None)]
    report = run([settled(1)], [transfer(1), *foreign])
    assert report.breaks == ()
    assert {o.object_id for o in report.foreign} == {"tr_9", "po_8"}


def test_an_unmarked_object_a_settlement_claims_is_compared_not_out_of_scope() -> None:
    claimed = transfer(1, settlement_id=None, amount=999)
    report = run([settled(1)], [claimed])
    assert report.foreign == ()
    assert [b.break_type for b in report.breaks] == [T.AMOUNT_MISMATCH]


def test_a_transfer_naming_a_settlement_the_ledger_lacks_is_unknown_at_rail() -> None:
    found = only_break(run([], [transfer(9)]))
    assert (found.break_type, found.rail_object_id, found.actual) == (
        T.UNKNOWN_AT_RAIL,
        "tr_9",
        sid(9),
    )


def test_a_transfer_naming_a_settlement_that_never_sent_is_unknown_at_rail() -> None:
    never_sent = settled(1, S.ACCEPTED, sent_at=None, reference=False)
    found = only_break(run([never_sent], [transfer(1)]))
    assert found.break_type is T.UNKNOWN_AT_RAIL
    assert (found.settlement_id, found.rail_object_id) == (sid(1), "tr_1")


def test_a_second_transfer_for_one_settlement_is_a_duplicate_and_the_first_is_compared() -> None:
    again = transfer(1, object_id="tr_1b", created=transfer(1).created - 5, amount=7)
    found = only_break(run([settled(1)], [transfer(1), again]))
    assert found.break_type is T.DUPLICATE_AT_RAIL
    assert (found.settlement_id, found.rail_object_id, found.actual) == (sid(1), "tr_1b", 2)


def test_without_a_reference_the_earliest_object_is_the_settlements_own() -> None:
    later = transfer(1, object_id="tr_1b", created=transfer(1).created + 5)
    found = only_break(run([settled(1, reference=False)], [later, transfer(1)]))
    assert (found.break_type, found.rail_object_id) == (T.DUPLICATE_AT_RAIL, "tr_1b")


@pytest.mark.parametrize(
    ("changes", "kind", "field", "expected", "actual", "difference"),
    [
        ({"amount": 1_500}, T.AMOUNT_MISMATCH, "amount", 1_000, 1_500, 500),
        ({"currency": "USD"}, T.CURRENCY_MISMATCH, "currency", "EUR", "USD", None),
        (
            {"destination": "acct_x"},
            T.DESTINATION_MISMATCH,
            "destination",
            "acct_1",
            "acct_x",
            None,
        ),
        ({"amount_reversed": 1_000}, T.STATUS_DRIFT, "status", "paid", "reversed", None),
    ],
)
def test_a_field_the_rail_disagrees_on_is_named_with_both_values(
    changes: dict[str, object],
    kind: BreakType,
    field: str,
    expected: object,
    actual: object,
    difference: int | None,
) -> None:
    found = only_break(run([settled(1)], [transfer(1, **changes)]))
    assert found == Break(kind, sid(1), "tr_1", field, expected, actual, difference, "EUR")


def test_a_partial_reversal_booked_in_full_is_an_amount_reversed_mismatch() -> None:
    found = only_break(run([settled(1, S.REVERSED)], [transfer(1, reversed_=400)]))
    assert (found.break_type, found.field, found.difference) == (
        T.AMOUNT_MISMATCH,
        "amount_reversed",
        -600,
    )


def test_a_partial_reversal_the_ledger_missed_is_a_status_drift() -> None:
    found = only_break(run([settled(1)], [transfer(1, reversed_=400)]))
    assert (found.break_type, found.expected, found.actual) == (
        T.STATUS_DRIFT,
        "paid",
        "partly_reversed",
    )


def test_a_partial_reversal_booked_for_its_amount_agrees_and_a_different_one_is_named() -> None:
    ledger = settled(1, S.PARTLY_REVERSED)._replace(amount_reversed=400)
    assert run([ledger], [transfer(1, reversed_=400)]).breaks == ()
    behind = only_break(run([ledger], [transfer(1, reversed_=700)]))
    assert (behind.break_type, behind.field, behind.difference) == (
        T.AMOUNT_MISMATCH,
        "amount_reversed",
        300,
    )
    whole = only_break(run([ledger], [transfer(1, reversed_=1_000)]))
    assert (whole.break_type, whole.expected, whole.actual) == (
        T.STATUS_DRIFT,
        "partly_reversed",
        "reversed",
    )
    assert only_break(run([ledger], [])).break_type is T.MISSING_AT_RAIL


@pytest.mark.parametrize(
    ("status", "rail_status", "actual"),
    [
        (S.SUBMITTED, "paid", "paid"),
        (S.SUBMITTED, "failed", "failed"),
        (S.PAID, "failed", "failed"),
        (S.PAID, "in_transit", "in_flight"),
        (S.FAILED, "paid", "paid"),
        (S.NEEDS_REVIEW, "paid", "paid"),
        (S.DISPATCHING, "canceled", "failed"),
    ],
)
def test_a_payout_whose_status_the_ledger_disagrees_with_drifts(
    status: SettlementStatus, rail_status: str, actual: str
) -> None:
    found = only_break(
        run([settled(1, status)], [payout(1, rail_status)._replace(object_id="tr_1")])
    )
    assert (found.break_type, found.settlement_id, found.rail_object_id) == (
        T.STATUS_DRIFT,
        sid(1),
        "tr_1",
    )
    assert (found.expected, found.actual) == (status.value, actual)


def test_inside_the_grace_period_a_missing_object_or_a_lagging_status_is_pending() -> None:
    sent = NOW - GRACE + 1
    report = run(
        [settled(1, sent_at=sent), settled(2, S.PAID, sent_at=sent)],
        [payout(2, "in_transit")._replace(object_id="tr_2")],
    )
    assert report.breaks == ()
    assert [(p.settlement_id, p.rail_object_id, p.would_be, p.age) for p in report.pending] == [
        (sid(1), None, T.MISSING_AT_RAIL, GRACE - 1),
        (sid(2), "tr_2", T.STATUS_DRIFT, GRACE - 1),
    ]
    assert {p.bucket for p in report.pending} == {"T+0s"}


def test_a_drift_the_rail_proves_waits_only_a_minute_for_its_webhook() -> None:
    paid = [payout(2, "paid")._replace(object_id="tr_2")]
    early = run([settled(2, S.SUBMITTED, sent_at=NOW - PROVEN_DRIFT_SECONDS + 1)], paid)
    assert (early.breaks, [p.would_be for p in early.pending]) == ((), [T.STATUS_DRIFT])
    proven = only_break(run([settled(2, S.SUBMITTED, sent_at=NOW - PROVEN_DRIFT_SECONDS)], paid))
    assert (proven.break_type, proven.actual) == (T.STATUS_DRIFT, "paid")
    assert PROVEN_DRIFT_SECONDS < GRACE


def test_a_bank_transfer_missing_from_the_statements_is_pending_until_its_booking_day() -> None:
    # Sent long ago (past any grace period): only its booking day decides.
    due = [settled(n, S.SUBMITTED)._replace(due_on=date(2026, 3, n)) for n in (2, 3, 4)]
    report = compare(due, [], NOW, grace=GRACE, booked_through=date(2026, 3, 3))
    assert [b.settlement_id for b in report.breaks] == [sid(2), sid(3)]
    assert {b.break_type for b in report.breaks} == {T.MISSING_AT_RAIL}
    assert [(p.settlement_id, p.would_be) for p in report.pending] == [(sid(4), T.MISSING_AT_RAIL)]
    # Records that run to no day (a rail's API) leave the grace period in charge.
    assert len(compare(due, [], NOW, grace=GRACE).breaks) == 3


def test_at_the_end_of_the_grace_period_the_same_items_are_breaks() -> None:
    sent = NOW - GRACE
    report = run(
        [settled(1, sent_at=sent), settled(2, S.SUBMITTED, sent_at=sent)],
        [payout(2, "paid")._replace(object_id="tr_2")],
    )
    assert report.pending == ()
    assert [b.break_type for b in report.breaks] == [T.MISSING_AT_RAIL, T.STATUS_DRIFT]


def test_a_wrong_amount_is_a_break_even_inside_the_grace_period() -> None:
    report = run([settled(1, sent_at=NOW)], [transfer(1, amount=999)])
    assert [b.break_type for b in report.breaks] == [T.AMOUNT_MISMATCH]


def test_two_versions_of_one_object_are_refused_and_exact_repeats_count_once() -> None:
    assert run([settled(1)], [transfer(1), transfer(1)]) == Report((), ())
    with pytest.raises(ValueError, match="pass one version"):
        run([settled(1)], [transfer(1), transfer(1, reversed_=1_000)])


def test_an_object_that_does_not_state_its_destination_is_not_compared_on_it() -> None:
    # Stripe's balance report names no payout's bank account: nothing to compare, no break.
    unstated = payout(1, "paid")._replace(destination=None)
    assert run([settled(1, S.PAID)], [unstated]).breaks == ()
    elsewhere = payout(1, "paid")._replace(destination="ba_other")
    assert only_break(run([settled(1, S.PAID)], [elsewhere])).break_type is T.DESTINATION_MISMATCH


def test_one_rail_object_named_by_two_settlements_is_a_duplicate_in_the_ledger() -> None:
    # Settlement 3 names transfer 2 as its own: the ledger books one payment twice.
    ledger = [settled(2), settled(3)._replace(rail_reference="tr_2")]
    report = run(ledger, [transfer(2)])
    (found,) = [b for b in report.breaks if b.break_type is T.DUPLICATE_IN_LEDGER]
    assert (found.settlement_id, found.rail_object_id, found.expected, found.actual) == (
        sid(3),
        "tr_2",
        sid(2),
        sid(3),
    )
    # A first claimant on another page (read by the caller from the whole ledger) counts too.
    alone = compare([ledger[1]], [transfer(2)], NOW, grace=GRACE, first_claims={"tr_2": sid(2)})
    assert T.DUPLICATE_IN_LEDGER in {b.break_type for b in alone.breaks}
    assert T.DUPLICATE_IN_LEDGER not in {
        b.break_type for b in run([settled(2)], [transfer(2)]).breaks
    }


def test_a_payout_still_in_transit_past_its_arrival_and_failure_window_is_overdue() -> None:
    due = NOW - PAYOUT_FAILURE_WINDOW_SECONDS  # arrived (or failed) by now, at the latest
    ledger = [settled(n, S.SUBMITTED)._replace(rail_reference=f"po_{n}") for n in (1, 2, 3)]
    rail = [
        payout(1, "in_transit", arrival=due),
        payout(2, "in_transit", arrival=due + 1),  # may still fail for a second
        payout(3, "paid", arrival=due),  # arrived: a drift, not an overdue payout
    ]
    report = run(ledger, rail)
    assert [(b.break_type, b.settlement_id, b.expected, b.actual) for b in report.breaks] == [
        (T.OVERDUE, sid(1), due, "in_transit"),
        (T.STATUS_DRIFT, sid(3), "submitted", "paid"),
    ]

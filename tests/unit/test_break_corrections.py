"""The pure rules of an operator's work on a break: which action applies to which break, the
balanced platform entry a write-off or an adjustment books (its amount and direction from the
break alone), the step a correction asks of the settlement state machine, whether the rail
agrees with a correction or a match, reopening, and how old a break is."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.break_work import (
    CORRECTABLE,
    UNCHECKED,
    AgingBucket,
    BreakAction,
    BreakFacts,
    BreakWorkRefused,
    Correction,
    Direction,
    adjust_postings,
    aging_bucket,
    check_applies,
    correction_target,
    first_seen_window,
    ledger_sent,
    write_off_loss,
    write_off_postings,
)
from services.domain.breaks import (
    BreakStatus,
    BreakType,
    IllegalBreakTransition,
    reopening,
)
from services.domain.instruction import InstructionStatus
from services.domain.payout import PayoutMethod
from services.domain.postings import PlatformAccount, Posting, is_balanced, platform_postings
from services.domain.reconciliation import RailObject
from services.domain.settlement import ReasonRequired, SettlementStatus
from services.operations.errors import Refused
from services.operations.verdict import UnderReview, correct_verdict, match_verdict

A, B, T, S = BreakAction, BreakStatus, BreakType, SettlementStatus
IS = InstructionStatus
SID = "0190f0a0-0000-7000-8000-000000000001"
NOW = datetime(2026, 12, 3, 12, tzinfo=UTC)


def facts(
    break_type: BreakType = T.AMOUNT_MISMATCH,
    status: BreakStatus = B.OPEN,
    field: str = "amount",
    settlement_id: str | None = SID,
    rail_object_id: str | None = "tr_1",
) -> BreakFacts:
    return BreakFacts(7, break_type, status, field, settlement_id, rail_object_id)


def code_of(action: BreakAction, item: BreakFacts) -> str | None:
    try:
        check_applies(action, item)
    except BreakWorkRefused as e:
        return e.code
    return None


def test_only_assigning_commenting_and_reopening_skip_the_second_operator() -> None:
    assert {A.ASSIGN, A.COMMENT, A.REOPEN} == UNCHECKED


@pytest.mark.parametrize(
    ("action", "item", "code"),
    [
        (A.WRITE_OFF, facts(), None),
        (A.WRITE_OFF, facts(T.BALANCE_MISMATCH, field="balance", settlement_id=None), None),
        (A.WRITE_OFF, facts(T.MISSING_AT_RAIL, field="count"), None),
        (A.WRITE_OFF, facts(T.MISSING_AT_RAIL, field="count", settlement_id=None), "no_amount"),
        (A.WRITE_OFF, facts(T.CURRENCY_MISMATCH, field="currency"), "no_amount"),
        (A.WRITE_OFF, facts(T.STATUS_DRIFT, field="status"), "no_amount"),
        (A.WRITE_OFF, facts(status=B.RESOLVED), "break_closed"),
        (A.ADJUST, facts(T.STATEMENT_GAP, field="electronic_sequence"), None),
        (A.ADJUST, facts(status=B.HEALED), "break_closed"),
        (A.CORRECT, facts(T.MISSING_AT_RAIL, field="count"), None),
        (A.CORRECT, facts(T.STATUS_DRIFT, field="status"), None),
        (A.CORRECT, facts(T.AMOUNT_MISMATCH), "wrong_break_type"),
        (A.CORRECT, facts(T.UNKNOWN_AT_RAIL, settlement_id=None), "wrong_break_type"),
        (A.MATCH, facts(T.UNKNOWN_AT_RAIL, field="settlement_id", settlement_id=None), None),
        (A.MATCH, facts(T.UNKNOWN_AT_RAIL, rail_object_id=None), "wrong_break_type"),
        (A.MATCH, facts(T.DUPLICATE_AT_RAIL, field="count"), "wrong_break_type"),
        (A.ASSIGN, facts(), None),
        (A.ASSIGN, facts(status=B.RESOLVED), "break_closed"),
        (A.COMMENT, facts(status=B.HEALED), None),
        (A.REOPEN, facts(status=B.RESOLVED), None),
        (A.REOPEN, facts(status=B.OPEN), "not_resolved"),
        (A.REOPEN, facts(status=B.HEALED), "not_resolved"),
    ],
)
def test_each_action_applies_to_its_breaks_only(
    action: BreakAction, item: BreakFacts, code: str | None
) -> None:
    assert code_of(action, item) == code


def test_a_correction_needs_a_break_that_names_a_settlement() -> None:
    assert {T.MISSING_AT_RAIL, T.STATUS_DRIFT} <= CORRECTABLE
    assert T.BALANCE_MISMATCH not in CORRECTABLE


@pytest.mark.parametrize(
    ("item", "difference", "sent", "loss"),
    [
        # The rail paid 200 more than the ledger booked: settle lost 200.
        (facts(field="amount"), 200, None, 200),
        (facts(field="amount"), -200, None, -200),
        # The rail took back 150 more than the ledger booked: settle found 150.
        (facts(field="amount_reversed"), 150, None, -150),
        (facts(T.BALANCE_MISMATCH, field="balance", settlement_id=None), 500, None, 500),
        (facts(T.BALANCE_MISMATCH, field="balance_transactions"), 300, None, -300),
        (facts(T.BALANCE_MISMATCH, field="closing", settlement_id=None), -40, None, 40),
        # Booked as paid out, never sent: the money is still settle's.
        (facts(T.MISSING_AT_RAIL, field="count"), None, 700, -700),
    ],
)
def test_a_write_off_takes_its_amount_and_direction_from_the_break(
    item: BreakFacts, difference: int | None, sent: int | None, loss: int
) -> None:
    assert write_off_loss(item, difference, sent) == loss


@pytest.mark.parametrize(
    ("item", "difference", "sent"),
    [
        (facts(field="amount"), None, None),
        (facts(field="amount"), 0, None),
        (facts(T.MISSING_AT_RAIL, field="count"), None, None),  # not paid: nothing left
        (facts(T.DESTINATION_MISMATCH, field="destination"), None, 700),
    ],
)
def test_a_break_without_an_amount_is_not_written_off(
    item: BreakFacts, difference: int | None, sent: int | None
) -> None:
    with pytest.raises(BreakWorkRefused) as refused:
        write_off_loss(item, difference, sent)
    assert refused.value.code == "no_amount"


def test_what_the_ledger_says_left_is_known_once_paid() -> None:
    assert ledger_sent(S.PAID, 700, 0) == 700
    assert ledger_sent(S.PARTLY_REVERSED, 700, 200) == 500
    assert ledger_sent(S.SUBMITTED, 700, 0) is None
    assert ledger_sent(S.REVERSED, 700, 700) is None


def test_a_write_off_books_between_funding_and_the_loss_account() -> None:
    assert write_off_postings(200, "EUR") == [
        Posting("platform:funding:EUR", -200, "EUR"),
        Posting("platform:write_offs:EUR", 200, "EUR"),
    ]
    assert write_off_postings(-700, "USD") == [
        Posting("platform:funding:USD", 700, "USD"),
        Posting("platform:write_offs:USD", -700, "USD"),
    ]


@pytest.mark.parametrize("account", list(PlatformAccount))
@pytest.mark.parametrize("direction", list(Direction))
def test_an_adjustment_balances_between_funding_and_the_chosen_account(
    account: PlatformAccount, direction: Direction
) -> None:
    postings = adjust_postings(account, direction, 120, "EUR")
    assert is_balanced(postings)
    signed = 120 if direction is Direction.DEBIT else -120
    assert {p.account_id: p.amount for p in postings} == {
        "platform:funding:EUR": -signed,
        f"platform:{account.value}:EUR": signed,
    }


def test_the_chart_names_the_platforms_accounts() -> None:
    assert [a.value for a in PlatformAccount] == ["rail_fees", "write_offs", "suspense"]


@pytest.mark.parametrize("amount", [0, -5, True, 1.5])
def test_an_adjustment_moves_a_positive_whole_amount(amount: object) -> None:
    with pytest.raises(ValueError):
        adjust_postings(PlatformAccount.SUSPENSE, Direction.DEBIT, amount, "EUR")


@pytest.mark.parametrize(("amount", "currency"), [(0, "EUR"), (5, "XXX"), (2**63, "EUR")])
def test_a_platform_entry_refuses_what_is_no_money(amount: int, currency: str) -> None:
    with pytest.raises(ValueError):
        platform_postings(PlatformAccount.WRITE_OFFS, amount, currency)


@pytest.mark.parametrize(
    ("status", "correction", "target"),
    [
        (S.PAID, Correction.REVERSED, S.REVERSED),
        (S.PARTLY_REVERSED, Correction.REVERSED, S.REVERSED),
        (S.SUBMITTED, Correction.FAILED, S.FAILED),
        (S.SUBMITTED, Correction.PAID, S.PAID),
        (S.ACCEPTED, Correction.PAID, S.PAID),
    ],
)
def test_a_correction_is_a_step_the_state_machine_allows(
    status: SettlementStatus, correction: Correction, target: SettlementStatus
) -> None:
    assert correction_target(status, correction) is target


@pytest.mark.parametrize(
    ("status", "correction", "code"),
    [
        (S.PAID, Correction.FAILED, "illegal_correction"),
        (S.PAID, Correction.PAID, "illegal_correction"),
        (S.REVERSED, Correction.REVERSED, "illegal_correction"),
        (S.FAILED, Correction.PAID, "illegal_correction"),
        (S.SUBMITTED, Correction.REVERSED, "illegal_correction"),
        (S.NEEDS_REVIEW, Correction.FAILED, "in_review"),
    ],
)
def test_a_correction_the_state_machine_refuses_is_refused(
    status: SettlementStatus, correction: Correction, code: str
) -> None:
    with pytest.raises(BreakWorkRefused) as refused:
        correction_target(status, correction)
    assert refused.value.code == code


def transfer(object_id: str = "tr_1", **changes: object) -> RailObject:
    obj = RailObject(object_id, PayoutMethod.TRANSFER, 700, 0, "EUR", "acct_1Q2w3E", None, 1, SID)
    return obj._replace(**changes)


def settled(
    status: SettlementStatus, instruction: InstructionStatus = IS.TRANSFERRED
) -> UnderReview:
    return UnderReview(SID, status, 700, "EUR", "acct_1Q2w3E", instruction)


def refused_code(work: Callable[..., object], *args: object) -> tuple[str, str | None]:
    with pytest.raises(Refused) as refused:
        work(*args)
    return refused.value.code, refused.value.field


def test_a_paid_settlement_is_reversed_only_when_its_money_is_not_out_at_the_rail() -> None:
    paid = settled(S.PAID)
    assert correct_verdict(paid, S.REVERSED, []) is None
    assert correct_verdict(paid, S.REVERSED, [transfer(amount_reversed=700)]) is None
    disagrees = ("rail_disagrees", None)
    assert refused_code(correct_verdict, paid, S.REVERSED, [transfer()]) == disagrees
    partly = [transfer(amount_reversed=100)]
    assert refused_code(correct_verdict, paid, S.REVERSED, partly) == disagrees


def test_failed_needs_nothing_out_and_no_attempt_in_flight() -> None:
    assert correct_verdict(settled(S.SUBMITTED), S.FAILED, []) is None
    flying = settled(S.DISPATCHING, IS.PROCESSING)
    assert refused_code(correct_verdict, flying, S.FAILED, [])[0] == "attempt_in_flight"
    assert refused_code(correct_verdict, settled(S.SUBMITTED), S.FAILED, [transfer()])[0] == (
        "rail_disagrees"
    )


def test_paid_adopts_the_one_object_the_rail_paid() -> None:
    assert correct_verdict(settled(S.SUBMITTED), S.PAID, [transfer()]) == "tr_1"
    wrong = [transfer(amount=699)]
    assert refused_code(correct_verdict, settled(S.SUBMITTED), S.PAID, wrong) == (
        "rail_disagrees",
        "amount",
    )


def test_a_match_needs_the_object_of_the_settlements_amount_and_currency() -> None:
    item = settled(S.SUBMITTED)
    assert match_verdict(item, None, "tr_1", [transfer()]).object_id == "tr_1"
    assert match_verdict(item, "tr_1", "tr_1", [transfer()]).object_id == "tr_1"
    assert refused_code(match_verdict, item, None, "tr_1", [transfer(amount=500)]) == (
        "rail_disagrees",
        "amount",
    )
    assert refused_code(match_verdict, item, None, "tr_1", [transfer(currency="USD")]) == (
        "rail_disagrees",
        "currency",
    )
    assert refused_code(match_verdict, item, None, "tr_1", [])[0] == "rail_disagrees"
    assert refused_code(match_verdict, item, "tr_9", "tr_1", [transfer()])[0] == ("reference_taken")


def test_only_a_resolved_break_reopens_and_only_with_a_reason() -> None:
    assert reopening(B.RESOLVED, "the fee came back") == (B.RESOLVED, B.OPEN, "the fee came back")
    for status in (B.OPEN, B.HEALED):
        with pytest.raises(IllegalBreakTransition):
            reopening(status, "why")
    with pytest.raises(ReasonRequired):
        reopening(B.RESOLVED, "  ")


@pytest.mark.parametrize(
    ("age", "bucket"),
    [
        (timedelta(0), AgingBucket.DAY),
        (timedelta(hours=23, minutes=59), AgingBucket.DAY),
        (timedelta(days=1), AgingBucket.WEEK),
        (timedelta(days=6, hours=23), AgingBucket.WEEK),
        (timedelta(days=7), AgingBucket.MONTH),
        (timedelta(days=30), AgingBucket.OLDER),
        (timedelta(days=400), AgingBucket.OLDER),
        (timedelta(minutes=-5), AgingBucket.DAY),  # a clock a little ahead
    ],
)
def test_a_break_ages_into_its_bucket_by_first_seen(age: timedelta, bucket: AgingBucket) -> None:
    assert aging_bucket(NOW - age, NOW) is bucket


@given(st.integers(min_value=-3600, max_value=400 * 86400))
def test_the_window_of_a_bucket_holds_exactly_its_breaks(seconds: int) -> None:
    first_seen = NOW - timedelta(seconds=seconds)
    for bucket in AgingBucket:
        after, at_or_before = first_seen_window(bucket, NOW)
        inside = (after is None or first_seen > after) and (
            at_or_before is None or first_seen <= at_or_before
        )
        assert inside == (aging_bucket(first_seen, NOW) is bucket)

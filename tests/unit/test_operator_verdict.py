"""An operator's resolution of a settlement under review is accepted only when the rail, as
looked up, agrees: paid needs exactly the one object asked for, failed and retry need none,
and nothing is decided while the dispatcher has an attempt in flight."""

from __future__ import annotations

import pytest

from services.domain.instruction import (
    RESOLVED,
    IllegalResolution,
    InstructionStatus,
    Resolution,
    resolved_status,
)
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RailObject
from services.domain.settlement import SettlementStatus
from services.operations.errors import Refused
from services.operations.verdict import UnderReview, decide

I, R, S = InstructionStatus, Resolution, SettlementStatus  # noqa: E741
SID = "0190f0a0-0000-7000-8000-000000000001"
ITEM = UnderReview(SID, S.NEEDS_REVIEW, 700, "EUR", "acct_1Q2w3E", I.NEEDS_REVIEW)


def transfer(object_id: str = "tr_1", **changes: object) -> RailObject:
    obj = RailObject(object_id, PayoutMethod.TRANSFER, 700, 0, "EUR", "acct_1Q2w3E", None, 1, SID)
    return obj._replace(**changes)


def refusal(item: UnderReview, resolution: Resolution, objects: list[RailObject]) -> Refused:
    with pytest.raises(Refused) as raised:
        decide(item, resolution, objects)
    assert raised.value.status == 409
    return raised.value


def test_paid_with_the_one_matching_transfer_adopts_it() -> None:
    decision = decide(ITEM, R.PAID, [transfer()])
    assert decision == (I.TRANSFERRED, S.PAID, "tr_1")


def test_failed_and_retry_with_nothing_at_the_rail_are_accepted() -> None:
    assert decide(ITEM, R.FAILED, []) == (I.FAILED, S.FAILED, None)
    # A retry leaves the settlement in review: the dispatcher's answer moves it on.
    assert decide(ITEM, R.RETRY, []) == (I.PENDING, None, None)


@pytest.mark.parametrize(
    ("objects", "field"),
    [
        ([], None),
        ([transfer("tr_1"), transfer("tr_2")], None),
        ([transfer(amount=699)], "amount"),
        ([transfer(currency="USD")], "currency"),
        ([transfer(destination="acct_other")], "destination"),
        ([transfer(amount_reversed=700)], "state"),
        ([transfer(amount_reversed=100)], "state"),
    ],
)
def test_paid_is_refused_unless_exactly_one_object_matches(
    objects: list[RailObject], field: str | None
) -> None:
    refused = refusal(ITEM, R.PAID, objects)
    assert refused.code == "rail_disagrees" and refused.field == field


def test_a_payout_still_in_flight_is_not_paid() -> None:
    payout = transfer("po_1", kind=PayoutMethod.PAYOUT, status="in_transit")
    assert refusal(ITEM, R.PAID, [payout]).field == "state"
    assert decide(ITEM, R.PAID, [payout._replace(status="paid")]).rail_reference == "po_1"


@pytest.mark.parametrize("resolution", [R.FAILED, R.RETRY])
def test_failed_and_retry_are_refused_when_the_rail_shows_an_object(
    resolution: Resolution,
) -> None:
    refused = refusal(ITEM, resolution, [transfer("tr_9")])
    assert refused.code == "rail_disagrees" and "tr_9" in refused.message


@pytest.mark.parametrize("resolution", list(R))
@pytest.mark.parametrize("in_flight", [I.PENDING, I.PROCESSING])
def test_nothing_is_decided_while_an_attempt_is_in_flight(
    resolution: Resolution, in_flight: InstructionStatus
) -> None:
    item = ITEM._replace(instruction=in_flight)
    assert refusal(item, resolution, []).code == "attempt_in_flight"


@pytest.mark.parametrize("status", [s for s in S if s is not S.NEEDS_REVIEW])
def test_only_a_settlement_under_review_is_resolved(status: SettlementStatus) -> None:
    assert refusal(ITEM._replace(status=status), R.FAILED, []).code == "not_in_review"


def test_the_instruction_table_lets_only_review_be_retried() -> None:
    assert resolved_status(I.TRANSFERRED, R.PAID) is I.TRANSFERRED
    for status in I:
        if (status, R.RETRY) not in RESOLVED:
            with pytest.raises(IllegalResolution):
                resolved_status(status, R.RETRY)
    assert [s for (s, r) in RESOLVED if r is R.RETRY] == [I.NEEDS_REVIEW]
    refused = refusal(ITEM._replace(instruction=I.TRANSFERRED), R.RETRY, [])
    assert refused.code == "instruction_status"

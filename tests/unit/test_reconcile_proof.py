"""What the rail proves about a drift, as the webhook it would have sent: the event for the
object's state, a body the inbox reads under the real webhook's change key, and which drifts
are healed at all."""

from __future__ import annotations

import json
from typing import Any

import pytest

from railsim.objects import Payout, Reversal, Transfer, event, json_bytes
from services.domain.breaks import BreakType
from services.domain.reconciliation import Break
from services.domain.settlement import SettlementStatus as S
from services.inbox.events import parse_event
from services.reconcile.proof import (
    EVENT_PREFIX,
    agrees,
    dated_by,
    healable,
    proven_event,
    synthetic_event,
)
from tests.unit.reconcile_cases import sid

SID = sid(7)


def sent(reversed_: int = 0) -> Transfer:
    transfer = Transfer(
        "tr_7",
        1_000,
        "eur",
        "acct_7",
        1_800_000_000,
        metadata={"settlement_id": SID, "tenant": "acme"},
    )
    if reversed_:
        transfer.reversals.append(Reversal("trr_7", reversed_, 1_800_000_100))
    return transfer


def payout(status: Any) -> dict[str, Any]:
    return Payout("po_7", 500, "usd", "ba_7", 1_800_000_000, status=status).to_wire()


@pytest.mark.parametrize(
    ("wire", "proven"),
    [
        (sent().to_wire(), "transfer.created"),
        (sent(1_000).to_wire(), "transfer.reversed"),
        (sent(400).to_wire(), "transfer.reversed"),
        (payout("paid"), "payout.paid"),
        (payout("failed"), "payout.failed"),
        (payout("canceled"), "payout.canceled"),
        (payout("pending"), None),
        (payout("in_transit"), None),
    ],
)
def test_each_state_of_an_object_proves_the_event_the_rail_sends_for_it(
    wire: dict[str, Any], proven: str | None
) -> None:
    assert proven_event(wire) == proven


@pytest.mark.parametrize("reversed_", [0, 400, 1_000])
def test_the_synthetic_event_is_read_by_the_inbox_under_the_real_webhooks_change_key(
    reversed_: int,
) -> None:
    wire = sent(reversed_).to_wire()
    kind = proven_event(wire)
    assert kind is not None
    body = synthetic_event(wire, kind, 1_800_000_200)
    ours, real = parse_event(body), parse_event(json_bytes(event(kind, wire, 1_800_000_100)))
    assert ours.event_id.startswith(EVENT_PREFIX) and not real.event_id.startswith(EVENT_PREFIX)
    assert (ours.event_type, ours.object_id, str(ours.settlement_id)) == (kind, "tr_7", SID)
    assert ours.change_key is not None and ours.change_key == real.change_key
    # The whole object goes in, as the rail sends it: amount reversed and metadata too.
    assert json.loads(body)["data"]["object"] == wire
    assert synthetic_event(wire, kind, 1) != synthetic_event(wire, kind, 1)  # a fresh id each


def drift(n: int) -> Break:
    return Break(
        BreakType.STATUS_DRIFT, sid(n), f"tr_{n}", "status", "submitted", "paid", None, "EUR"
    )


def test_only_a_drift_that_is_its_settlements_one_break_is_healed() -> None:
    priced = Break(BreakType.AMOUNT_MISMATCH, sid(2), "tr_2", "amount", 1_000, 900, -100, "EUR")
    twice = Break(BreakType.DUPLICATE_AT_RAIL, sid(3), "tr_3b", "count", 1, 2, None, "EUR")
    stray = Break(BreakType.UNKNOWN_AT_RAIL, None, "tr_9", "settlement_id", None, None, None, "EUR")
    found = [drift(1), drift(2), priced, drift(3), twice, stray, drift(4)]
    assert healable(found) == [drift(1), drift(4)]
    assert healable([priced, twice, stray]) == []
    assert healable([drift(5)._replace(rail_object_id=None)]) == []


def test_a_healed_status_must_agree_with_what_the_rail_shows() -> None:
    assert agrees(S.PAID, sent().to_wire())
    assert agrees(S.REVERSED, sent(1_000).to_wire())
    assert not agrees(S.PAID, sent(1_000).to_wire())
    assert not agrees(S.SUBMITTED, sent().to_wire())
    assert agrees(S.FAILED, payout("failed")) and not agrees(S.PAID, payout("failed"))


def test_a_change_is_dated_by_the_balance_transaction_that_moved_its_money() -> None:
    made = Transfer("tr_8", 1_000, "eur", "acct_8", 1_800_000_000, balance_transaction="txn_t")
    assert dated_by(made.to_wire()) == "txn_t"
    made.reversals += [
        Reversal("trr_2", 200, 1_800_000_900, "txn_r2"),
        Reversal("trr_1", 100, 1_800_000_500, "txn_r1"),
    ]
    assert dated_by(made.to_wire()) == "txn_r2"  # the latest reversal, in any order
    failed = {"object": "payout", "status": "failed", "failure_balance_transaction": "txn_f"}
    assert dated_by(failed) == "txn_f"
    assert dated_by(failed | {"status": "paid"}) is None

"""The faults only a reconciliation catches: a change whose webhooks never leave the rail, a
transfer reversed in part, a paid payout that comes back. Each shows in the objects the API
returns and in the balance transactions. Drops are on at a small rate in demo and chaos;
partial reversals and returns only in chaos."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.errors import FaultsError
from railsim.faults import PROFILES, Faults, updated
from railsim.params import Kind
from railsim.replies import Delivery, Reply

HIDDEN = ("webhook_drop", "partial_reversal", "payout_return")


def form(settlement: str, destination: str = "acct_ok", amount: int = 701) -> list[tuple[str, str]]:
    return [
        ("amount", str(amount)),
        ("currency", "eur"),
        ("destination", destination),
        ("metadata[settlement_id]", settlement),
    ]


def body(reply: Reply) -> Any:
    return json.loads(reply.body)


def events(deliveries: list[Delivery]) -> list[Any]:
    return [json.loads(d.payload) for d in deliveries]


def movements(sim: RailSim) -> list[tuple[str, int, str]]:
    """(type, amount, source) of every balance transaction, oldest first."""
    listed = body(sim.list_balance_transactions([("limit", "100")]))["data"]
    return [(t["type"], t["amount"], t["source"]) for t in reversed(listed)]


def test_demo_and_chaos_drop_a_few_webhooks_only_chaos_reverses_in_part_or_returns() -> None:
    for name, faults in PROFILES.items():
        on = (faults.partial_reversal > 0, faults.payout_return > 0)
        assert on == ((True, True) if name == "chaos" else (False, False)), name
    assert 0 < PROFILES["chaos"].partial_reversal <= 0.05
    assert 0 < PROFILES["chaos"].payout_return <= 0.05
    assert PROFILES["none"].webhook_drop == 0
    assert 0 < PROFILES["demo"].webhook_drop <= PROFILES["chaos"].webhook_drop <= 0.05
    assert updated(Faults(), {"webhook_drop": 0.3}).webhook_drop == 0.3
    for fault in HIDDEN:
        with pytest.raises(FaultsError):
            updated(Faults(), {fault: 1.5})


def test_a_dropped_change_exists_at_the_rail_but_no_event_is_ever_sent() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(webhook_drop=1, payout_delay_ms=100))
    transfer = sim.create(Kind.TRANSFER, form("s-1"), "k1")
    payout = sim.create(Kind.PAYOUT, form("s-2"), "k2")
    clock.advance(1)

    assert transfer.webhooks == () and payout.webhooks == ()
    assert sim.take_webhooks() == []
    assert body(sim.retrieve(Kind.TRANSFER, body(transfer)["id"]))["amount"] == 701
    assert body(sim.retrieve(Kind.PAYOUT, body(payout)["id"]))["status"] == "paid"
    withheld = sim.withheld_webhooks()
    assert withheld["count"] == 3
    assert [(w["type"], w["object_id"], w["settlement_id"]) for w in withheld["recent"]] == [
        ("transfer.created", body(transfer)["id"], "s-1"),
        ("payout.created", body(payout)["id"], "s-2"),
        ("payout.paid", body(payout)["id"], "s-2"),
    ]


def deliveries_per_change(drop: float) -> Counter[tuple[str, str]]:
    """How many deliveries each (settlement, event type) got from 60 payouts under chaos."""
    clock = ManualClock()
    faults = updated(PROFILES["chaos"], {"webhook_drop": drop, "fail_before": 0, "seed": 5})
    sim = RailSim(clock=clock, faults=faults)
    announced: list[Delivery] = []
    for n in range(60):
        announced += sim.create(Kind.PAYOUT, form(f"s-{n}"), f"k-{n}").webhooks
    clock.advance(60)
    announced += sim.take_webhooks()
    return Counter(
        (event["data"]["object"]["metadata"]["settlement_id"], event["type"])
        for event in events(announced)
    )


def test_drops_leave_every_other_faults_decision_as_it_was() -> None:
    without, with_drops = deliveries_per_change(0), deliveries_per_change(0.5)
    dropped = [change for change in without if change not in with_drops]
    assert 20 < len(dropped) < 100
    # a change either loses all of its events or keeps exactly the twins and duplicates it had
    assert all(with_drops[change] in (0, without[change]) for change in without)
    assert set(with_drops) <= set(without) and max(without.values()) > 1


def test_a_partial_reversal_takes_back_half_and_leaves_the_transfer_not_reversed() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(partial_reversal=1, reversal_delay_ms=1000))
    created = body(sim.create(Kind.TRANSFER, form("s-1", amount=701), "k1"))
    clock.advance(1)

    (announced,) = events(sim.take_webhooks())
    assert announced["type"] == "transfer.reversed"
    for transfer in (announced["data"]["object"], body(sim.retrieve(Kind.TRANSFER, created["id"]))):
        assert (transfer["amount"], transfer["amount_reversed"]) == (701, 350)
        assert transfer["reversed"] is False
        (reversal,) = transfer["reversals"]["data"]
        assert (reversal["amount"], reversal["transfer"]) == (350, created["id"])
    assert movements(sim) == [
        ("transfer", -701, created["id"]),
        ("transfer_refund", 350, reversal["id"]),
    ]
    assert body(sim.balance())["available"] == [{"amount": -351, "currency": "eur"}]


def test_an_acct_partial_destination_is_always_reversed_in_part_and_one_unit_never() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock)
    halved = body(sim.create(Kind.TRANSFER, form("s-1", "acct_partial_1", amount=1000)))
    single = body(sim.create(Kind.TRANSFER, form("s-2", "acct_partial_2", amount=1)))
    clock.advance(5)

    assert [e["data"]["object"]["amount_reversed"] for e in events(sim.take_webhooks())] == [500]
    assert body(sim.retrieve(Kind.TRANSFER, halved["id"]))["amount_reversed"] == 500
    assert body(sim.retrieve(Kind.TRANSFER, single["id"]))["amount_reversed"] == 0


def test_a_full_reversal_takes_back_everything_and_links_its_balance_transaction() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(reversal=1, reversal_delay_ms=1000))
    created = body(sim.create(Kind.TRANSFER, form("s-1", amount=900)))
    clock.advance(1)

    transfer = body(sim.retrieve(Kind.TRANSFER, created["id"]))
    assert (transfer["amount_reversed"], transfer["reversed"]) == (900, True)
    (reversal,) = transfer["reversals"]["data"]
    refund = body(sim.retrieve_balance_transaction(reversal["balance_transaction"]))
    assert (refund["type"], refund["amount"], refund["source"]) == (
        "transfer_refund",
        900,
        reversal["id"],
    )
    assert body(sim.balance())["available"] == [{"amount": 0, "currency": "eur"}]


def test_a_returned_payout_is_paid_then_failed_and_its_money_comes_back() -> None:
    clock = ManualClock()
    faults = Faults(payout_return=1, payout_delay_ms=100, reversal_delay_ms=1000)
    sim = RailSim(clock=clock, faults=faults)
    created = body(sim.create(Kind.PAYOUT, form("s-1", amount=400)))
    clock.advance(0.1)
    clock.advance(1.1)
    # Paid by its arrival date; a return is only ever after it, however short the delay.
    assert [e["type"] for e in events(sim.take_webhooks())] == ["payout.paid"]
    clock.advance(1)

    announced = events(sim.take_webhooks())
    assert [e["type"] for e in announced] == ["payout.failed"]
    arrival = announced[0]["data"]["object"]["arrival_date"]
    assert created["arrival_date"] == arrival and announced[0]["created"] > arrival
    payout = body(sim.retrieve(Kind.PAYOUT, created["id"]))
    assert (payout["status"], payout["failure_code"]) == ("failed", "account_closed")
    assert movements(sim) == [
        ("payout", -400, created["id"]),
        ("payout_failure", 400, created["id"]),
    ]
    assert payout["balance_transaction"] != payout["failure_balance_transaction"]
    returned = body(sim.retrieve_balance_transaction(payout["failure_balance_transaction"]))
    assert returned["reporting_category"] == "payout_reversal"
    assert body(sim.balance())["available"] == [{"amount": 0, "currency": "eur"}]


def test_a_paid_payout_without_the_fault_stays_paid() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(payout_delay_ms=100, reversal_delay_ms=1000))
    created = body(sim.create(Kind.PAYOUT, form("s-1", amount=400)))
    clock.advance(5)
    assert [e["type"] for e in events(sim.take_webhooks())] == ["payout.paid"]
    assert body(sim.retrieve(Kind.PAYOUT, created["id"]))["failure_balance_transaction"] is None
    assert movements(sim) == [("payout", -400, created["id"])]


def test_a_payout_that_never_paid_fails_by_its_arrival_date() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(payout_fail=1, payout_delay_ms=100))
    created = body(sim.create(Kind.PAYOUT, form("s-1", amount=400)))
    clock.advance(5)
    (failed,) = events(sim.take_webhooks())
    assert failed["type"] == "payout.failed"
    assert failed["created"] <= failed["data"]["object"]["arrival_date"] == created["arrival_date"]

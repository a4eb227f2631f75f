"""The simulator's balance and balance transactions: one Stripe-shaped movement per change of
money, listed newest first with Stripe's created filters and cursors, adding up to the balance."""

from __future__ import annotations

import json
from typing import Any

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.listing import Ordered, page
from railsim.objects import Wire
from railsim.params import Form, Kind
from railsim.replies import Reply


def body(reply: Reply) -> Any:
    return json.loads(reply.body)


def transfer(sim: RailSim, amount: int, currency: str = "eur") -> str:
    pairs = [("amount", str(amount)), ("currency", currency), ("destination", "acct_ok")]
    return str(body(sim.create(Kind.TRANSFER, pairs))["id"])


def listed(sim: RailSim, *pairs: tuple[str, str]) -> Any:
    return body(sim.list_balance_transactions(pairs))


def test_an_account_that_never_moved_money_shows_a_zero_balance() -> None:
    assert body(RailSim().balance()) == {
        "object": "balance",
        "available": [{"amount": 0, "currency": "usd"}],
        "livemode": False,
        "pending": [{"amount": 0, "currency": "usd"}],
    }


def test_each_transfer_is_one_balance_transaction_in_stripes_shape() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock)
    transfer_id = transfer(sim, 1050)
    (movement,) = listed(sim)["data"]

    assert movement["id"].startswith("txn_") and movement["object"] == "balance_transaction"
    assert (movement["amount"], movement["net"], movement["fee"]) == (-1050, -1050, 0)
    assert (movement["currency"], movement["source"]) == ("eur", transfer_id)
    assert (movement["type"], movement["reporting_category"]) == ("transfer", "transfer")
    assert movement["created"] == int(clock.now()) and movement["status"] == "available"
    assert body(sim.retrieve(Kind.TRANSFER, transfer_id))["balance_transaction"] == movement["id"]
    assert body(sim.retrieve_balance_transaction(movement["id"])) == movement


def test_the_balance_is_the_sum_of_the_movements_per_currency() -> None:
    sim = RailSim()
    transfer(sim, 1050)
    transfer(sim, 50)
    transfer(sim, 7, "usd")
    sim.create(Kind.PAYOUT, [("amount", "300"), ("currency", "eur")])

    balance = body(sim.balance())
    assert balance["available"] == [
        {"amount": -1400, "currency": "eur"},
        {"amount": -7, "currency": "usd"},
    ]
    assert balance["pending"] == [
        {"amount": 0, "currency": "eur"},
        {"amount": 0, "currency": "usd"},
    ]
    total = sum(t["amount"] for t in listed(sim, ("limit", "100"))["data"])
    assert total == -1407


def test_movements_page_newest_first_within_a_created_window() -> None:
    clock = ManualClock(start=1_700_000_000)
    sim = RailSim(clock=clock)
    ids = []
    for amount in range(1, 8):
        transfer(sim, amount)
        ids.append(listed(sim, ("limit", "1"))["data"][0]["id"])
        clock.advance(10)
    window = [("created[gte]", "1700000010"), ("created[lt]", "1700000060")]

    first = listed(sim, *window, ("limit", "2"))
    assert [t["id"] for t in first["data"]] == [ids[5], ids[4]] and first["has_more"]
    assert first["url"] == "/v1/balance_transactions" and first["object"] == "list"
    rest = listed(sim, *window, ("limit", "2"), ("starting_after", ids[4]))
    assert [t["id"] for t in rest["data"]] == [ids[3], ids[2]] and rest["has_more"]
    last = listed(sim, *window, ("limit", "2"), ("starting_after", ids[2]))
    assert [t["id"] for t in last["data"]] == [ids[1]] and not last["has_more"]


def test_movements_filter_by_type_source_and_currency() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(payout_delay_ms=10))
    transfer_id = transfer(sim, 5)
    payout = body(sim.create(Kind.PAYOUT, [("amount", "9"), ("currency", "usd")]))
    clock.advance(1)

    assert [t["source"] for t in listed(sim, ("type", "payout"))["data"]] == [payout["id"]]
    assert [t["type"] for t in listed(sim, ("source", transfer_id))["data"]] == ["transfer"]
    assert [t["amount"] for t in listed(sim, ("currency", "usd"))["data"]] == [-9]
    # the simulator makes no automatic payouts, so nothing was paid out in one
    assert listed(sim, ("payout", payout["id"]))["data"] == []


def test_unknown_parameters_cursors_and_ids_are_stripe_errors() -> None:
    sim = RailSim()
    transfer(sim, 5)
    unknown = sim.list_balance_transactions([("destination", "acct_ok")])
    assert unknown.status == 400 and body(unknown)["error"]["code"] == "parameter_unknown"
    cursor = sim.list_balance_transactions([("starting_after", "txn_nope")])
    assert cursor.status == 400 and body(cursor)["error"]["code"] == "resource_missing"
    missing = sim.retrieve_balance_transaction("txn_nope")
    assert missing.status == 404 and body(missing)["error"]["code"] == "resource_missing"


def test_reset_forgets_the_movements_and_the_withheld_events() -> None:
    sim = RailSim(faults=Faults(webhook_drop=1))
    transfer(sim, 5)
    assert sim.withheld_webhooks()["count"] == 1
    sim.reset()
    assert listed(sim)["data"] == []
    assert body(sim.balance())["available"] == [{"amount": 0, "currency": "usd"}]
    assert sim.withheld_webhooks() == {"count": 0, "recent": []}


def test_ending_before_pages_towards_the_newest_and_says_whether_more_are_newer() -> None:
    sim = RailSim()
    for amount in range(1, 6):
        transfer(sim, amount)
    ids = [t["id"] for t in listed(sim, ("limit", "5"))["data"]]  # newest first: 5, 4, ... 1

    newer = listed(sim, ("ending_before", ids[4]), ("limit", "2"))
    assert [t["id"] for t in newer["data"]] == [ids[2], ids[3]] and newer["has_more"]
    newest = listed(sim, ("ending_before", ids[2]), ("limit", "2"))
    assert [t["id"] for t in newest["data"]] == [ids[0], ids[1]] and not newest["has_more"]


def test_walking_a_long_history_reads_each_record_about_once() -> None:
    history: Ordered[Wire] = Ordered()
    for n in range(10_000):
        history.add(f"txn_{n}", {"id": f"txn_{n}", "created": n})
    reads = 0

    def read(record: Wire, key: str) -> object:
        nonlocal reads
        reads += 1
        return record.get(key)

    seen: list[str] = []
    form: Form = {"limit": "100", "created": {"gte": "0"}}
    while True:
        answer = page("/v1/balance_transactions", frozenset(), history, form, read=read, wire=dict)
        seen += [t["id"] for t in answer["data"]]
        if not answer["has_more"]:
            break
        form = {**form, "starting_after": seen[-1]}

    assert seen == [f"txn_{n}" for n in range(9_999, -1, -1)]
    assert reads <= 10_000 + 100  # one look per record, plus one look-ahead per page

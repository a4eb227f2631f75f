"""What happens at the simulated rail after it answers: payouts settle or fail, money returns,
each change announced by Stripe-shaped events; lists page newest first."""

from __future__ import annotations

import json
from typing import Any

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.params import Kind
from railsim.replies import Delivery, Reply


def form(settlement: str, destination: str = "acct_ok", **extra: str) -> list[tuple[str, str]]:
    return [
        ("amount", "700"),
        ("currency", "gbp"),
        ("destination", destination),
        ("metadata[settlement_id]", settlement),
        *extra.items(),
    ]


def body(reply: Reply) -> Any:
    return json.loads(reply.body)


def events(deliveries: list[Delivery]) -> list[Any]:
    return [json.loads(d.payload) for d in deliveries]


def test_a_payout_is_pending_then_paid_and_each_step_is_announced() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(payout_delay_ms=200))
    created = sim.create(Kind.PAYOUT, form("s-1"), "k1")
    payout_id = body(created)["id"]
    assert body(created)["status"] == "pending"
    (announced,) = events(list(created.webhooks))
    assert announced["type"] == "payout.created"
    assert announced["request"] == {"id": created.request_id, "idempotency_key": "k1"}
    assert announced["data"]["object"]["id"] == payout_id
    assert announced["api_version"] == "2024-06-20" and announced["object"] == "event"

    assert sim.take_webhooks() == []
    clock.advance(0.2)
    (paid,) = events(sim.take_webhooks())
    assert paid["type"] == "payout.paid"
    assert paid["data"]["object"]["status"] == "paid"
    assert body(sim.retrieve(Kind.PAYOUT, payout_id))["status"] == "paid"


def test_a_payout_to_a_failing_account_fails_after_acceptance() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock)
    created = sim.create(Kind.PAYOUT, form("s-1", "acct_fail_1"), "k1")
    assert created.status == 200
    clock.advance(1)
    (failed,) = events(sim.take_webhooks())
    assert failed["type"] == "payout.failed"
    assert failed["data"]["object"]["failure_code"] == "account_closed"


def test_a_transfer_is_reversed_later_in_full() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(reversal_delay_ms=5000))
    created = sim.create(Kind.TRANSFER, form("s-1", "acct_reverse_1"), "k1")
    clock.advance(4.9)
    assert sim.take_webhooks() == []
    clock.advance(0.1)
    (reversed_,) = events(sim.take_webhooks())
    transfer = reversed_["data"]["object"]
    assert reversed_["type"] == "transfer.reversed"
    assert transfer["id"] == body(created)["id"]
    assert transfer["reversed"] is True and transfer["amount_reversed"] == 700
    assert reversed_["request"] == {"id": None, "idempotency_key": None}


def test_a_paid_payout_that_comes_back_is_reported_as_failed_after_paid() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(payout_delay_ms=100, reversal_delay_ms=1000))
    sim.create(Kind.PAYOUT, form("s-1", "acct_reverse_1"), "k1")
    clock.advance(0.1)
    clock.advance(2)  # a return comes after the arrival date (a whole second after creation)
    assert [e["type"] for e in events(sim.take_webhooks())] == ["payout.paid", "payout.failed"]


def test_webhook_faults_duplicate_twin_reorder_and_early() -> None:
    everything = Faults(
        webhook_duplicate=1,
        webhook_twin=1,
        webhook_reorder=1,
        webhook_early=1,
        reorder_delay_ms=800,
    )
    clock = ManualClock()
    reply = RailSim(clock=clock, faults=everything).create(Kind.TRANSFER, form("s-1"), "k1")

    ids = [d.event_id for d in reply.webhooks]
    assert len(ids) == 3 and len(set(ids)) == 2  # a same-id duplicate and a new-id twin
    assert {d.event_type for d in reply.webhooks} == {"transfer.created"}
    assert all(d.not_before == clock.now() + 0.8 for d in reply.webhooks)
    assert reply.webhooks_first


def test_lists_are_newest_first_filtered_and_paged() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock)
    ids = []
    for n in range(5):
        clock.advance(10)
        reply = sim.create(Kind.TRANSFER, form(f"s-{n}", transfer_group="g" if n % 2 else "h"))
        ids.append(body(reply)["id"])
    sim.create(Kind.PAYOUT, form("s-p"))

    page = body(sim.list_objects(Kind.TRANSFER, [("limit", "2")]))
    assert page["object"] == "list" and page["url"] == "/v1/transfers"
    assert [o["id"] for o in page["data"]] == [ids[4], ids[3]] and page["has_more"]
    after = body(sim.list_objects(Kind.TRANSFER, [("limit", "2"), ("starting_after", ids[3])]))
    assert [o["id"] for o in after["data"]] == [ids[2], ids[1]]
    grouped = body(sim.list_objects(Kind.TRANSFER, [("transfer_group", "g")]))
    assert [o["id"] for o in grouped["data"]] == [ids[3], ids[1]] and not grouped["has_more"]
    since = int(clock.now()) - 10
    recent = body(sim.list_objects(Kind.TRANSFER, [("created[gte]", str(since))]))
    assert [o["id"] for o in recent["data"]] == [ids[4], ids[3]]
    assert len(body(sim.list_objects(Kind.PAYOUT, []))["data"]) == 1


def test_unknown_objects_and_list_parameters_are_stripe_errors() -> None:
    sim = RailSim()
    missing = sim.retrieve(Kind.TRANSFER, "tr_nope")
    assert missing.status == 404 and body(missing)["error"]["code"] == "resource_missing"
    payout = body(sim.create(Kind.PAYOUT, form("s-1")))
    assert sim.retrieve(Kind.TRANSFER, payout["id"]).status == 404
    bad = sim.list_objects(Kind.TRANSFER, [("metadata[settlement_id]", "s-1")])
    assert bad.status == 400 and body(bad)["error"]["code"] == "parameter_unknown"

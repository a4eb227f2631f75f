"""The simulator core: Stripe's idempotency rules, refusals, effects counted at the rail."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.params import Kind
from railsim.replies import Reply


def transfer(settlement: str = "s-1", **changes: str) -> list[tuple[str, str]]:
    """The form the Stripe adapter posts for one settlement."""
    fields = {
        "amount": "1050",
        "currency": "eur",
        "destination": "acct_1Nv0FGQ9RKHgCVdK",
        "transfer_group": settlement,
        "metadata[settlement_id]": settlement,
        "metadata[tenant]": "acme",
        **changes,
    }
    return list(fields.items())


def body(reply: Reply) -> Any:
    return json.loads(reply.body)


def test_a_replay_under_the_same_key_returns_the_same_bytes_and_moves_no_money() -> None:
    sim = RailSim()
    first = sim.create(Kind.TRANSFER, transfer(), "key-1")
    again = sim.create(Kind.TRANSFER, reversed(transfer()), "key-1")

    assert first.status == again.status == 200
    assert again.body == first.body
    assert again.replayed and not first.replayed
    assert body(first)["object"] == "transfer"
    assert body(first)["id"].startswith("tr_")
    assert sim.effects_for("s-1") == {"transfers": 1, "payouts": 0}


def test_the_same_key_with_other_parameters_is_an_idempotency_error() -> None:
    sim = RailSim()
    sim.create(Kind.TRANSFER, transfer(), "key-1")
    reply = sim.create(Kind.TRANSFER, transfer(amount="2000"), "key-1")

    assert reply.status == 400
    assert body(reply)["error"]["type"] == "idempotency_error"
    assert sim.effects()["total"] == 1


def test_a_rail_that_ignores_keys_creates_again_and_counts_both_effects() -> None:
    sim = RailSim(idempotency_window=0)
    first = sim.create(Kind.TRANSFER, transfer(), "key-1")
    again = sim.create(Kind.TRANSFER, transfer(), "key-1")

    assert body(first)["id"] != body(again)["id"]
    assert not again.replayed
    assert sim.effects_for("s-1")["transfers"] == 2


def test_without_a_key_every_request_creates() -> None:
    sim = RailSim()
    sim.create(Kind.TRANSFER, transfer())
    sim.create(Kind.TRANSFER, transfer())
    assert sim.effects_for("s-1")["transfers"] == 2


def test_a_key_older_than_the_window_is_forgotten() -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, idempotency_window=60)
    first = sim.create(Kind.TRANSFER, transfer(), "key-1")
    clock.advance(59)
    assert sim.create(Kind.TRANSFER, transfer(), "key-1").body == first.body
    clock.advance(1)
    assert body(sim.create(Kind.TRANSFER, transfer(), "key-1"))["id"] != body(first)["id"]
    assert sim.effects_for("s-1")["transfers"] == 2


def test_effects_are_counted_per_settlement_across_transfers_and_payouts() -> None:
    sim = RailSim()
    sim.create(Kind.TRANSFER, transfer("s-1"), "k1")
    sim.create(Kind.TRANSFER, transfer("s-2"), "k2")
    payout = [(k, v) for k, v in transfer("s-2") if k != "transfer_group"]
    sim.create(Kind.PAYOUT, payout, "k3")
    sim.create(Kind.PAYOUT, [("amount", "5"), ("currency", "usd")], "k4")

    assert sim.effects() == {
        "by_settlement": {
            "s-1": {"transfers": 1, "payouts": 0},
            "s-2": {"transfers": 1, "payouts": 1},
        },
        "total": 4,
        "unattributed": 1,
    }
    assert sim.effects_for("never-seen") == {"transfers": 0, "payouts": 0}


@pytest.mark.parametrize(
    "destination, code",
    [
        ("acct_closed_1", "account_closed"),
        ("acct_refuse_1", "transfers_not_allowed"),
        ("acct_nofunds_1", "balance_insufficient"),
    ],
)
def test_marked_destinations_are_refused_every_time_without_an_effect(
    destination: str, code: str
) -> None:
    sim = RailSim()
    first = sim.create(Kind.TRANSFER, transfer(destination=destination), "key-1")
    again = sim.create(Kind.TRANSFER, transfer(destination=destination), "key-1")

    assert first.status == 400
    assert body(first)["error"] == {
        **body(first)["error"],
        "type": "invalid_request_error",
        "code": code,
        "param": "destination",
    }
    assert again.replayed and again.body == first.body
    assert sim.effects()["total"] == 0


@pytest.mark.parametrize(
    "field, value, code",
    [
        ("amount", "10.50", "parameter_invalid_integer"),
        ("amount", "0", "parameter_invalid_integer"),
        ("amount", "-5", "parameter_invalid_integer"),
        ("amount", "999999999999", "amount_too_large"),
        ("currency", "xyz", "parameter_invalid_string"),
        ("colour", "blue", "parameter_unknown"),
    ],
)
def test_invalid_requests_are_refused_and_not_remembered_under_the_key(
    field: str, value: str, code: str
) -> None:
    sim = RailSim()
    bad = sim.create(Kind.TRANSFER, transfer(**{field: value}), "key-1")

    assert bad.status == 400
    assert body(bad)["error"]["code"] == code
    assert body(bad)["error"]["param"] == field
    # Stripe saves no result for a request that failed validation: the key is still free
    assert sim.create(Kind.TRANSFER, transfer(), "key-1").status == 200


def test_currency_is_answered_in_lower_case() -> None:
    reply = RailSim().create(Kind.TRANSFER, transfer(currency="EUR"))
    assert body(reply)["currency"] == "eur"


def test_concurrent_requests_under_one_key_create_once() -> None:
    sim = RailSim()
    start = threading.Barrier(8)

    def send(_: int) -> bytes:
        start.wait()
        return sim.create(Kind.TRANSFER, transfer(), "key-1").body

    with ThreadPoolExecutor(8) as pool:
        bodies = set(pool.map(send, range(8)))

    assert len(bodies) == 1
    assert sim.effects_for("s-1")["transfers"] == 1


def test_a_500_after_acceptance_leaves_the_effect_and_a_retry_gets_the_object() -> None:
    sim = RailSim(faults=Faults(fail_after=1))
    failed = sim.create(Kind.TRANSFER, transfer(), "key-1")
    retried = sim.create(Kind.TRANSFER, transfer(), "key-1")

    assert failed.status == 500
    assert body(failed)["error"]["type"] == "api_error"
    assert retried.status == 200 and retried.replayed
    assert body(retried)["id"] == failed.created_id
    assert sim.effects_for("s-1")["transfers"] == 1


def test_a_500_before_anything_leaves_no_effect() -> None:
    sim = RailSim(faults=Faults(fail_before=1))
    assert sim.create(Kind.TRANSFER, transfer(), "key-1").status == 500
    assert sim.effects()["total"] == 0
    sim.set_faults(Faults())
    assert not sim.create(Kind.TRANSFER, transfer(), "key-1").replayed


def test_the_timeout_fault_creates_and_then_holds_the_answer() -> None:
    sim = RailSim(faults=Faults(timeout_after=1, timeout_seconds=7))
    reply = sim.create(Kind.TRANSFER, transfer(), "key-1")
    assert reply.status == 200 and reply.hold_seconds == 7
    assert sim.effects_for("s-1")["transfers"] == 1
    assert sim.create(Kind.TRANSFER, transfer(), "key-1").hold_seconds == 0


def test_reset_forgets_objects_keys_and_effects() -> None:
    sim = RailSim()
    sim.create(Kind.TRANSFER, transfer(), "key-1")
    sim.reset()
    assert sim.effects()["total"] == 0
    assert not sim.create(Kind.TRANSFER, transfer(), "key-1").replayed

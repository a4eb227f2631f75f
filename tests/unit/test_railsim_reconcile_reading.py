"""What the simulator answers reads cleanly into reconciliation's values, and its balance moves
by exactly its balance transactions, through every fault that only a reconciliation catches."""

from __future__ import annotations

import json
from typing import Any

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.params import Kind
from railsim.replies import Reply
from services.adapters.stripe.wire import balance_move_of, rail_object_of
from services.reconcile.nostro import rail_outflow, statement_breaks


def body(reply: Reply) -> Any:
    return json.loads(reply.body)


def available(sim: RailSim) -> dict[str, int]:
    return {b["currency"].upper(): b["amount"] for b in body(sim.balance())["available"]}


def test_a_history_of_every_hidden_fault_reads_and_balances() -> None:
    clock = ManualClock()
    faults = Faults(partial_reversal=1, payout_return=1, webhook_drop=1, payout_delay_ms=100)
    sim = RailSim(clock=clock, faults=faults)
    opening = available(sim)
    transfer = body(sim.create(Kind.TRANSFER, [*_pay(1001, "eur"), ("destination", "acct_a")]))
    payout = body(sim.create(Kind.PAYOUT, _pay(400, "usd")))
    clock.advance(10)

    read = rail_object_of(body(sim.retrieve(Kind.TRANSFER, transfer["id"])))
    assert (read.amount, read.amount_reversed, read.currency) == (1001, 500, "EUR")
    assert rail_object_of(body(sim.retrieve(Kind.PAYOUT, payout["id"]))).status == "failed"
    listed = body(sim.list_balance_transactions([("limit", "100")]))["data"]
    moves = [balance_move_of(t) for t in listed]
    assert statement_breaks(opening, available(sim), moves) == []
    # the payee outflow nets the reversal and the returned payout
    assert rail_outflow(moves) == {"EUR": 501, "USD": 0}


def _pay(amount: int, currency: str) -> list[tuple[str, str]]:
    return [("amount", str(amount)), ("currency", currency), ("metadata[settlement_id]", "s-1")]

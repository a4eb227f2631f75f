"""The simulator's balance, balance transactions and hidden faults read over HTTP by Stripe's own
Python library, as a reconciliation reads the rail: auto-paginated lists in a created window,
partial reversals and returned payouts in the objects, and dropped webhooks. No PostgreSQL or
Kafka."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import stripe

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.http import create_app
from tests.integration.railsim_support import (
    Sim,
    running_sim,
    serving,
    stripe_client,
    transfer_params,
)
from tests.waiting import eventually

START = 1_700_000_000


@pytest.fixture(scope="module")
async def sim() -> AsyncIterator[Sim]:
    async with running_sim() as running:
        yield running


@pytest.fixture(autouse=True)
async def no_faults(sim: Sim) -> AsyncIterator[None]:
    yield
    await sim.faults(profile="none")


@pytest.fixture
async def client(sim: Sim) -> AsyncIterator[stripe.StripeClient]:
    async with stripe_client(sim.url) as client:
        yield client


async def test_balance_transactions_auto_paginate_within_a_created_window() -> None:
    clock = ManualClock(start=START)
    async with serving(create_app(RailSim(clock=clock))) as url:
        async with stripe_client(url) as client:
            for amount in range(1, 31):
                await client.v1.transfers.create_async(transfer_params("s", amount=amount))
                clock.advance(1)
            window: stripe.params.BalanceTransactionListParams = {
                "created": {"gte": START + 5, "lt": START + 28},
                "limit": 4,
            }
            first = await client.v1.balance_transactions.list_async(window)
            read = [t async for t in first.auto_paging_iter()]
            balance = await client.v1.balance.retrieve_async()

        # the sync client and the resource class walk the same pages
        sync = stripe.StripeClient("sk_test_x", base_addresses={"api": url}, max_network_retries=0)
        walked = await asyncio.to_thread(
            lambda: [t.id for t in sync.v1.balance_transactions.list(window).auto_paging_iter()]
        )

    assert first.has_more and len(first.data) == 4
    assert [t.amount for t in read] == [-a for a in range(28, 5, -1)]  # newest first, no gaps
    assert all(t.type == "transfer" and t.net == t.amount and t.fee == 0 for t in read)
    assert all(t.source.startswith("tr_") and t.currency == "eur" for t in read)
    assert walked == [t.id for t in read]
    (available,) = balance.available
    assert (available.amount, available.currency) == (-sum(range(1, 31)), "eur")
    assert balance.pending[0].amount == 0


async def test_a_partial_reversal_is_in_the_transfer_its_event_and_the_movements(
    sim: Sim, client: stripe.StripeClient
) -> None:
    sid = str(uuid.uuid4())
    await sim.faults(partial_reversal=1, reversal_delay_ms=100)
    created = await client.v1.transfers.create_async(transfer_params(sid, amount=1051))

    await eventually(lambda: len(sim.receiver.events(sid)) == 2)
    announced = sim.receiver.events(sid)[1]
    transfer = await client.v1.transfers.retrieve_async(created.id)
    assert announced.type == "transfer.reversed"
    for seen in (announced.data.object, transfer):
        assert (seen.amount, seen.amount_reversed, seen.reversed) == (1051, 525, False)
    (reversal,) = transfer.reversals.data
    movements = await client.v1.balance_transactions.list_async({"source": reversal.id})
    (refund,) = movements.data
    assert (refund.type, refund.amount, refund.id) == (
        "transfer_refund",
        525,
        reversal.balance_transaction,
    )


async def test_a_returned_payout_is_paid_then_failed_and_its_money_listed_back(
    sim: Sim, client: stripe.StripeClient
) -> None:
    sid = str(uuid.uuid4())
    await sim.faults(payout_return=1, payout_delay_ms=50, reversal_delay_ms=100)
    created = await client.v1.payouts.create_async(
        {"amount": 800, "currency": "usd", "metadata": {"settlement_id": sid}}
    )

    await eventually(lambda: len(sim.receiver.events(sid)) == 3)
    kinds = [e.type for e in sim.receiver.events(sid)]
    assert kinds == ["payout.created", "payout.paid", "payout.failed"]
    payout = await client.v1.payouts.retrieve_async(created.id)
    assert payout.status == "failed"
    movements = await client.v1.balance_transactions.list_async({"source": created.id})
    assert sorted((t.type, t.amount) for t in movements.data) == [
        ("payout", -800),
        ("payout_failure", 800),
    ]
    assert payout.failure_balance_transaction in [t.id for t in movements.data]


async def test_a_dropped_webhook_never_arrives_though_the_transfer_exists(
    sim: Sim, client: stripe.StripeClient
) -> None:
    dropped, sent = str(uuid.uuid4()), str(uuid.uuid4())
    before = (await sim.control.get("/_sim/webhooks")).json()["withheld"]
    await sim.faults(webhook_drop=1)
    created = await client.v1.transfers.create_async(transfer_params(dropped))
    await sim.faults(webhook_drop=0)
    await client.v1.transfers.create_async(transfer_params(sent))

    await eventually(lambda: sim.receiver.events(sent))
    assert sim.receiver.events(dropped) == []
    assert (await client.v1.transfers.retrieve_async(created.id)).metadata[
        "settlement_id"
    ] == dropped
    assert (await sim.control.get("/_sim/webhooks")).json()["withheld"] == before + 1
    withheld = (await sim.withheld())["recent"][-1]
    assert (withheld["type"], withheld["object_id"]) == ("transfer.created", created.id)

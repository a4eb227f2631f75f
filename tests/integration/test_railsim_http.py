"""The simulator over HTTP, driven by Stripe's own Python library, its webhooks received by a
small server and verified with `stripe.Webhook.construct_event`. No PostgreSQL or Kafka."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import stripe

from tests.integration.railsim_support import Sim, running_sim, stripe_client, transfer_params
from tests.waiting import eventually


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


async def test_a_transfer_is_created_once_replayed_by_key_and_found_by_group(
    sim: Sim, client: stripe.StripeClient
) -> None:
    sid, key = str(uuid.uuid4()), uuid.uuid4().hex
    created = await client.v1.transfers.create_async(transfer_params(sid), {"idempotency_key": key})
    replayed = await client.v1.transfers.create_async(
        transfer_params(sid), {"idempotency_key": key}
    )

    assert created.id.startswith("tr_") and replayed.id == created.id
    first, again = created.last_response, replayed.last_response
    assert first is not None and again is not None
    assert again.headers["idempotent-replayed"] == "true"
    assert again.body == first.body
    assert await sim.effects(sid) == {"settlement_id": sid, "transfers": 1, "payouts": 0}
    found = await client.v1.transfers.list_async({"transfer_group": sid, "limit": 10})
    assert [t.id for t in found.data] == [created.id]
    assert (await client.v1.transfers.retrieve_async(created.id)).metadata["settlement_id"] == sid

    await eventually(lambda: sim.receiver.events(sid))
    (announced,) = sim.receiver.events(sid)
    assert announced.type == "transfer.created" and announced.data.object.id == created.id
    assert announced.request is not None and announced.request.idempotency_key == key


async def test_a_payout_is_paid_later_and_every_step_arrives_signed(
    sim: Sim, client: stripe.StripeClient
) -> None:
    sid = str(uuid.uuid4())
    payout = await client.v1.payouts.create_async(
        {"amount": 900, "currency": "usd", "metadata": {"settlement_id": sid}},
        {"idempotency_key": sid},
    )
    assert payout.status == "pending"

    await eventually(lambda: len(sim.receiver.events(sid)) == 2)
    assert [e.type for e in sim.receiver.events(sid)] == ["payout.created", "payout.paid"]
    assert (await client.v1.payouts.retrieve_async(payout.id)).status == "paid"
    listed = await client.v1.payouts.list_async({"created": {"gte": payout.created}, "limit": 100})
    assert payout.id in [p.id for p in listed.data]


async def test_refusals_and_key_reuse_are_stripe_errors(client: stripe.StripeClient) -> None:
    sid = str(uuid.uuid4())
    with pytest.raises(stripe.InvalidRequestError) as refused:
        await client.v1.transfers.create_async(transfer_params(sid, "acct_closed_x"))
    assert refused.value.code == "account_closed" and refused.value.http_status == 400

    await client.v1.transfers.create_async(transfer_params(sid), {"idempotency_key": sid})
    with pytest.raises(stripe.IdempotencyError):
        await client.v1.transfers.create_async(
            transfer_params(sid, amount=1), {"idempotency_key": sid}
        )


async def test_a_500_after_acceptance_keeps_one_effect_and_the_retry_gets_the_object(
    sim: Sim, client: stripe.StripeClient
) -> None:
    sid = str(uuid.uuid4())
    await sim.faults(fail_after=1)
    with pytest.raises(stripe.APIError) as failed:
        await client.v1.transfers.create_async(transfer_params(sid), {"idempotency_key": sid})
    assert failed.value.http_status == 500
    assert (await sim.effects(sid))["transfers"] == 1

    retried = await client.v1.transfers.create_async(transfer_params(sid), {"idempotency_key": sid})
    assert retried.metadata["settlement_id"] == sid
    assert (await sim.effects(sid))["transfers"] == 1


async def test_a_timeout_after_acceptance_leaves_the_effect(sim: Sim) -> None:
    sid = str(uuid.uuid4())
    await sim.faults(timeout_after=1, timeout_seconds=1.5)
    impatient = stripe.HTTPXClient(timeout=0.3)
    client = stripe.StripeClient(
        "sk_test_x", base_addresses={"api": sim.url}, max_network_retries=0, http_client=impatient
    )
    try:
        with pytest.raises(stripe.APIConnectionError):
            await client.v1.transfers.create_async(transfer_params(sid), {"idempotency_key": sid})
    finally:
        await impatient.close_async()  # type: ignore[no-untyped-call]
    assert (await sim.effects(sid))["transfers"] == 1


async def test_an_early_webhook_arrives_before_the_api_answers(
    sim: Sim, client: stripe.StripeClient
) -> None:
    sid = str(uuid.uuid4())
    await sim.faults(webhook_early=1)
    created = await client.v1.transfers.create_async(transfer_params(sid), {"idempotency_key": sid})
    assert [e.data.object.id for e in sim.receiver.events(sid)] == [created.id]


async def test_webhooks_are_retried_until_the_receiver_takes_them(
    sim: Sim, client: stripe.StripeClient
) -> None:
    sid = str(uuid.uuid4())
    before = (await sim.control.get("/_sim/webhooks")).json()
    sim.receiver.failures_left = 2
    await client.v1.transfers.create_async(transfer_params(sid), {"idempotency_key": sid})

    await eventually(lambda: sim.receiver.events(sid))
    after = (await sim.control.get("/_sim/webhooks")).json()
    assert after["failed_attempts"] - before["failed_attempts"] == 2
    assert after["sent"] - before["sent"] == 1


async def test_calls_without_a_secret_key_are_refused(sim: Sim) -> None:
    response = await sim.control.post("/v1/transfers", content=b"amount=1")
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert (await sim.control.get("/healthz")).status_code == 200
    assert (await sim.control.get("/readyz")).status_code == 200

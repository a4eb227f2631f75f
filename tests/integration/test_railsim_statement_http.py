"""The simulator's statement over HTTP: Stripe's itemized balance change report of its
effects, which the statement parser reads back into the very objects Stripe's API shows
(partial reversals and failed payouts included, a zero-decimal currency exact), for the
created window asked. No PostgreSQL or Kafka."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import stripe

from railsim.core import RailSim
from railsim.faults import Faults
from railsim.http import create_app
from railsim.statement import COLUMNS
from services.adapters.stripe.wire import rail_object_of
from services.reconcile.statement import read_statement
from tests.integration.railsim_support import serving, stripe_client

AUTH = {"Authorization": "Bearer sk_test_x"}


async def statement(url: str, start: int | None, end: int | None, **headers: str) -> httpx.Response:
    """GET the statement (None leaves a parameter out), authorized unless headers say else."""
    params = {k: v for k, v in (("interval_start", start), ("interval_end", end)) if v is not None}
    async with httpx.AsyncClient() as http:
        return await http.get(
            f"{url}/v1/reporting/statement", params=params, headers=headers or AUTH
        )


async def test_the_statement_reads_back_as_the_objects_the_api_shows() -> None:
    start = int(time.time())
    sim = RailSim(faults=Faults(reversal_delay_ms=50, payout_delay_ms=20))
    async with serving(create_app(sim)) as url, stripe_client(url) as client:
        made: list[stripe.StripeObject] = [
            await client.v1.transfers.create_async(
                {
                    "amount": amount,
                    "currency": currency,
                    "destination": destination,
                    "metadata": {"settlement_id": str(uuid.uuid4())},
                }
            )
            for amount, currency, destination in [
                (1051, "eur", "acct_partial"),
                (123456, "jpy", "acct_ok"),
                (700, "gbp", "acct_ok"),
            ]
        ]
        made.append(
            await client.v1.payouts.create_async(
                {"amount": 800, "currency": "usd", "destination": "acct_fail"}
            )
        )
        end = int(time.time()) + 1

        for _ in range(250):  # the reversal and the failure come due within a second
            answer = await statement(url, start, end + 5)
            if "transfer_reversal" in answer.text and "payout_reversal" in answer.text:
                break
            await asyncio.sleep(0.02)
        now = [
            await client.v1.transfers.retrieve_async(made[0].id),
            await client.v1.transfers.retrieve_async(made[1].id),
            await client.v1.transfers.retrieve_async(made[2].id),
            await client.v1.payouts.retrieve_async(made[3].id),
        ]
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    assert answer.text.splitlines()[0] == ",".join(COLUMNS)
    read = read_statement(answer.text.splitlines())
    assert read.lines == 6  # four objects, a reversal, a payout's money back
    expected = [rail_object_of(o.to_dict()) for o in now]
    # The report names no payout's bank account, nor its arrival date.
    expected[3] = expected[3]._replace(destination=None, arrival=None)
    assert list(read.objects.values()) == expected
    assert (expected[0].amount_reversed, expected[1].amount, expected[3].status) == (
        525,
        123456,
        "failed",
    )


async def test_the_statement_keeps_to_its_interval_and_refuses_a_bad_one() -> None:
    sim = RailSim()
    async with serving(create_app(sim)) as url, stripe_client(url) as client:
        start = int(time.time())
        await client.v1.transfers.create_async(
            {"amount": 100, "currency": "usd", "destination": "acct_ok"}
        )
        assert len((await statement(url, start, start + 5)).text.splitlines()) == 2
        empty = await statement(url, start + 5, start + 10)
        assert empty.text.splitlines() == [",".join(COLUMNS)]
        refused = await statement(url, start, start)
        assert refused.status_code == 400
        assert refused.json()["error"]["param"] == "interval_end"
        missing = await statement(url, None, start)
        assert missing.status_code == 400
        assert missing.json()["error"]["param"] == "interval_start"
        anonymous = await statement(url, 1, 2, Authorization="")
        assert anonymous.status_code == 401

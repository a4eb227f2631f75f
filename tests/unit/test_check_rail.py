"""The checker's effect sources against the rail simulator in process: the simulator's own
count and Stripe's list API (paged) agree with what the rail made; a failing rail is named."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from railsim.core import RailSim
from railsim.http import create_app
from railsim.params import Kind
from tests.waiting import eventually
from tools.check.errors import SourceUnavailable
from tools.check.rail import SimulatorEffects, StripeEffects

BASE = "http://railsim.test"


@asynccontextmanager
async def served(app: ASGIApp) -> AsyncIterator[str]:
    """`app` on a loopback port, for clients that speak real HTTP (the Stripe listing does)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started, what="uvicorn started")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def made(sim: RailSim, kind: Kind, settlement_id: str, n: int = 1) -> None:
    for _ in range(n):
        pairs = [
            ("amount", "100"),
            ("currency", "eur"),
            ("destination", "acct_1Q2w3E"),
            ("metadata[settlement_id]", settlement_id),
        ]
        assert sim.create(kind, pairs).status == 200


@pytest.fixture
def sim() -> RailSim:
    sim = RailSim()
    for n in range(120):  # more than one page of Stripe's list
        made(sim, Kind.TRANSFER, f"stl_{n:03}")
    made(sim, Kind.TRANSFER, "stl_007")
    made(sim, Kind.PAYOUT, "stl_200", 3)
    return sim


async def test_the_simulator_count_is_complete_and_per_settlement(sim: RailSim) -> None:
    source = SimulatorEffects(BASE, transport=httpx.ASGITransport(app=create_app(sim)))
    facts = await source.effects()
    assert facts.exhaustive and len(facts.effects) == 121
    assert facts.effects["stl_007"] == 2 and facts.effects["stl_200"] == 3
    assert facts.effects["stl_119"] == 1


async def test_stripe_listing_pages_through_transfers_and_payouts(sim: RailSim) -> None:
    app = create_app(sim)
    async with served(app) as url:
        facts = await StripeEffects("sk_test_x", api_base=url).effects()
    simulated = await SimulatorEffects(BASE, transport=httpx.ASGITransport(app=app)).effects()
    assert not facts.exhaustive
    assert dict(facts.effects) == dict(simulated.effects)


async def test_a_rail_that_cannot_answer_is_named_as_the_source() -> None:
    def refuse(_: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="down")

    transport = httpx.MockTransport(refuse)
    with pytest.raises(SourceUnavailable) as raised:
        await SimulatorEffects(BASE, transport=transport).effects()
    assert raised.value.source == "rail"

    async def down(_: object) -> PlainTextResponse:
        return PlainTextResponse("down", status_code=503)

    routes = [Route("/v1/{kind}", down)]
    async with served(Starlette(routes=routes)) as url:
        with pytest.raises(SourceUnavailable) as raised:
            await StripeEffects("sk_test_x", api_base=url).effects()
    assert raised.value.source == "rail"

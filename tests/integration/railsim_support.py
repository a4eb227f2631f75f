"""The rail simulator served over HTTP for tests: a webhook receiver that verifies with Stripe's
library, a simulator wired to it, and Stripe's own client pointed at it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import stripe
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from railsim.app import SimOptions, build
from railsim.webhooks import RetryPolicy
from tests.waiting import eventually

SECRET = "whsec_railsim_test"
FAST_RETRIES = RetryPolicy(first_delay=0.05, max_delay=0.2, give_up_after=30)


@dataclass
class Receiver:
    """A webhook endpoint that records what it got and can be told to fail for a while."""

    received: list[tuple[bytes, str]] = field(default_factory=list)
    failures_left: int = 0

    async def endpoint(self, request: Request) -> Response:
        if self.failures_left > 0:
            self.failures_left -= 1
            return Response(status_code=503)
        self.received.append((await request.body(), request.headers["Stripe-Signature"]))
        return Response(status_code=200)

    def events(self, settlement_id: str) -> list[stripe.Event]:
        verified = [stripe.Webhook.construct_event(p.decode(), h, SECRET) for p, h in self.received]
        # StripeObject is no dict in stripe v16: .get() raises, so read through to_dict()
        return [
            e
            for e in verified
            if e.data.object.metadata.to_dict().get("settlement_id") == settlement_id
        ]


@contextlib.asynccontextmanager
async def serving(app: Starlette, tls: tuple[Path, Path] | None = None) -> AsyncIterator[str]:
    """Serve `app` on a free local port for the duration (over TLS with `tls`, a certificate
    and its key); yield its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    cert, key = (str(tls[0]), str(tls[1])) if tls else (None, None)
    config = uvicorn.Config(
        app, log_level="warning", timeout_graceful_shutdown=1, ssl_certfile=cert, ssl_keyfile=key
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await eventually(lambda: server.started)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


@dataclass
class Sim:
    """A simulator being served: its base URL, its webhook receiver, a client for /_sim."""

    url: str
    receiver: Receiver
    control: httpx.AsyncClient

    async def faults(self, **settings: Any) -> None:
        (await self.control.post("/_sim/faults", json=settings)).raise_for_status()

    async def effects(self, settlement_id: str) -> dict[str, Any]:
        return (await self.control.get(f"/_sim/effects/{settlement_id}")).json()  # type: ignore[no-any-return]

    async def withheld(self) -> dict[str, Any]:
        return (await self.control.get("/_sim/webhooks/withheld")).json()  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def running_sim() -> AsyncIterator[Sim]:
    """A simulator and its webhook receiver, each on a free local port, for the duration."""
    receiver = Receiver()
    hooks = Starlette(routes=[Route("/hooks", receiver.endpoint, methods=["POST"])])
    async with serving(hooks) as hooks_url:
        options = SimOptions(f"{hooks_url}/hooks", SECRET, retry=FAST_RETRIES)
        async with serving(build(options)[1]) as url, httpx.AsyncClient(base_url=url) as control:
            yield Sim(url, receiver, control)


@contextlib.asynccontextmanager
async def stripe_client(url: str) -> AsyncIterator[stripe.StripeClient]:
    """Stripe's own client, its API base pointed at the simulator at `url`, without retries."""
    http = stripe.HTTPXClient(timeout=5)
    try:
        yield stripe.StripeClient(
            "sk_test_x", base_addresses={"api": url}, max_network_retries=0, http_client=http
        )
    finally:
        await http.close_async()  # type: ignore[no-untyped-call]


def transfer_params(
    settlement_id: str, destination: str = "acct_ok", amount: int = 1050
) -> stripe.params.TransferCreateParams:
    return {
        "amount": amount,
        "currency": "eur",
        "destination": destination,
        "transfer_group": settlement_id,
        "metadata": {"settlement_id": settlement_id, "tenant": "acme"},
    }

"""Stripe's wire format over the core: form bodies in, JSON and Stripe's headers out.

Sits between the network and `RailSim`: authenticates, adds latency, holds answers back for
the timeout fault, and hands the webhooks each call caused to the sender, before the answer
for the early-webhook fault and after it otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from railsim.control import control_routes, sim_registry
from railsim.core import RailSim
from railsim.creates import CREATE_PATHS, CreateCalls
from railsim.errors import ApiError
from railsim.params import Kind
from railsim.replies import error_reply
from railsim.report_routes import ReportingApi, respond
from railsim.webhooks import WebhookSender
from services.platform.metrics import mount_metrics

Endpoint = Callable[[Request], Awaitable[Response]]
TICK_SECONDS = 0.05  # how often due changes (payout paid, reversals) are turned into webhooks


class RailApp(Starlette):
    """Starlette, with the create calls (the hot path) answered ahead of its routing, and the
    files host answered apart when it listens on a port of its own."""

    def __init__(
        self,
        calls: CreateCalls,
        files: tuple[int, ASGIApp] | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self._calls = calls
        self._files = files  # (port, app) of the files host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a create on bare ASGI; hand every other call to Starlette."""
        if scope["type"] == "http":
            if self._files is not None and _port(scope) == self._files[0]:
                return await self._files[1](scope, receive, send)
            if scope["method"] == "POST":
                kind = CREATE_PATHS.get(scope["path"])
                if kind is not None:
                    return await self._calls.answer(kind, scope, receive, send)
        await super().__call__(scope, receive, send)


def _port(scope: Scope) -> int | None:
    """The port the call came in on."""
    server = scope.get("server")
    return server[1] if server else None


class StripeApi:
    """The /v1 endpoints for transfers, payouts, the balance and its transactions (the rest
    of the account, its charges and reports, in report_routes.py)."""

    def __init__(self, calls: CreateCalls) -> None:
        self.calls = calls  # the creates themselves, and the gate every call passes
        self.sim = calls.sim

    def routes(self, more: list[BaseRoute]) -> list[BaseRoute]:
        """The /v1 routes and `more`, with a Stripe-shaped 404 for everything else under /v1."""
        routes: list[BaseRoute] = list(more)
        for kind in Kind:
            routes.append(Route(f"/v1/{kind}", self._collection(kind), methods=["GET"]))
            routes.append(Route(f"/v1/{kind}/{{object_id}}", self._member(kind), methods=["GET"]))
        routes.append(Route("/v1/balance", self._balance, methods=["GET"]))
        routes.append(Route("/v1/balance_transactions", self._movements, methods=["GET"]))
        routes.append(
            Route("/v1/balance_transactions/{transaction_id}", self._movement, methods=["GET"])
        )
        all_methods = ["GET", "POST", "DELETE", "PUT", "PATCH"]
        routes.append(Route("/v1/{rest:path}", self._unknown, methods=all_methods))
        return routes

    def _collection(self, kind: Kind) -> Endpoint:
        # POSTs (creates) never get here: `RailApp` answers them ahead of the routing
        async def endpoint(request: Request) -> Response:
            if (denied := await self._admit(request)) is not None:
                return denied
            query = parse_qsl(request.url.query, keep_blank_values=True)
            return respond(self.sim.list_objects(kind, query))

        return endpoint

    def _member(self, kind: Kind) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            if (denied := await self._admit(request)) is not None:
                return denied
            return respond(self.sim.retrieve(kind, request.path_params["object_id"]))

        return endpoint

    async def _balance(self, request: Request) -> Response:
        if (denied := await self._admit(request)) is not None:
            return denied
        return respond(self.sim.balance())

    async def _movements(self, request: Request) -> Response:
        if (denied := await self._admit(request)) is not None:
            return denied
        query = parse_qsl(request.url.query, keep_blank_values=True)
        return respond(self.sim.list_balance_transactions(query))

    async def _movement(self, request: Request) -> Response:
        if (denied := await self._admit(request)) is not None:
            return denied
        transaction_id = request.path_params["transaction_id"]
        query = parse_qsl(request.url.query, keep_blank_values=True)
        return respond(self.sim.retrieve_balance_transaction(transaction_id, query))

    async def _unknown(self, request: Request) -> Response:
        missing = ApiError(
            f"Unrecognized request URL ({request.method}: {request.url.path}).", status=404
        )
        return respond(error_reply(missing, "req_unrouted"))

    async def _admit(self, request: Request) -> Response | None:
        denied = await self.calls.admit(request.headers.get("Authorization", ""))
        return None if denied is None else respond(denied)


async def _tick(sim: RailSim, sender: WebhookSender | None) -> None:
    while True:
        due = sim.take_webhooks()
        if sender is not None:
            sender.enqueue(due)
        await asyncio.sleep(TICK_SECONDS)


def create_app(
    sim: RailSim,
    sender: WebhookSender | None = None,
    answer_delay: float = 0.0,
    files_port: int | None = None,
) -> Starlette:
    """The simulator's ASGI app: Stripe's /v1 subset, /_sim control, health and metrics, and
    the files host (on `files_port` when given, else under /files; see report_routes.py)."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(_tick(sim, sender))]
        if sender is not None:
            tasks.append(asyncio.create_task(sender.run()))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if sender is not None:
                await sender.aclose()

    calls = CreateCalls(sim, sender, answer_delay)
    reporting = ReportingApi(calls, files_port)
    routes = control_routes(sim, sender) + StripeApi(calls).routes(reporting.routes())
    files = None if files_port is None else (files_port, reporting.files_app())
    app = RailApp(calls, files, routes=routes, lifespan=lifespan)
    mount_metrics(app, sim_registry(sim, sender))
    return app

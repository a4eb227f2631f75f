"""Stripe's wire format over the core: form bodies in, JSON and Stripe's headers out.

Sits between the network and `RailSim`: authenticates, adds latency, holds answers back for
the timeout fault, and hands the webhooks each call caused to the sender, before the answer
for the early-webhook fault and after it otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from railsim.control import control_routes, sim_registry
from railsim.core import RailSim
from railsim.errors import ApiError
from railsim.objects import API_VERSION
from railsim.params import Kind
from railsim.replies import Delivery, Reply, error_reply
from railsim.webhooks import WebhookSender
from services.shared.metrics import mount_metrics

Endpoint = Callable[[Request], Awaitable[Response]]
TICK_SECONDS = 0.05  # how often due changes (payout paid, reversals) are turned into webhooks


class StripeApi:
    """The /v1 endpoints for transfers, payouts, the balance and its transactions."""

    def __init__(self, sim: RailSim, sender: WebhookSender | None, answer_delay: float) -> None:
        self.sim = sim
        self.sender = sender
        self.answer_delay = answer_delay  # seconds every call takes before it is answered

    def routes(self) -> list[BaseRoute]:
        """The /v1 routes, with a Stripe-shaped 404 for everything else under /v1."""
        routes: list[BaseRoute] = []
        for kind in Kind:
            routes.append(Route(f"/v1/{kind}", self._collection(kind), methods=["GET", "POST"]))
            routes.append(Route(f"/v1/{kind}/{{object_id}}", self._member(kind), methods=["GET"]))
        routes.append(Route("/v1/balance", self._balance, methods=["GET"]))
        routes.append(Route("/v1/balance_transactions", self._movements, methods=["GET"]))
        routes.append(
            Route("/v1/balance_transactions/{transaction_id}", self._movement, methods=["GET"])
        )
        routes.append(Route("/v1/reporting/statement", self._statement, methods=["GET"]))
        all_methods = ["GET", "POST", "DELETE", "PUT", "PATCH"]
        routes.append(Route("/v1/{rest:path}", self._unknown, methods=all_methods))
        return routes

    def _collection(self, kind: Kind) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            if (denied := await self._admit(request)) is not None:
                return denied
            if request.method == "GET":
                query = parse_qsl(request.url.query, keep_blank_values=True)
                return await self._answer(self.sim.list_objects(kind, query), None)
            key = request.headers.get("Idempotency-Key")
            try:
                form = parse_qsl((await request.body()).decode(), keep_blank_values=True)
            except UnicodeDecodeError:
                bad = ApiError(
                    "The request body is not valid UTF-8.", code="parameter_invalid_string"
                )
                return await self._answer(error_reply(bad, "req_undecodable"), key)
            return await self._answer(self.sim.create(kind, form, key), key)

        return endpoint

    def _member(self, kind: Kind) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            if (denied := await self._admit(request)) is not None:
                return denied
            return await self._answer(
                self.sim.retrieve(kind, request.path_params["object_id"]), None
            )

        return endpoint

    async def _balance(self, request: Request) -> Response:
        if (denied := await self._admit(request)) is not None:
            return denied
        return await self._answer(self.sim.balance(), None)

    async def _movements(self, request: Request) -> Response:
        if (denied := await self._admit(request)) is not None:
            return denied
        query = parse_qsl(request.url.query, keep_blank_values=True)
        return await self._answer(self.sim.list_balance_transactions(query), None)

    async def _movement(self, request: Request) -> Response:
        if (denied := await self._admit(request)) is not None:
            return denied
        transaction_id = request.path_params["transaction_id"]
        return await self._answer(self.sim.retrieve_balance_transaction(transaction_id), None)

    async def _statement(self, request: Request) -> Response:
        """The itemized balance change report of [interval_start, interval_end), as CSV."""
        if (denied := await self._admit(request)) is not None:
            return denied
        try:
            start, end = (_seconds(request, p) for p in ("interval_start", "interval_end"))
            if start >= end:
                raise ApiError("interval_start must be before interval_end.", param="interval_end")
        except ApiError as e:
            return await self._answer(error_reply(e, "req_statement"), None)
        return Response(self.sim.statement(start, end), media_type="text/csv")

    async def _unknown(self, request: Request) -> Response:
        missing = ApiError(
            f"Unrecognized request URL ({request.method}: {request.url.path}).", status=404
        )
        return await self._answer(error_reply(missing, "req_unrouted"), None)

    async def _admit(self, request: Request) -> Response | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme != "Bearer" or not token.startswith(("sk_", "rk_")):
            unauthorized = ApiError(
                "You did not provide a valid API key: use Authorization: Bearer sk_...",
                status=401,
            )
            return await self._answer(error_reply(unauthorized, "req_unauthorized"), None)
        pause = self.answer_delay + self.sim.faults.latency_ms / 1000
        if pause:
            await asyncio.sleep(pause)
        return None

    async def _answer(self, reply: Reply, key: str | None) -> Response:
        later = await self._dispatch(reply)
        if reply.hold_seconds:
            await asyncio.sleep(reply.hold_seconds)
        headers = {"Request-Id": reply.request_id, "Stripe-Version": API_VERSION}
        if key is not None:
            headers["Idempotency-Key"] = key
        if reply.replayed:
            headers["Idempotent-Replayed"] = "true"
        return Response(
            reply.body,
            status_code=reply.status,
            headers=headers,
            media_type="application/json",
            background=later,
        )

    async def _dispatch(self, reply: Reply) -> BackgroundTask | None:
        """Send the call's webhooks now, or return the task that queues them after answering."""
        if self.sender is None or not reply.webhooks:
            return None
        if reply.webhooks_first:
            await self.sender.send_first(reply.webhooks)
            return None
        if reply.hold_seconds:
            # The rail acted; only the answer is stuck, so its events go out as usual
            self.sender.enqueue(reply.webhooks)
            return None
        # Queued after the answer is written, so only the early fault makes a webhook win
        return BackgroundTask(_enqueue, self.sender, reply.webhooks)


def _seconds(request: Request, name: str) -> int:
    """A required Unix-seconds query parameter; ApiError (400) if absent or not an integer."""
    value = request.query_params.get(name, "")
    if not value.isdigit():
        raise ApiError(f"{name} must be a Unix timestamp in seconds, e.g. 1700000000.", param=name)
    return int(value)


async def _enqueue(sender: WebhookSender, webhooks: tuple[Delivery, ...]) -> None:
    sender.enqueue(webhooks)


async def _tick(sim: RailSim, sender: WebhookSender | None) -> None:
    while True:
        due = sim.take_webhooks()
        if sender is not None:
            sender.enqueue(due)
        await asyncio.sleep(TICK_SECONDS)


def create_app(
    sim: RailSim, sender: WebhookSender | None = None, answer_delay: float = 0.0
) -> Starlette:
    """The simulator's ASGI app: Stripe's /v1 subset, /_sim control, health and metrics."""

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

    routes = control_routes(sim, sender) + StripeApi(sim, sender, answer_delay).routes()
    app = Starlette(routes=routes, lifespan=lifespan)
    mount_metrics(app, sim_registry(sim, sender))
    return app

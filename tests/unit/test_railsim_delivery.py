"""The simulator as a rail, not a bottleneck: webhooks posted N at a time to a slow receiver,
and the configured delivery and answer latencies actually taken."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import httpx

from railsim.core import RailSim
from railsim.http import create_app
from railsim.replies import Delivery
from railsim.webhooks import RetryPolicy, WebhookSender

HOOKS = "http://receiver.test/hooks"


class SlowReceiver:
    """Takes `seconds` per webhook and records how many were being handled at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = 0
        self.most = 0
        self.arrived: list[float] = []

    url = HOOKS

    async def post(self, body: bytes, headers: Mapping[str, str]) -> int:
        self.now += 1
        self.most = max(self.most, self.now)
        self.arrived.append(time.monotonic())
        await asyncio.sleep(self.seconds)
        self.now -= 1
        return 200

    async def aclose(self) -> None:
        pass


def deliveries(count: int) -> list[Delivery]:
    return [Delivery(f"evt_{n}", "transfer.created", b"{}", 0.0) for n in range(count)]


async def deliver(sender: WebhookSender, count: int) -> None:
    running = asyncio.create_task(sender.run())
    try:
        sender.enqueue(deliveries(count))
        for _ in range(200):
            if sender.stats()["sent"] == count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"delivered {sender.stats()}")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


def sender_to(receiver: SlowReceiver, policy: RetryPolicy) -> WebhookSender:
    return WebhookSender(HOOKS, "whsec_test", policy=policy, endpoint=receiver)


async def test_a_slow_receiver_gets_as_many_webhooks_at_once_as_configured() -> None:
    receiver = SlowReceiver(0.2)
    await deliver(sender_to(receiver, RetryPolicy(concurrency=8)), 40)
    assert receiver.most == 8


async def test_the_default_keeps_tens_of_webhooks_in_flight() -> None:
    receiver = SlowReceiver(0.2)
    await deliver(sender_to(receiver, RetryPolicy()), 100)
    assert receiver.most >= 32


async def test_a_webhook_delay_holds_each_first_attempt_that_long() -> None:
    receiver = SlowReceiver(0.0)
    sender = sender_to(receiver, RetryPolicy(delay=0.3))
    started = time.monotonic()
    await deliver(sender, 3)
    assert min(receiver.arrived) - started >= 0.3


async def test_an_answer_delay_holds_every_api_answer_that_long() -> None:
    app = create_app(RailSim(), answer_delay=0.3)
    transport = httpx.ASGITransport(app=app)
    auth = {"Authorization": "Bearer sk_test_delay"}
    async with httpx.AsyncClient(transport=transport, base_url="http://sim", headers=auth) as c:
        started = time.monotonic()
        answer = await c.get("/v1/balance")
        assert answer.status_code == 200
        assert time.monotonic() - started >= 0.3

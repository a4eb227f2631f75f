"""Webhook delivery as Stripe does it: signed events, posted with retries and backoff.

Each attempt is signed afresh (`Stripe-Signature: t=<unix>,v1=<HMAC-SHA256 of "t.payload">`),
so a receiver that was down for an hour still gets signatures within its tolerance.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import hmac
import itertools
import logging
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from hashlib import sha256
from typing import Protocol

from railsim.clock import Clock, SystemClock
from railsim.errors import DeliveryError
from railsim.keepalive import KeepAliveClient
from railsim.replies import Delivery

log = logging.getLogger(__name__)


def signature_header(payload: bytes, secret: str, timestamp: int) -> str:
    """The `Stripe-Signature` header value for `payload` signed with `secret` at `timestamp`."""
    return _signed(hmac.new(secret.encode(), digestmod=sha256), payload, timestamp)


def _signed(keyed: hmac.HMAC, payload: bytes, timestamp: int) -> str:
    # Copying a keyed HMAC skips hashing the key again on every attempt
    mac = keyed.copy()
    mac.update(b"%d." % timestamp)
    mac.update(payload)
    return f"t={timestamp},v1={mac.hexdigest()}"


# Attempts in flight to one endpoint at once: a large provider keeps tens open per endpoint,
# so a receiver that takes a few ms per event (one commit each) is not throttled by the rail
DEFAULT_CONCURRENCY = 32


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard the sender tries before it gives a delivery up."""

    first_delay: float = 1.0  # seconds before the first retry; doubles each time
    max_delay: float = 300.0
    give_up_after: float = 3600.0  # seconds since the first attempt
    attempt_timeout: float = 10.0
    max_pending: int = 10_000  # beyond this new deliveries are dropped (and counted)
    concurrency: int = DEFAULT_CONCURRENCY  # attempts in flight at once
    delay: float = 0.0  # seconds between an event and its first attempt (the rail's latency)


# Every attempt carries these; only the signature changes from one attempt to the next
FIXED_HEADERS = {
    "Content-Type": "application/json; charset=utf-8",
    "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
}


class Endpoint(Protocol):
    """Where the webhooks go: `KeepAliveClient` over the network, a fake in tests."""

    url: str

    async def post(self, body: bytes, headers: Mapping[str, str]) -> int:
        """POST `body`; the answer's status, or DeliveryError if no whole answer came."""
        ...

    async def aclose(self) -> None:
        """Let go of every connection."""
        ...


@dataclass(slots=True)
class _Pending:
    delivery: Delivery
    first_attempt: float | None = None
    attempts: int = 0


class WebhookSender:
    """Posts deliveries to one endpoint until each gets a 2xx or the policy gives up."""

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        endpoint: Endpoint | None = None,
    ) -> None:
        self.url = url
        self._policy = policy or RetryPolicy()
        self._clock = clock or SystemClock()
        self._keyed = hmac.new(secret.encode(), digestmod=sha256)
        pool = self._policy.concurrency
        self._endpoint = endpoint or KeepAliveClient(url, FIXED_HEADERS, max_idle=pool)
        self._queue: list[tuple[float, int, _Pending]] = []
        self._order = itertools.count()
        self._wakeup = asyncio.Event()
        self._in_flight = 0
        self._jitter = random.Random()
        self._stats = dict.fromkeys(("sent", "failed_attempts", "gave_up", "dropped"), 0)

    def enqueue(self, deliveries: Iterable[Delivery]) -> None:
        """Queue deliveries; each is posted once its `not_before` has passed."""
        delay, now = self._policy.delay, self._clock.now()
        for delivery in deliveries:
            at = max(delivery.not_before, now + delay) if delay else delivery.not_before
            self._schedule(_Pending(delivery), at)
        self._wakeup.set()

    async def send_first(self, deliveries: Iterable[Delivery]) -> None:
        """Post deliveries now (after the policy's delay), one attempt each; failures retry."""
        if self._policy.delay:
            await asyncio.sleep(self._policy.delay)
        for delivery in deliveries:
            await self._attempt(_Pending(delivery))

    def stats(self) -> dict[str, int]:
        """Delivered, failed attempts, given up, dropped, and still pending."""
        return {**self._stats, "pending": len(self._queue) + self._in_flight}

    def clear(self) -> None:
        """Drop everything queued (in-flight attempts finish)."""
        self._queue.clear()

    async def aclose(self) -> None:
        """Close the endpoint's connections."""
        await self._endpoint.aclose()

    async def run(self) -> None:
        """Post due deliveries until cancelled."""
        slots = asyncio.Semaphore(self._policy.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        try:
            while True:
                now = self._clock.now()
                while self._queue and self._queue[0][0] <= now:
                    _, _, pending = heapq.heappop(self._queue)
                    await slots.acquire()
                    task = asyncio.create_task(self._attempt(pending))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    task.add_done_callback(lambda _: slots.release())
                self._wakeup.clear()
                if not self._queue:
                    await self._wakeup.wait()  # no timer and no task: the common case
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._queue[0][0] - now):
                        await self._wakeup.wait()
        finally:
            for task in tasks:
                task.cancel()

    def _schedule(self, pending: _Pending, at: float) -> None:
        if len(self._queue) + self._in_flight >= self._policy.max_pending:
            self._stats["dropped"] += 1
            log.warning("webhook queue full; dropped %s", pending.delivery.event_id)
            return
        heapq.heappush(self._queue, (at, next(self._order), pending))

    async def _attempt(self, pending: _Pending) -> None:
        now = self._clock.now()
        pending.first_attempt = pending.first_attempt or now
        pending.attempts += 1
        self._in_flight += 1
        try:
            delivered = await self._post(pending.delivery, int(now))
        finally:
            self._in_flight -= 1
        if delivered:
            self._stats["sent"] += 1
            return
        self._stats["failed_attempts"] += 1
        policy = self._policy
        if self._clock.now() - pending.first_attempt >= policy.give_up_after:
            self._stats["gave_up"] += 1
            log.warning("webhook %s given up", pending.delivery.event_id)
            return
        delay = min(policy.first_delay * 2 ** (pending.attempts - 1), policy.max_delay)
        self._schedule(pending, self._clock.now() + delay * self._jitter.uniform(0.5, 1.0))
        self._wakeup.set()

    async def _post(self, delivery: Delivery, timestamp: int) -> bool:
        signature = {"Stripe-Signature": _signed(self._keyed, delivery.payload, timestamp)}
        try:
            async with asyncio.timeout(self._policy.attempt_timeout):
                status = await self._endpoint.post(delivery.payload, signature)
        except (DeliveryError, TimeoutError) as e:
            log.info("webhook %s: %s", delivery.event_id, e)
            return False
        return 200 <= status < 300

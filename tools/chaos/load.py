"""The chaos run's load: the batch spread over the load window, half Kafka, half HTTP.

Every second a slice goes out, without waiting for the slices before it, so an outage holds
back only what meets it. A slice that Kafka refuses (broker down) is published again whole;
an HTTP request that meets a dead ledger or a 503 is retried under its idempotency key, the
replay contract a real client relies on. Repeats can only be deduplicated, never booked twice.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
from aiokafka.errors import KafkaError

from services.adapters.kafka.access import KafkaAccess
from tools.run.submit import Batch, post_settlements, publish_commands

TICK_S = 1.0
HTTP_ATTEMPTS = 40  # ~2 minutes of retries at the capped backoff: longer than any outage here
KAFKA_ATTEMPT_S = 30.0  # one publication attempt of a slice, broker down or not
KAFKA_RETRY_S = 1.0


@dataclass
class Submitted:
    """What the load generator sent and what came back."""

    kafka_messages: int = 0  # acknowledged messages, repeats and re-sent slices included
    kafka_resends: int = 0  # slices published again after the broker refused them
    http: Counter[str] = field(default_factory=Counter)  # answers by outcome
    http_gave_up: int = 0  # requests whose every attempt met a dropped connection


def _slices(numbers: range, ticks: int) -> list[range]:
    size = -(-len(numbers) // ticks) if numbers else 0
    return [numbers[i : i + size] for i in range(0, len(numbers), size)] if size else []


async def _publish(
    batch: Batch, numbers: range, kafka: KafkaAccess, topic: str, out: Submitted
) -> None:
    while True:
        try:
            # Awaited first, added after: `x += await ...` would add to a stale value.
            sent = await asyncio.wait_for(
                publish_commands(batch, numbers, kafka, topic), KAFKA_ATTEMPT_S
            )
            out.kafka_messages += sent
            return
        except (KafkaError, OSError, TimeoutError):
            out.kafka_resends += 1
            await asyncio.sleep(KAFKA_RETRY_S)


async def _post(batch: Batch, numbers: range, ledger_url: str, out: Submitted) -> None:
    try:
        out.http.update(
            await post_settlements(batch, numbers, ledger_url, lambda: None, HTTP_ATTEMPTS)
        )
    except httpx.TransportError:
        out.http_gave_up += len(numbers)


async def submit(
    batch: Batch, window_s: float, ledger_url: str, kafka: KafkaAccess, topic: str
) -> Submitted:
    """Send the batch over `window_s` seconds; returns once every slice is acknowledged."""
    out = Submitted()
    ticks = max(1, int(window_s / TICK_S))
    half = batch.count // 2
    commands = _slices(range(half), ticks)
    requests = _slices(range(half, batch.count), ticks)
    began = time.monotonic()
    sending: list[asyncio.Task[None]] = []
    try:
        for tick in range(max(len(commands), len(requests))):
            await asyncio.sleep(max(0.0, began + tick * TICK_S - time.monotonic()))
            if tick < len(commands):
                work = _publish(batch, commands[tick], kafka, topic, out)
                sending.append(asyncio.create_task(work))
            if tick < len(requests):
                sending.append(asyncio.create_task(_post(batch, requests[tick], ledger_url, out)))
        await asyncio.gather(*sending)
    finally:
        for task in sending:
            task.cancel()
        await asyncio.gather(*sending, return_exceptions=True)
    return out

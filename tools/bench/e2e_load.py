"""The `e2e` scenario's load: open-loop arrivals at a fixed rate, half Kafka, half HTTP.

Settlement n is due at `n / rate` seconds after the start and goes out then whether or not
earlier ones were answered (a closed loop would slow down with the system and hide its
queueing). Even numbers are published as SettlementCommands, odd ones POSTed to the ledger
on keep-alive connections taken from a pool that grows when every connection is busy.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiokafka import AIOKafkaProducer

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer
from services.contracts import avro
from services.contracts.command_signature import signed_headers
from tools.bench.http_load import exchange
from tools.run.submit import IBANS

TICK_S = 0.005  # how often the scheduler wakes to send what has fallen due


@dataclass(frozen=True)
class Arrivals:
    """Who sends, what and how fast."""

    tenant: str
    token: str
    run: str  # names this rate's references and keys
    rate: int  # settlements per second
    seconds: int
    # The tenant's command-signing secrets, if any; never in a repr.
    signing_secrets: tuple[str, ...] = field(default=(), repr=False)
    sepa: bool = False  # euros to IBANs by SEPA credit transfer, instead of dollars by Stripe

    @property
    def count(self) -> int:
        """Settlements offered in all."""
        return self.rate * self.seconds


@dataclass
class Offered:
    """What the load sent and what came back."""

    kafka_sent: int = 0  # commands acknowledged by the broker
    http_statuses: dict[int, int] = field(default_factory=dict)
    http_latencies: list[float] = field(default_factory=list)  # seconds, client side
    late_s: float = 0.0  # the most any settlement went out after it was due

    @property
    def accepted_http(self) -> int:
        """HTTP requests the ledger answered 201."""
        return self.http_statuses.get(201, 0)


def _body(load: Arrivals, n: int) -> dict[str, object]:
    if load.sepa:
        return {
            "reference": f"{load.run}-{n:07d}",
            "payee": f"payee-{n % 97}",
            "destination": IBANS[n % len(IBANS)],
            "amount": 100 + (n * 7919) % 99_900,
            "currency": "EUR",
            "rail": "sepa",
        }
    return {
        "reference": f"{load.run}-{n:07d}",
        "payee": f"payee-{n % 97}",
        "destination": f"acct_e2e{n % 50:02d}",
        "amount": 100 + (n * 7919) % 99_900,
        "currency": "USD",
    }


class _Connections:
    """Idle keep-alive connections to the ledger; a new one is opened when none is idle."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.all: list[asyncio.StreamWriter] = []

    async def take(
        self, fresh: bool = False
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        """A connection (a new one if `fresh`), and whether it was idle: the server may have
        closed it meanwhile."""
        if self.idle and not fresh:
            return (*self.idle.pop(), True)
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self.all.append(writer)
        return reader, writer, False

    def close(self) -> None:
        for writer in self.all:
            writer.close()


async def _post(load: Arrivals, n: int, pool: _Connections, out: Offered) -> None:
    headers = {
        "Authorization": f"Bearer {load.token}",
        "Content-Type": "application/json",
        "Idempotency-Key": f"{load.run}-k{n:07d}",
    }
    payload = json.dumps(_body(load, n)).encode()
    sent, status = time.perf_counter(), 0
    for attempt in range(2):
        reader, writer, reused = await pool.take(fresh=attempt > 0)
        try:
            status = await exchange(
                reader, writer, f"{pool.host}:{pool.port}", "/v1/settlements", headers, payload
            )
        except ConnectionResetError:
            if reused:
                continue  # an idle connection the ledger closed: the same key again, afresh
        except (OSError, asyncio.IncompleteReadError):
            pass  # a dropped connection is counted as such (status 0) and not reused
        else:
            pool.idle.append((reader, writer))
        break
    out.http_latencies.append(time.perf_counter() - sent)
    out.http_statuses[status] = out.http_statuses.get(status, 0) + 1


async def _publish(load: Arrivals, n: int, producer: AIOKafkaProducer, topic: str) -> None:
    command = {
        "rail": None,
        **_body(load, n),
        "tenant": load.tenant,
        "metadata": {},
        "idempotency_key": f"{load.run}-k{n:07d}",
    }
    value = avro.encode("SettlementCommand", command)
    headers = signed_headers(load.signing_secrets, value, int(time.time()))
    acknowledged = await producer.send(
        topic, value, key=str(command["reference"]).encode(), headers=headers
    )
    await acknowledged


async def offer(load: Arrivals, ledger_url: str, kafka: KafkaAccess, topic: str) -> Offered:
    """Send `load.count` settlements on schedule; returns once every one is answered."""
    out = Offered()
    pool = _Connections(ledger_url)
    producer = idempotent_producer(kafka, f"settle-bench-{load.run}")
    inflight: list[asyncio.Task[None]] = []
    acks: list[asyncio.Future[object]] = []
    try:
        await producer.start()
        began, n = time.monotonic(), 0
        while n < load.count:
            due = min(load.count, int((time.monotonic() - began) * load.rate) + 1)
            for m in range(n, due):
                out.late_s = max(out.late_s, time.monotonic() - began - m / load.rate)
                if m % 2 == 0:
                    acks.append(asyncio.ensure_future(_publish(load, m, producer, topic)))
                else:
                    inflight.append(asyncio.create_task(_post(load, m, pool, out)))
            n = due
            await asyncio.sleep(TICK_S)
        await asyncio.gather(*acks)
        await producer.flush()
        out.kafka_sent = len(acks)
        await asyncio.gather(*inflight)
    finally:
        for task in inflight:
            task.cancel()
        await asyncio.gather(*inflight, return_exceptions=True)
        await producer.stop()
        pool.close()
    return out

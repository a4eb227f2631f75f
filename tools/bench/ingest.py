"""The `ingest` scenario: settlements accepted per second through Kafka and over HTTP.

The ledger runs as its own process (`settle ledger`) on the bench database, under a topic
prefix of its own. Kafka: N commands are published as fast as the producer can, and the
clock runs until the N-th settlement is committed. HTTP: concurrent clients each post
settlements with fresh keys; throughput and latency percentiles are measured at the client.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import uuid

import asyncpg
import psutil

from services.adapters.kafka.access import kafka_access
from services.adapters.kafka.clients import idempotent_producer
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.command_signature import signed_headers
from services.contracts.topics import COMMANDS
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from tools.bench import fills
from tools.bench.database import bench_database
from tools.bench.http_load import post_load
from tools.bench.prefill import Filled
from tools.bench.report import BenchResult, Figure, read_result
from tools.bench.runner import BenchError, BenchOptions
from tools.bench.services import running
from tools.infra.paths import run_paths

TOKEN = "bench-ingest-token"
SIGNING_SECRET = "bench-ingest-signing-secret"  # commands are signed, as production requires
# Compared between pre-filled sizes: what a user gets, throughput and tail latency.
COMPARED = ("kafka accept", "http accept", "http latency p99")


def _command(tenant: str, n: int) -> tuple[bytes, list[tuple[str, bytes]]]:
    value = avro.encode(
        "SettlementCommand",
        {
            "tenant": tenant,
            "idempotency_key": f"k-{n}",
            "reference": f"r-{n}",
            "payee": f"payee-{n % 97}",
            "destination": f"acct_{n % 31}",
            "amount": 100 + n,
            "currency": "USD",
            "rail": None,
            "metadata": {"run": tenant},
        },
    )
    return value, signed_headers([SIGNING_SECRET], value, int(time.time()))


async def _wait_booked(dsn: str, tenant: str, count: int, timeout_s: float) -> float:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout_s
        query = "SELECT count(*) FROM settlements WHERE tenant = $1"
        while (booked := await conn.fetchval(query, tenant)) < count:
            if time.monotonic() > deadline:
                raise BenchError(f"only {booked} of {count} settlements booked in {timeout_s} s")
            await asyncio.sleep(0.02)
        return time.monotonic()
    finally:
        await conn.close()


async def _through_kafka(settings: Settings, dsn: str, tenant: str, count: int) -> dict[str, float]:
    commands = [_command(tenant, n) for n in range(count)]
    producer = idempotent_producer(kafka_access(settings), "bench-upstream", linger_ms=10)
    await producer.start()
    try:
        started = time.monotonic()
        sends = [
            await producer.send(settings.topic(COMMANDS), c, key=str(n).encode(), headers=headers)
            for n, (c, headers) in enumerate(commands)
        ]
        await asyncio.gather(*sends)
        published = time.monotonic()
    finally:
        await producer.stop()
    done = await _wait_booked(dsn, tenant, count, timeout_s=max(120, count / 200))
    return {"publish": count / (published - started), "accept": count / (done - started)}


async def _over_http(url: str, tenant_token: str, count: int, clients: int) -> dict[str, float]:
    run = uuid.uuid4().hex[:8]
    auth = {"Authorization": f"Bearer {tenant_token}", "Content-Type": "application/json"}

    def request_for(n: int) -> tuple[str, dict[str, str], bytes]:
        body = {
            "reference": f"h-{run}-{n}",
            "payee": "payee",
            "destination": "acct_1",
            "amount": 100 + n,
            "currency": "EUR",
        }
        return (
            "/v1/settlements",
            {**auth, "Idempotency-Key": f"h-{run}-{n}"},
            json.dumps(body).encode(),
        )

    result = await post_load(url, count, clients, request_for)
    if result.statuses.get(201, 0) != count:
        raise BenchError(f"expected {count} x 201, got {result.statuses}")
    cuts = statistics.quantiles(result.latencies, n=100)
    return {"accept": count / result.elapsed, "p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000}


class CpuMeter:
    """CPU seconds (user + system) one process spent since the last lap."""

    def __init__(self, pid: int) -> None:
        self._process = psutil.Process(pid)
        self._last = self._seconds()

    def _seconds(self) -> float:
        times = self._process.cpu_times()
        return float(times.user + times.system)

    def lap(self) -> float:
        """Seconds of CPU since the meter was made or last lapped."""
        now = self._seconds()
        spent, self._last = now - self._last, now
        return spent


def _ingest_once(
    settings: Settings, options: BenchOptions, fill: int
) -> tuple[list[Figure], list[Figure], Filled | None]:
    """One ledger on a fresh bench database (pre-filled with `fill` settlements of history, if
    any), measured through Kafka and over HTTP."""
    url = bench_database(settings.database_url)
    filled = asyncio.run(fills.fill_database(url, fill)) if fill else None
    dsn = libpq_dsn(url)
    prefix, tenant = f"bench-{uuid.uuid4().hex[:8]}.", f"bench{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(kafka_access(settings), prefix))
    env = {
        "SETTLE_DATABASE_URL": url,
        "SETTLE_TOPIC_PREFIX": prefix,
        "SETTLE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "SETTLE_API_TOKENS": f"{tenant}:{TOKEN}",
        "SETTLE_COMMAND_SIGNING_SECRETS": f"{tenant}:{SIGNING_SECRET}",
    }
    log = run_paths().run / "bench" / "ledger-ingest.log"
    bench_settings = settings.model_copy(update={"topic_prefix": prefix})
    with running(["ledger"], env, log) as ledger:
        cpu = CpuMeter(ledger.process.pid)
        kafka = asyncio.run(_through_kafka(bench_settings, dsn, tenant, options.count))
        kafka_cpu_ms = cpu.lap() * 1000 / options.count
        http = asyncio.run(_over_http(ledger.url, TOKEN, _http_count(options), options.clients))
        http_cpu_ms = cpu.lap() * 1000 / _http_count(options)
    figures = [
        Figure("kafka accept", kafka["accept"], "settlements/s"),
        Figure("kafka publish", kafka["publish"], "commands/s"),
        Figure("http accept", http["accept"], "settlements/s"),
        Figure("http latency p50", http["p50_ms"], "ms"),
        Figure("http latency p99", http["p99_ms"], "ms"),
        Figure("ledger CPU per settlement, kafka", kafka_cpu_ms, "ms"),
        Figure("ledger CPU per settlement, http", http_cpu_ms, "ms"),
    ]
    baseline = read_result("baseline")
    for base in baseline.figures if baseline else []:
        if base.unit == "settlements/s" and base.value > 0:
            figures.append(
                Figure(f"kafka accept / baseline {base.name}", kafka["accept"] / base.value, "x")
            )
    return figures, [], filled


def _http_count(options: BenchOptions) -> int:
    return max(options.count // 4, options.clients)


def run_ingest(settings: Settings, options: BenchOptions) -> BenchResult:
    """Measure settlements/s through Kafka (count commands) and over HTTP (concurrent clients);
    with `options.prefill`, once per size, each on a database pre-filled with that history."""
    if options.prefill:
        figures, _ = fills.over_fills(
            options.prefill, lambda fill: _ingest_once(settings, options, fill), COMPARED
        )
    else:
        figures = _ingest_once(settings, options, 0)[0]
    return BenchResult(
        scenario="ingest",
        parameters={
            "kafka_commands": options.count,
            "http_requests": _http_count(options),
            "http_clients": options.clients,
            "ledger_processes": 1,
            **({"prefill": "/".join(map(str, options.prefill))} if options.prefill else {}),
        },
        figures=figures,
    )

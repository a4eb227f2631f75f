"""The relay and the rail simulator as processes, for the tests that kill, pause or restart
them: starting and stopping a `settle` process, a stage of topics and a simulator of its own,
and counts read from the database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.topics import ensure_topics
from tests.conftest import unique
from tests.waiting import eventually
from tools.infra.procs import free_ports

SETTLE = str(Path(sys.executable).with_name("settle"))


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen([SETTLE, *args], env=env, stdout=out, stderr=out)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def wait_healthy(sim: httpx.AsyncClient) -> None:
    """Wait until the simulator answers /healthz."""

    async def answers() -> bool:
        try:
            return (await sim.get("/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    await eventually(answers, 30, "the simulator answering /healthz")


async def transferred(db: asyncpg.Connection) -> int:
    return int(
        await db.fetchval("SELECT count(*) FROM rail_instructions WHERE status = 'transferred'")
    )


async def wait_transferred(db: asyncpg.Connection, at_least: int, seconds: float) -> None:
    async def enough() -> bool:
        return await transferred(db) >= at_least

    await eventually(enough, seconds, f"{at_least} instructions transferred")


@dataclass(frozen=True)
class Stage:
    """What a relay process test runs against: the services' environment (own topics, the
    simulator as the rail, the lease) and how to start that simulator."""

    env: dict[str, str]
    sim_url: str
    sim_args: list[str]


async def stage(
    database: str, kafka_bootstrap: str, *, lease: float, honours_keys: bool = True
) -> Stage:
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    sim_port = free_ports()
    sim_url = f"http://127.0.0.1:{sim_port}"
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": database,
        "SETTLE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "SETTLE_TOPIC_PREFIX": prefix,
        "STRIPE_API_BASE": sim_url,
        "SETTLE_RAIL_IDEMPOTENT": str(honours_keys).lower(),
        "SETTLE_RELAY_LEASE_SECONDS": str(lease),
    }
    window = "86400" if honours_keys else "0"
    return Stage(env, sim_url, ["railsim", "--port", str(sim_port), "--idempotency-window", window])


async def instruction_counts(db: asyncpg.Connection) -> dict[str, int]:
    rows = await db.fetch("SELECT status, count(*) AS n FROM rail_instructions GROUP BY status")
    return {r["status"]: r["n"] for r in rows}


# Where the relay dies, and the fault that makes the step observable.

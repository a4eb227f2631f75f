"""The relay as a process against the rail simulator: settlements dispatched exactly once in
effect, counted at the rail, through SIGKILLs of the relay mid-stream, with the simulator
honouring keys and with it ignoring them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.topics import ensure_topics
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS, request
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e
SETTLE = str(Path(sys.executable).with_name("settle"))
COUNT = 400
PROCESSING = "SELECT count(*) FROM rail_instructions WHERE status = 'processing'"


@pytest.fixture
async def database(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_relay_") as url:
        yield url


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
    env = {**os.environ, "SETTLE_DATABASE_URL": database, "SETTLE_KAFKA_BOOTSTRAP": kafka_bootstrap,
           "SETTLE_TOPIC_PREFIX": prefix, "STRIPE_API_BASE": sim_url,
           "SETTLE_RAIL_IDEMPOTENT": str(honours_keys).lower(),
           "SETTLE_RELAY_LEASE_SECONDS": str(lease)}  # fmt: skip
    window = "86400" if honours_keys else "0"
    return Stage(env, sim_url, ["railsim", "--port", str(sim_port), "--idempotency-window", window])


@pytest.mark.parametrize(
    "honours_keys", [True, False], ids=["idempotent-rail", "rail-ignores-keys"]
)
async def test_relay_killed_mid_stream_pays_each_settlement_once(
    database: str, kafka_bootstrap: str, tmp_path: Path, honours_keys: bool
) -> None:
    on = await stage(database, kafka_bootstrap, lease=6, honours_keys=honours_keys)
    env, sim_url, sim_args = on.env, on.sim_url, on.sim_args
    pool = await asyncpg.create_pool(asyncpg_dsn(database), min_size=1, max_size=4)
    db = await asyncpg.connect(asyncpg_dsn(database))
    try:
        with process(sim_args, env, tmp_path / "railsim.log"):
            async with httpx.AsyncClient(base_url=sim_url) as sim:
                await wait_healthy(sim)
                # Every API call is slowed, so kills land while calls are in flight.
                await sim.post("/_sim/faults", json={"latency_ms": 20})
                tenant = unique("t")
                results = await Ledger(pool, Books(WINDOWS)).accept_many(
                    [request(tenant, amount=100 + n, currency="USD") for n in range(COUNT)]
                )
                ids = {json.loads(r.body)["id"] for r in results}
                log = tmp_path / "relay.log"
                for threshold in (COUNT // 5, COUNT // 2):
                    with process(["relay", "--metrics-port", str(free_ports())], env, log) as relay:
                        await wait_transferred(db, threshold, 120)
                        relay.send_signal(signal.SIGKILL)
                        relay.wait()
                with process(["relay", "--metrics-port", str(free_ports())], env, log):
                    # Killed claims come back after their lease (6 s) through pass 2.
                    await wait_transferred(db, COUNT, 180)
                effects = (await sim.get("/_sim/effects")).json()["by_settlement"]
    finally:
        await db.close()
        await pool.close()
    made = {sid: e["transfers"] + e["payouts"] for sid, e in effects.items()}
    assert set(made) == ids
    assert all(n == 1 for n in made.values()), {s: n for s, n in made.items() if n != 1}


async def test_paused_relay_is_fenced_off_when_it_wakes(
    database: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    count, lease = 60, 9
    on = await stage(database, kafka_bootstrap, lease=lease)
    env, sim_url, paused_port = on.env, on.sim_url, free_ports()
    pool = await asyncpg.create_pool(asyncpg_dsn(database), min_size=1, max_size=4)
    db = await asyncpg.connect(asyncpg_dsn(database))
    try:
        with process(on.sim_args, env, tmp_path / "railsim.log"):
            async with httpx.AsyncClient(base_url=sim_url) as sim:
                await wait_healthy(sim)
                # Calls take a second, so the pause lands while some are in flight.
                await sim.post("/_sim/faults", json={"latency_ms": 1000})
                results = await Ledger(pool, Books(WINDOWS)).accept_many(
                    [request(unique("t"), amount=100 + n, currency="USD") for n in range(count)]
                )
                ids = {json.loads(r.body)["id"] for r in results}
                log = tmp_path / "relay.log"
                paused_args = ["relay", "--metrics-port", str(paused_port)]
                with process(paused_args, env, log) as paused:
                    await eventually(lambda: db.fetchval(PROCESSING), 60, "a call in flight")
                    paused.send_signal(signal.SIGSTOP)
                    held = await db.fetchval(PROCESSING)
                    await asyncio.sleep(lease + 1)  # its lease runs out while it is frozen
                    with process(["relay", "--metrics-port", str(free_ports())], env, log):
                        await wait_transferred(db, count, 120)
                        paused.send_signal(signal.SIGCONT)
                        # Woken, each call it held is refused at the gate or its record at
                        # the fence: its counter says so.
                        metrics_url = f"http://127.0.0.1:{paused_port}/metrics"

                        async def all_fenced() -> str | None:
                            text = (await sim.get(metrics_url)).text
                            return text if fence_rejections(text) >= held else None

                        metrics = await eventually(all_fenced, 30, "its calls fenced off")
                effects = (await sim.get("/_sim/effects")).json()["by_settlement"]
    finally:
        await db.close()
        await pool.close()
    assert held > 0 and fence_rejections(metrics) >= held
    made = {sid: e["transfers"] + e["payouts"] for sid, e in effects.items()}
    assert set(made) == ids and all(n == 1 for n in made.values())


def fence_rejections(metrics: str) -> float:
    """settle_relay_fence_rejections_total in a /metrics page."""
    return next(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("settle_relay_fence_rejections_total ")
    )


async def instruction_counts(db: asyncpg.Connection) -> dict[str, int]:
    rows = await db.fetch("SELECT status, count(*) AS n FROM rail_instructions GROUP BY status")
    return {r["status"]: r["n"] for r in rows}


# Where the relay dies, and the fault that makes the step observable.
CRASH_STEPS = {
    "before_call": ("dispatch.before_call=kill@8", 0),
    "during_call": ("dispatch.during_call=kill-in:0.15@8", 400),
    "after_accept": ("dispatch.after_accept=kill@8", 0),
}


@pytest.mark.parametrize("step", list(CRASH_STEPS))
@pytest.mark.parametrize(
    "honours_keys", [True, False], ids=["idempotent-rail", "rail-ignores-keys"]
)
async def test_relay_killed_at_each_step_pays_once(
    database: str, kafka_bootstrap: str, tmp_path: Path, step: str, honours_keys: bool
) -> None:
    count, lease = 30, 3
    failpoints, latency_ms = CRASH_STEPS[step]
    on = await stage(database, kafka_bootstrap, lease=lease, honours_keys=honours_keys)
    env, sim_url, sim_args = on.env, on.sim_url, on.sim_args
    pool = await asyncpg.create_pool(asyncpg_dsn(database), min_size=1, max_size=4)
    db = await asyncpg.connect(asyncpg_dsn(database))
    try:
        with process(sim_args, env, tmp_path / "railsim.log"):
            async with httpx.AsyncClient(base_url=sim_url) as sim:
                await wait_healthy(sim)
                await sim.post("/_sim/faults", json={"latency_ms": latency_ms})
                results = await Ledger(pool, Books(WINDOWS)).accept_many(
                    [request(unique("t"), amount=100 + n, currency="USD") for n in range(count)]
                )
                ids = {json.loads(r.body)["id"] for r in results}
                log = tmp_path / "relay.log"
                crash_env = {**env, "SETTLE_FAILPOINTS": failpoints}
                with process(
                    ["relay", "--metrics-port", str(free_ports())], crash_env, log
                ) as doomed:
                    code = await asyncio.to_thread(doomed.wait, 60)
                at_crash = await instruction_counts(db)
                effects_at_crash = (await sim.get("/_sim/effects")).json()["by_settlement"]
                with process(["relay", "--metrics-port", str(free_ports())], env, log):
                    await wait_transferred(db, count, 60)
                effects = (await sim.get("/_sim/effects")).json()["by_settlement"]
                statuses = await db.fetch(
                    "SELECT status, count(*) AS n FROM settlements GROUP BY 1"
                )
    finally:
        await db.close()
        await pool.close()
    assert code == -signal.SIGKILL
    # The kill left work claimed and unrecorded, which the second relay had to recover.
    assert at_crash.get("processing", 0) >= 1, at_crash
    made_at_crash = sum(e["transfers"] + e["payouts"] for e in effects_at_crash.values())
    if step == "after_accept":
        assert made_at_crash > at_crash.get("transferred", 0)  # paid at the rail, not recorded
    made = {sid: e["transfers"] + e["payouts"] for sid, e in effects.items()}
    assert set(made) == ids
    assert all(n == 1 for n in made.values()), {s: n for s, n in made.items() if n != 1}
    assert {r["status"]: r["n"] for r in statuses} == {"submitted": count}

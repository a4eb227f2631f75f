"""The relay as a process against the rail simulator: settlements dispatched exactly once in
effect, counted at the rail, through SIGKILLs of the relay mid-stream, with the simulator
honouring keys and with it ignoring them."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import asyncpg
import httpx
import pytest

from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from tests.conftest import asyncpg_dsn, unique
from tests.e2e.relay_process import (
    process,
    stage,
    wait_healthy,
    wait_transferred,
)
from tests.integration.test_ledger_books import WINDOWS, request
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e
COUNT = 400
PROCESSING = "SELECT count(*) FROM rail_instructions WHERE status = 'processing'"


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
        if line.startswith('settle_relay_fence_rejections_total{rail="sim"} ')
    )

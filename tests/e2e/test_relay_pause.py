"""A relay frozen (SIGSTOP) at the moments that matter for money, against a rail that ignores
keys: its successor takes the instruction over, and when the frozen relay wakes the rail still
holds one transfer per settlement.

- Frozen after its lease check, before its write: on waking, its lease has run out, so the
  last check (made in the transport, just before the write) refuses and nothing is sent.
- Frozen just after its write, with the rail slow to act on it: the successor's lookup waits
  until that request has ended at the rail, finds the transfer and adopts it.

Each fails on a relay without those two rules: the rail then holds two transfers.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

import asyncpg
import httpx
import psutil
import pytest

from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from tests.conftest import asyncpg_dsn, unique
from tests.e2e.relay_process import process, stage, wait_healthy, wait_transferred
from tests.integration.test_ledger_books import WINDOWS, request
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = [pytest.mark.e2e, pytest.mark.alone]
COUNT = 3
LEASE = 6.0  # the relay's call timeout is a third of it, its take-over pause two thirds


async def frozen(proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    """Wait until `proc` stopped itself at its failpoint."""

    def stopped() -> bool:
        assert proc.poll() is None, "the relay died instead of stopping"
        return psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED

    await eventually(stopped, seconds, "the relay stopped at its failpoint")


async def fence_rejections(metrics_port: int) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    return next(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith('settle_relay_fence_rejections_total{rail="sim"} ')
    )


async def woken_and_refused(metrics_port: int, seconds: float = 30) -> float:
    """Wait until the woken relay counts a refusal (its write refused at the last check, or its
    record of a call refused by the fence), then a little longer for any call it still makes
    to land at the rail; its fence rejections."""
    rejected = await eventually(lambda: fence_rejections(metrics_port), seconds, "a refusal")
    await asyncio.sleep(2)  # any call it still makes lands at the rail meanwhile
    return float(rejected)


async def book(database: str) -> set[str]:
    pool = await asyncpg.create_pool(asyncpg_dsn(database), min_size=1, max_size=2)
    try:
        results = await Ledger(pool, Books(WINDOWS)).accept_many(
            [request(unique("t"), amount=100 + n, currency="USD") for n in range(COUNT)]
        )
    finally:
        await pool.close()
    return {json.loads(r.body)["id"] for r in results}


async def paused_then_taken_over(
    database: str,
    kafka_bootstrap: str,
    tmp_path: Path,
    point: str,
    rail_latency_ms: int,
    lease: float = LEASE,
) -> tuple[dict[str, int], set[str], float]:
    """Book COUNT settlements; relay A stops itself at `point` on its first pass there (the
    simulator answering the calls made until then after `rail_latency_ms`); relay B takes
    over and records every transfer; A is woken. (Effects per settlement at the rail, the
    settlement ids, A's fence rejections after waking.)"""
    on = await stage(database, kafka_bootstrap, lease=lease, honours_keys=False)
    db = await asyncpg.connect(asyncpg_dsn(database))
    log, a_port = tmp_path / "relay.log", free_ports()
    try:
        with process(on.sim_args, on.env, tmp_path / "railsim.log"):
            async with httpx.AsyncClient(base_url=on.sim_url) as sim:
                await wait_healthy(sim)
                await sim.post("/_sim/faults", json={"latency_ms": rail_latency_ms})
                ids = await book(database)
                a_env = {**on.env, "SETTLE_FAILPOINTS": f"{point}=stop@1"}
                with process(["relay", "--metrics-port", str(a_port)], a_env, log) as a:
                    await frozen(a)
                    await sim.post("/_sim/faults", json={"profile": "none"})
                    b_args = ["relay", "--metrics-port", str(free_ports())]
                    with process(b_args, on.env, log):
                        await wait_transferred(db, COUNT, 90)
                        a.send_signal(signal.SIGCONT)
                        rejected = await woken_and_refused(a_port)
                effects = (await sim.get("/_sim/effects")).json()["by_settlement"]
    finally:
        await db.close()
    made = {sid: e["transfers"] + e["payouts"] for sid, e in effects.items()}
    return made, ids, rejected


@pytest.mark.parametrize("point", ["dispatch.before_call", "rail.before_write"])
async def test_a_relay_frozen_before_its_write_sends_nothing_once_its_lease_ran_out(
    database: str, kafka_bootstrap: str, tmp_path: Path, point: str
) -> None:
    made, ids, rejected = await paused_then_taken_over(
        database, kafka_bootstrap, tmp_path, point, rail_latency_ms=0
    )
    assert set(made) == ids
    assert all(n == 1 for n in made.values()), {s: n for s, n in made.items() if n != 1}
    assert rejected >= 1  # the frozen relay's last check refused the write
    log = (tmp_path / "relay.log").read_text()
    assert "the lease ran out before the write" in log


async def test_a_take_over_of_a_call_in_flight_looks_only_once_the_rail_is_done_with_it(
    database: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    # A 9 s lease: a 3 s call timeout, a 6 s take-over pause. The frozen relay's request
    # reaches the rail, which acts on it 11 s later: after the lease ran out (where a take-over
    # without the pause looks and finds nothing), before the pause ends (where it finds it).
    made, ids, _ = await paused_then_taken_over(
        database, kafka_bootstrap, tmp_path, "rail.after_write", rail_latency_ms=11_000, lease=9.0
    )
    assert set(made) == ids
    assert all(n == 1 for n in made.values()), {s: n for s, n in made.items() if n != 1}

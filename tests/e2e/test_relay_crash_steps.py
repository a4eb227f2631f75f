"""The relay killed at each step of a dispatch (before the call, during it, after the rail
accepted), with the simulator honouring keys and ignoring them: the relay that takes over
pays each settlement once, counted at the rail."""

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
    instruction_counts,
    process,
    stage,
    wait_healthy,
    wait_transferred,
)
from tests.integration.test_ledger_books import WINDOWS, request
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e


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

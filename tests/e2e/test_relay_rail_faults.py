"""The dispatcher and the Stripe adapter against a real `settle railsim` process in trouble:
504s after the rail accepted, a storm of 5xx, answers slower than our timeout. Each ends with
one transfer per settlement at the rail and every settlement `submitted`, whether the rail
honours our keys or ignores them."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from services.adapters.stripe.rail import StripeRail
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.relay.dispatch import Dispatcher
from services.relay.metrics import create_metrics
from services.relay.policy import DispatchPolicy
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.e2e.relay_process import process, wait_healthy
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS, request
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = [pytest.mark.e2e, pytest.mark.alone]  # counts calls a loaded machine would skip
COUNT = 24
CALL_SECONDS = 0.5
POLICY = DispatchPolicy(
    lease_seconds=1.5,
    call_seconds=CALL_SECONDS,
    max_attempts=20,
    backoff_base=0.05,
    backoff_cap=0.2,
    stale_pending_seconds=0.0,
    ambiguous_pause_seconds=2 * CALL_SECONDS,
)


@pytest.fixture
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    async with scratch_database(infra.database_url, "settle_faults_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=12)
        yield pool
        await pool.close()


async def settle_all(
    pool: asyncpg.Pool,
    sim_url: str,
    honours_keys: bool,
    faults: dict[str, Any],
    calm_after: float,
) -> tuple[dict[str, int], dict[str, int], Dispatcher]:
    """Book COUNT settlements, dispatch them under `faults`, lift the faults after
    `calm_after` seconds, and run pass 2 until nothing is left in flight; (effects per
    settlement at the rail, settlements per status, the dispatcher)."""
    results = await Ledger(pool, Books(WINDOWS)).accept_many(
        [request(unique("t"), amount=100 + n, currency="USD") for n in range(COUNT)]
    )
    ids = [json.loads(r.body)["id"] for r in results]
    rail = StripeRail("sk_test_faults", api_base=sim_url, timeout=CALL_SECONDS)
    dispatcher = Dispatcher(pool, rail, create_metrics(), unique("w"), honours_keys, POLICY)
    async with httpx.AsyncClient(base_url=sim_url) as sim:
        await sim.post("/_sim/faults", json=faults)
        try:
            await asyncio.gather(*(dispatcher.dispatch(sid) for sid in ids))
            loop = asyncio.get_running_loop()
            calm_at = loop.time() + calm_after

            async def swept_to_the_end() -> bool:
                nonlocal calm_at
                if calm_at and loop.time() >= calm_at:
                    await sim.post("/_sim/faults", json={"profile": "none"})
                    calm_at = 0
                await dispatcher.sweep()
                left = await pool.fetchval(
                    "SELECT count(*) FROM rail_instructions "
                    "WHERE status IN ('pending', 'processing')"
                )
                return not left and not calm_at

            # A pass 2 every 0.1 s, as a relay's sweep would come round: faster, the retries
            # would spend their budget inside the storm.
            await eventually(swept_to_the_end, 60, "no instruction left open", every=0.1)
            # Answers held back past our timeout still arrive at the rail; let them land.
            await asyncio.sleep(1.0)
            effects = (await sim.get("/_sim/effects")).json()["by_settlement"]
        finally:
            await rail.aclose()
    made = {sid: effects.get(sid, {}).get("transfers", 0) for sid in ids}
    rows = await pool.fetch("SELECT status, count(*) AS n FROM settlements GROUP BY 1")
    return made, {r["status"]: r["n"] for r in rows}, dispatcher


FAULTS = {
    # The rail makes the transfer, then the gateway answers 500 (a 504 in the wild).
    "504-after-accept": ({"fail_after": 1.0}, 0.0),
    # Every call fails before the rail does anything, for two seconds.
    "5xx-storm": ({"fail_before": 1.0}, 2.0),
    # Answers take longer than our timeout; the rail still does the work.
    "slow-responses": ({"latency_ms": 800}, 2.5),
    # The rail acts at once but holds its answer back past our timeout.
    "timeout-after-accept": ({"timeout_after": 1.0, "timeout_seconds": 1.0}, 0.0),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize(
    "honours_keys", [True, False], ids=["idempotent-rail", "rail-ignores-keys"]
)
async def test_rail_trouble_ends_with_one_transfer_each(
    pool: asyncpg.Pool, tmp_path: Path, fault: str, honours_keys: bool
) -> None:
    port = free_ports()
    window = "86400" if honours_keys else "0"
    args = ["railsim", "--port", str(port), "--idempotency-window", window]
    faults, calm_after = FAULTS[fault]
    with process(args, dict(os.environ), tmp_path / "railsim.log"):
        sim_url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=sim_url) as sim:
            await wait_healthy(sim)
        made, statuses, dispatcher = await settle_all(
            pool, sim_url, honours_keys, faults, calm_after
        )
    assert all(n == 1 for n in made.values()), {s: n for s, n in made.items() if n != 1}
    assert statuses == {"submitted": COUNT}
    calls = dispatcher.metrics.registry.get_sample_value
    # The fault met every settlement's first call: its answer lost (ambiguous), or, on a
    # loaded machine, the call not sent at all (retryable: the connection pool's wait ran out).
    failed_calls = sum(
        calls("settle_relay_rail_calls_total", {"rail": "sim", "outcome": outcome}) or 0
        for outcome in ("ambiguous", "retryable")
    )
    assert failed_calls >= COUNT
    if not honours_keys:
        # No re-issue without looking at the rail first; a transfer made behind a lost
        # answer was found there and adopted.
        found = calls("settle_relay_lookups_total", {"rail": "sim", "found": "true"})
        missed = calls("settle_relay_lookups_total", {"rail": "sim", "found": "false"})
        assert found + missed >= COUNT
        if fault.endswith("after-accept"):
            assert found >= COUNT

"""The console as an operator meets it: `settle console` started as its own process on a
database of this module's own, with known operator tokens, beside `settle railsim` as the rail
its resolutions ask; and settlements, review items, breaks and webhooks planted in it by the
real code paths the integration tests use."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest
from selenium.webdriver.chrome.webdriver import WebDriver

from railsim.core import RailSim
from services.adapters.stripe.rail import StripeRail
from services.domain.settlement import SettlementStatus as S
from services.relay.dispatch import Dispatcher
from services.relay.metrics import create_metrics
from tests.browser.chromium import chromium
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.check_support import FAST, World
from tools.infra.procs import free_ports

SETTLE = str(Path(sys.executable).with_name("settle"))
STRIPE_KEY = "sk_test_console_browser"
OPERATORS = {"alice": unique("ops-alice-"), "bob": unique("ops-bob-")}
START_SECONDS = 60


@dataclass
class Console:
    """A served console and what it was given: its URL, the rail's, and the database behind."""

    url: str
    world: World  # the database's pool, the served rail's URL, and how to plant settlements

    @property
    def pool(self) -> asyncpg.Pool:
        return self.world.pool

    async def paid_at_rail(self) -> str:
        """A settlement dispatched to the served rail and paid: it has a rail reference."""
        sid = await self.world.accept()
        rail = StripeRail(STRIPE_KEY, api_base=self.world.sim_url)
        try:
            await Dispatcher(self.pool, rail, create_metrics(), unique("w"), True, FAST).dispatch(
                sid
            )
        finally:
            await rail.aclose()
        await self.world.move(sid, S.PAID)
        return sid


def _environment(**given: str) -> dict[str, str]:
    """This process's environment without settle's or Stripe's settings, plus `given`."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    return {**kept, **given}


async def _healthy(url: str, process: asyncio.subprocess.Process, log: Path) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(int(START_SECONDS / 0.2)):
            if process.returncode is not None:
                printed = await asyncio.to_thread(log.read_text)
                pytest.fail(f"{log.name}: exited {process.returncode}:\n{printed[-3000:]}")
            try:
                if (await client.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    pytest.fail(f"{log.name}: no answer on /healthz in {START_SECONDS} s")


@asynccontextmanager
async def serving(args: list[str], env: dict[str, str], log: Path) -> AsyncIterator[str]:
    """`settle *args --port P` on a free port until it answers /healthz; its URL. Stopped with
    SIGTERM (killed if it lingers) on the way out; what it printed is in `log`."""
    port = free_ports(1)
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            SETTLE, *args, "--port", str(port), env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        await _healthy(url, process, log)
        yield url
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            process.kill()
            await process.wait()


@pytest.fixture(scope="module")
async def console(
    infra: Servers, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Console]:
    """`settle console` on a database of this module's own, its rail a served `settle railsim`."""
    logs = tmp_path_factory.mktemp("console")
    async with AsyncExitStack() as stack:
        # The database migrates while the simulator starts: together they are most of the
        # module's set-up time.
        url, sim_url = await asyncio.gather(
            stack.enter_async_context(scratch_database(infra.database_url, "settle_browser_")),
            stack.enter_async_context(serving(["railsim"], _environment(), logs / "railsim.log")),
        )
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
        stack.push_async_callback(pool.close)
        env = _environment(
            SETTLE_DATABASE_URL=url,
            SETTLE_OPERATOR_TOKENS=",".join(f"{n}:{t}" for n, t in OPERATORS.items()),
            STRIPE_API_KEY=STRIPE_KEY,
            STRIPE_API_BASE=sim_url,
        )
        console_url = await stack.enter_async_context(
            serving(["console"], env, logs / "console.log")
        )
        # RailSim(): World's in-process rail, unused here; its rail is the served simulator.
        world = World(url, pool, RailSim(), sim_url, kafka_bootstrap, *[""] * 5)
        yield Console(console_url, world)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium for the whole module: starting one costs about a second."""
    with chromium() as driver:
        yield driver

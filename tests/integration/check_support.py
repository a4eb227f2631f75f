"""A small settled world for `settle check` tests: the real PostgreSQL, Kafka and a served rail
simulator, four settlements moved through the real code, and the checker run on it in process
or as the `settle check` command.

Each test gets a database of its own (copied from a migrated template), its own topic prefix
and its own simulator, because the checker judges everything it can see.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from railsim.core import RailSim
from railsim.fake_rail import SimRail
from railsim.http import create_app
from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer
from services.adapters.kafka.topics import ensure_topics
from services.contracts.topics import EVENTS
from services.domain.settlement import SettlementStatus as S
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.relay.dispatch import Dispatcher
from services.relay.metrics import create_metrics
from services.relay.outbox import OutboxPublisher
from services.relay.policy import DispatchPolicy
from services.settlement.transitions import apply_transition
from tests.conftest import asyncpg_dsn, create_database, drop_database, migrate, unique
from tests.harness import Servers
from tests.integration.railsim_support import serving
from tests.integration.test_ledger_books import WINDOWS
from tools.check.invariants import CheckResult, by_name
from tools.check.rail import SimulatorEffects
from tools.check.run import CheckOptions, Report, run_check

FAST = DispatchPolicy(backoff_base=0.0, max_attempts=3, stale_pending_seconds=0.0)
TENANT = "acme"
SETTLE = str(Path(sys.executable).parent / "settle")


@dataclass
class World:
    """Four settlements booked, dispatched and settled through the real code, all published."""

    url: str
    pool: asyncpg.Pool
    sim: RailSim
    sim_url: str
    bootstrap: str
    prefix: str
    paid: str  # paid
    failed: str  # refused by the rail: failed, no effect
    review: str  # submitted, then needs_review with a reason
    reversed: str  # paid, then reversed

    @property
    def topic(self) -> str:
        return f"{self.prefix}{EVENTS}"

    async def check(self, **options: float) -> Report:
        return await run_check(
            self.url,
            KafkaAccess(self.bootstrap),
            self.topic,
            SimulatorEffects(self.sim_url),
            CheckOptions(**options),
        )

    async def settle_check(self, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
        """`settle check --json` on this world: its exit status and its JSON."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
        base |= {
            "SETTLE_DATABASE_URL": self.url,
            "SETTLE_KAFKA_BOOTSTRAP": self.bootstrap,
            "SETTLE_TOPIC_PREFIX": self.prefix,
        }
        process = await asyncio.create_subprocess_exec(
            SETTLE,
            "check",
            "--json",
            "--rail-url",
            self.sim_url,
            *args,
            env=base | env,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        return await process.wait(), json.loads(out)

    async def move(self, sid: str, target: S, reason: str | None = None) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            moved = await apply_transition(
                conn, sid, target, actor="test", now=datetime.now(UTC), reason=reason
            )
        assert moved is not None

    async def accept(self, destination: str = "acct_1Q2w3E", payee: str = "payee-7") -> str:
        body = {
            "reference": unique("ref-"),
            "payee": payee,
            "destination": destination,
            "amount": 700,
            "currency": "EUR",
        }
        req = parse_settlement_body(TENANT, unique("key-"), json.dumps(body).encode())
        result = await Ledger(self.pool, Books(WINDOWS)).accept_many([req])
        return str(json.loads(result[0].body)["id"])

    async def dispatch(self, sid: str) -> None:
        """Pass 1 for `sid`: an instruction never sent is claimed and sent."""
        await self._dispatcher().dispatch(sid)

    async def sweep(self) -> int:
        """Pass 2 over the world: due, forgotten and re-armed instructions are taken over."""
        return await self._dispatcher().sweep()

    def _dispatcher(self) -> Dispatcher:
        return Dispatcher(self.pool, SimRail(self.sim), create_metrics(), unique("w"), True, FAST)

    async def publish(self) -> int:
        producer = idempotent_producer(KafkaAccess(self.bootstrap), unique("check-relay-"))
        await producer.start()
        try:
            publisher = OutboxPublisher(self.pool, producer, create_metrics(), self.prefix)
            return await publisher.drain()
        finally:
            await producer.stop()


@pytest.fixture(scope="module")
async def template(infra: Servers) -> AsyncIterator[str]:
    """A database migrated to head that each test's database is copied from."""
    name = unique("settle_check_tpl_")
    url = await create_database(infra.database_url, name)
    await migrate(url)
    yield name
    await drop_database(infra.database_url, name)


@pytest.fixture
async def world(infra: Servers, template: str, kafka_bootstrap: str) -> AsyncIterator[World]:
    """A healthy world of this test's own: paid, failed, under review and reversed."""
    name = unique("settle_check_")
    url = await create_database(infra.database_url, name, template)
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    sim = RailSim()
    try:
        async with serving(create_app(sim)) as sim_url:
            w = World(url, pool, sim, sim_url, kafka_bootstrap, prefix, "", "", "", "")
            w.paid, w.review, w.reversed = [await w.accept() for _ in range(3)]
            w.failed = await w.accept("acct_refuse_1")
            for sid in (w.paid, w.failed, w.review, w.reversed):
                await w.dispatch(sid)
            await w.move(w.paid, S.PAID)
            await w.move(w.review, S.NEEDS_REVIEW, reason="rail answer unclear")
            await w.move(w.reversed, S.PAID)
            await w.move(w.reversed, S.REVERSED, reason="transfer.reversed")
            # One event per step but the move to dispatching.
            assert await w.publish() == 3 + 2 + 3 + 4
            yield w
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


def results(report: Report) -> dict[str, CheckResult]:
    """The report's verdicts by check name."""
    return dict(by_name(report.results))


def broken_only(report: Report, name: str) -> CheckResult:
    """The named check's result, after asserting it is the only one broken."""
    verdicts = results(report)
    assert {n for n, r in verdicts.items() if not r.ok} == {name}
    return verdicts[name]


def finding(result: CheckResult, what: str) -> tuple[int, tuple[str, ...]]:
    """How many offenders the finding `what` counts, and the first of them."""
    found = {f.what: (f.total, f.first) for f in result.detail}
    return found[what]

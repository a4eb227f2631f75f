"""`settle check` on the real PostgreSQL, Kafka and a served rail simulator: a healthy world
holds every guarantee; each planted breakage is caught and names its offender.

Each test gets a database of its own (copied from a migrated template), its own topic prefix
and its own simulator, because the checker judges everything it can see.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from services.check.invariants import CheckResult, by_name
from services.check.rail import SimulatorEffects
from services.check.run import CheckOptions, Report, run_check, wait_quiet
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.railsim.core import RailSim
from services.railsim.fake_rail import SimRail
from services.railsim.http import create_app
from services.railsim.params import Kind
from services.relay.dispatch import Dispatcher, DispatchPolicy
from services.relay.metrics import create_metrics
from services.relay.outbox import OutboxPublisher
from services.shared.domain.settlement import SettlementStatus as S
from services.shared.kafka import idempotent_producer
from services.shared.migrate import upgrade
from services.shared.topics import EVENTS, ensure_topics
from services.shared.transitions import apply_transition
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique, with_database
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS
from tests.integration.test_railsim_http import serving

pytestmark = pytest.mark.integration
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
            self.url, self.bootstrap, self.topic, SimulatorEffects(self.sim_url),
            CheckOptions(**options),
        )  # fmt: skip

    async def move(self, sid: str, target: S, reason: str | None = None) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            moved = await apply_transition(
                conn, sid, target, actor="test", now=datetime.now(UTC), reason=reason
            )
        assert moved is not None

    async def accept(self, destination: str = "acct_1Q2w3E") -> str:
        body = {"reference": unique("ref-"), "payee": "payee-7", "destination": destination,
                "amount": 700, "currency": "EUR"}  # fmt: skip
        req = parse_settlement_body(TENANT, unique("key-"), json.dumps(body).encode())
        result = await Ledger(self.pool, Books(WINDOWS)).accept_many([req])
        return str(json.loads(result[0].body)["id"])

    async def dispatch(self, sid: str) -> None:
        rail = SimRail(self.sim)
        await Dispatcher(self.pool, rail, create_metrics(), unique("w"), True, FAST).dispatch(sid)

    async def publish(self) -> int:
        producer = idempotent_producer(self.bootstrap, unique("check-relay-"))
        await producer.start()
        try:
            publisher = OutboxPublisher(self.pool, producer, create_metrics(), self.prefix)
            return await publisher.drain()
        finally:
            await producer.stop()


@pytest.fixture(scope="module")
async def template(infra: Servers) -> AsyncIterator[str]:
    name = unique("settle_check_tpl_")
    url = await create_database(infra.database_url, name)
    await asyncio.to_thread(upgrade, url)
    yield name
    await drop_database(infra.database_url, name)


@pytest.fixture
async def world(infra: Servers, template: str, kafka_bootstrap: str) -> AsyncIterator[World]:
    name = unique("settle_check_")
    conn = await asyncpg.connect(asyncpg_dsn(infra.database_url))
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await conn.close()
    url = with_database(infra.database_url, name)
    prefix = unique("t") + "."
    await ensure_topics(kafka_bootstrap, prefix)
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
            assert await w.publish() == 4 + 3 + 4 + 5
            yield w
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


def results(report: Report) -> dict[str, CheckResult]:
    return dict(by_name(report.results))


def broken_only(report: Report, name: str) -> CheckResult:
    """The named check's result, after asserting it is the only one broken."""
    verdicts = results(report)
    assert {n for n, r in verdicts.items() if not r.ok} == {name}
    return verdicts[name]


def finding(result: CheckResult, what: str) -> tuple[int, tuple[str, ...]]:
    found = {f.what: (f.total, f.first) for f in result.detail}
    return found[what]


async def test_a_healthy_world_holds_every_guarantee(world: World) -> None:
    report = await world.check()
    assert report.ok, report.results
    assert report.counts == {"settlements": 4, "events_read": 16, "settlements_with_effects": 3}
    assert all(r.count == 0 and r.offenders == () for r in report.results)


async def test_a_second_effect_at_the_rail_is_caught(world: World) -> None:
    # A create without a key: the rail cannot recognise it as the same payment.
    pairs = [("amount", "700"), ("currency", "eur"), ("destination", "acct_1Q2w3E"),
             ("metadata[settlement_id]", world.paid)]  # fmt: skip
    assert world.sim.create(Kind.TRANSFER, pairs).status == 200
    result = broken_only(await world.check(), "no_double_effect")
    assert result.offenders == (world.paid,)
    assert finding(result, "effects_over_one") == (1, (world.paid,))


async def test_an_unbalanced_posting_is_caught(world: World) -> None:
    async with world.pool.acquire() as conn, conn.transaction():
        # The balance trigger and the account foreign key would refuse this; so would we.
        await conn.execute("SET LOCAL session_replication_role = replica")
        entry = await conn.fetchval(
            "SELECT id FROM journal_entries WHERE settlement_id = $1 AND kind = 'paid'",
            uuid.UUID(world.paid),
        )
        await conn.execute(
            "INSERT INTO postings (entry_id, account_id, amount, currency) "
            "VALUES ($1, $2, 5, 'EUR')",
            entry, f"{TENANT}:paid_out:EUR",
        )  # fmt: skip
    result = broken_only(await world.check(), "books_balance")
    assert finding(result, "entries_not_summing_to_zero") == (1, (str(entry),))
    assert finding(result, "currencies_not_summing_to_zero") == (1, ("EUR",))
    assert finding(result, "settlements_netting_wrong") == (1, (world.paid,))
    assert finding(result, "balances_differing_from_postings") == (1, (f"{TENANT}:paid_out:EUR",))


async def test_a_balance_disagreeing_with_its_postings_is_caught(world: World) -> None:
    account = f"{TENANT}:in_transit:EUR"
    async with world.pool.acquire() as conn:
        await conn.execute(
            "UPDATE account_balances SET balance = balance + 1 WHERE account_id = $1 AND shard = 3",
            account,
        )
    result = broken_only(await world.check(), "books_balance")
    assert result.offenders == (account,)
    assert finding(result, "balances_differing_from_postings") == (1, (account,))


async def test_an_outbox_row_left_unpublished_is_caught(world: World) -> None:
    await world.move(world.review, S.FAILED, reason="operator: not paid")
    async with world.pool.acquire() as conn:
        event = await conn.fetchval(
            "UPDATE outbox SET created_at = now() - interval '10 minutes' "
            "WHERE settlement_id = $1 AND published_at IS NULL RETURNING event_id",
            uuid.UUID(world.review),
        )  # fmt: skip
    report = await world.check()
    result = broken_only(report, "nothing_lost")
    assert finding(result, "outbox_unpublished_beyond_bound") == (1, (str(event),))
    # Within the bound it is in flight, not lost; its event may still be missing from Kafka.
    assert (await world.check(outbox_bound_s=3600)).ok


async def test_a_gap_in_a_settlements_events_is_caught(world: World) -> None:
    await world.move(world.review, S.PAID)
    async with world.pool.acquire() as conn:
        # Marked published, never sent: the event is lost between the outbox and Kafka.
        await conn.execute(
            "UPDATE outbox SET published_at = now() WHERE settlement_id = $1 AND sequence = 5",
            uuid.UUID(world.review),
        )
    await world.move(world.review, S.REVERSED, reason="transfer.reversed")
    assert await world.publish() == 1
    result = broken_only(await world.check(), "events_complete")
    assert finding(result, "sequence_gaps_or_repeats") == (1, (world.review,))


async def test_a_webhook_applied_twice_is_caught(world: World) -> None:
    async with world.pool.acquire() as conn:
        # Twin events of one change under two ids, both applied; the change key was not set.
        await conn.executemany(
            """INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id,
                                         settlement_id, payload, status, applied_at)
               VALUES ('stripe', $1, 'transfer.paid', 'tr_twin', $2, '\\x7b7d', 'applied',
                       now())""",
            [(unique("evt_"), uuid.UUID(world.paid)), (unique("evt_"), uuid.UUID(world.paid))],
        )  # fmt: skip
    result = broken_only(await world.check(), "webhooks_once")
    assert finding(result, "rail_changes_applied_twice") == (1, (world.paid,))


async def test_a_settlement_paid_twice_is_caught(world: World) -> None:
    async with world.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO settlement_transitions (settlement_id, sequence, from_status,
                                                   to_status, actor, occurred_at)
               VALUES ($1, 5, 'paid', 'paid', 'inbox', now())""",
            uuid.UUID(world.paid),
        )
    verdicts = results(await world.check())
    assert finding(verdicts["webhooks_once"], "terminal_transitions_repeated") == (1, (world.paid,))
    # Its history now tells of an event Kafka never carried.
    assert verdicts["events_complete"].offenders == (world.paid,)


async def test_a_settlement_stuck_before_the_rail_is_caught(world: World) -> None:
    stuck = await world.accept()
    await world.publish()
    result = broken_only(await world.check(), "nothing_lost")
    assert finding(result, "settlements_not_settled") == (1, (stuck,))
    started = asyncio.get_running_loop().time()
    quiet, moving = await wait_quiet(world.url, 1.0)
    assert not quiet and moving["instructions"] == 1 and moving["settlements"] == 1
    assert asyncio.get_running_loop().time() - started >= 1.0


async def test_the_cli_exit_status_and_json(world: World) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= {"SETTLE_DATABASE_URL": world.url, "SETTLE_KAFKA_BOOTSTRAP": world.bootstrap,
            "SETTLE_TOPIC_PREFIX": world.prefix}  # fmt: skip

    async def settle_check(*args: str, **extra: str) -> tuple[int, dict[str, object]]:
        process = await asyncio.create_subprocess_exec(
            SETTLE, "check", "--json", "--rail-url", world.sim_url, *args,
            env=env | extra, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await process.communicate()
        assert process.returncode is not None
        return process.returncode, json.loads(out)

    status, body = await settle_check("--wait-quiet", "5")
    names = ["no_double_effect", "nothing_lost", "books_balance", "events_complete",
             "webhooks_once"]  # fmt: skip
    assert status == 0 and body["ok"] is True and body["quiet"] is True
    for name in names:
        assert body[name] == {
            "ok": True,
            "count": 0,
            "offenders": [],
            "detail": body[name]["detail"],
        }

    pairs = [("amount", "700"), ("currency", "eur"), ("destination", "acct_1Q2w3E"),
             ("metadata[settlement_id]", world.reversed)]  # fmt: skip
    world.sim.create(Kind.TRANSFER, pairs)
    status, body = await settle_check()
    assert status == 1 and body["ok"] is False
    assert body["no_double_effect"]["offenders"] == [world.reversed]
    assert body["no_double_effect"]["detail"]["effects_over_one"] == {
        "count": 1, "first": [world.reversed],
    }  # fmt: skip

    status, body = await settle_check(SETTLE_KAFKA_BOOTSTRAP="127.0.0.1:1")
    assert status == 2 and body["ok"] is False and body["error"]["source"] == "kafka"

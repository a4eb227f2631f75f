"""What pass 1 costs PostgreSQL, and the lease it keeps without asking PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg
import pytest

from services.domain.rail import RailOutcome
from services.relay.dispatch import Dispatcher
from services.relay.metrics import create_metrics
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_relay_dispatch import FAST, ScriptedRail, accept, state

pytestmark = pytest.mark.integration


class Statements:
    """The statements a pool's connections ran, and which of them ran outside a transaction."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.alone: list[str] = []  # each its own transaction

    async def watch(self, conn: asyncpg.Connection) -> None:
        reset = conn.get_reset_query()

        def log(q: asyncpg.connection.LoggedQuery) -> None:
            if q.query == reset:  # the pool's own, on release; the relay's pool skips it
                return
            self.ran.append(q.query)
            if q.query not in ("BEGIN;", "COMMIT;") and not conn.is_in_transaction():
                self.alone.append(q.query)

        conn.add_query_logger(log)


@pytest.fixture(scope="module")
async def watched(infra: Servers) -> AsyncIterator[tuple[asyncpg.Pool, Statements]]:
    statements = Statements()
    async with scratch_database(infra.database_url, "settle_dispatch_costs_") as url:
        pool = await asyncpg.create_pool(
            asyncpg_dsn(url), min_size=1, max_size=6, init=statements.watch
        )
        yield pool, statements
        await pool.close()


async def test_pass_1_of_a_batch_is_two_transactions_and_nothing_besides(
    watched: tuple[asyncpg.Pool, Statements],
) -> None:
    pool, statements = watched
    sids = [await accept(pool) for _ in range(3)]
    rail = ScriptedRail([])
    statements.ran.clear()
    statements.alone.clear()
    await Dispatcher(pool, rail, create_metrics(), unique("w"), True, FAST).dispatch_many(sids)
    ran, alone = list(statements.ran), list(statements.alone)
    assert [(await state(pool, sid))[:2] for sid in sids] == [("submitted", "transferred")] * 3
    # The claim (with its move to dispatching) and the record (with its move to submitted).
    assert ran.count("BEGIN;") == 2
    assert alone == []


async def test_a_claim_whose_lease_leaves_no_time_for_a_call_is_not_sent(
    watched: tuple[asyncpg.Pool, Statements],
) -> None:
    pool, _ = watched
    sid, rail = await accept(pool), ScriptedRail([RailOutcome.ACCEPTED])
    policy = replace(FAST, lease_seconds=5.0, call_seconds=5.0)
    d = Dispatcher(pool, rail, create_metrics(), unique("w"), True, policy)
    await d.dispatch_many([sid])
    assert rail.sends == 0
    assert (await state(pool, sid))[:2] == ("dispatching", "processing")  # pass 2's, later
    assert (
        d.metrics.registry.get_sample_value("settle_relay_fence_rejections_total", {"rail": "sim"})
        == 1
    )

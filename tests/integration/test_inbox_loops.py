"""The apply loops of a running inbox on the real PostgreSQL: idle, only one of them polls;
rows left to them (here stored by a process that never applied them) are all applied, and a
backlog larger than a batch brings the sleeping loops in."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime

import asyncpg
import pytest

from services.domain.settlement import SettlementStatus as S
from services.inbox.metrics import create_metrics
from services.inbox.store import StoredEvent, claim_due_many
from services.inbox.worker import InboxWorker, RetryPolicy
from tests.integration.inbox_support import Inbox, pool, rail_event, settlement, status_of
from tests.waiting import eventually

pytestmark = pytest.mark.integration
__all__ = ["pool"]
LOOPS = 4
BATCH = 5


async def test_idle_loops_poll_once_and_a_backlog_wakes_them_all(pool: asyncpg.Pool) -> None:
    claims: list[tuple[asyncio.Task[object] | None, int]] = []
    real = claim_due_many

    async def spy(conn: asyncpg.Connection, now: datetime, limit: int) -> list[StoredEvent]:
        found = await real(conn, now, limit)
        claims.append((asyncio.current_task(), len(found)))
        return found

    inbox = Inbox(pool, as_stored=False)  # rows stay received, as a process that died leaves them
    worker = InboxWorker(
        pool,
        create_metrics(),
        RetryPolicy(3, 1.0, 60.0),
        clock=inbox.clock,
        batch_size=BATCH,
        claim=spy,
    )
    running = asyncio.create_task(worker.run(LOOPS))
    try:
        await asyncio.sleep(1.2)  # the window idle polling is measured over
        # Each loop looks once as it starts; then only the first polls, twice a second.
        assert len(claims) <= LOOPS + 3, claims
        claims.clear()

        made = [
            (await settlement(pool, S.DISPATCHING), f"tr_{uuid.uuid4().hex}") for _ in range(40)
        ]
        answers = await asyncio.gather(
            *(inbox.post(rail_event("transfer.created", obj, sid)) for sid, obj in made)
        )
        assert [a.status_code for a in answers] == [200] * len(made)

        async def all_paid() -> bool:
            return [await status_of(pool, sid) for sid, _ in made] == ["paid"] * len(made)

        await eventually(all_paid, 10, "every settlement paid")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    busy = {task for task, found in claims if found}
    assert len(busy) >= 2, "a backlog of several batches was applied by one loop alone"

"""Following a chaos run's batch in PostgreSQL: its settlements per status (summed over the
rails), until every one is final, and how many were booked."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from tools.run.demo import FINAL, statuses_over_rails
from tools.run.submit import Batch

POLL_S = 1.0

BOOKED = """
SELECT count(*) AS n, count(DISTINCT reference) AS distinct_refs FROM settlements
 WHERE tenant = $1 AND reference LIKE $2
"""


async def settle(settings: Settings, batch: Batch, timeout_s: float, say: Any) -> None:
    """Poll until every settlement of the batch is final, or `timeout_s` passes."""
    conn = await asyncpg.connect(libpq_dsn(settings.database_url))
    try:
        deadline, shown = time.monotonic() + timeout_s, 0.0
        while time.monotonic() < deadline:
            statuses = await statuses_over_rails(conn, batch)
            final = sum(statuses.get(s, 0) for s in FINAL)
            if time.monotonic() - shown >= 10:
                say(f"settling: {final}/{batch.count} final; {statuses}")
                shown = time.monotonic()
            if final >= batch.count:
                return
            await asyncio.sleep(POLL_S)
    finally:
        await conn.close()


async def outcome(settings: Settings, batch: Batch) -> tuple[dict[str, int], dict[str, int]]:
    conn = await asyncpg.connect(libpq_dsn(settings.database_url))
    try:
        row = await conn.fetchrow(BOOKED, batch.tenant, batch.reference_pattern)
        assert row is not None
        booked = {"rows": int(row["n"]), "distinct_references": int(row["distinct_refs"])}
        return await statuses_over_rails(conn, batch), booked
    finally:
        await conn.close()

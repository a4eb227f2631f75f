"""The reconciler keeps the history's monthly partitions created a year ahead: at start, then
once a day, so a write never meets a month without one while the service runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.postgres.history_months import HISTORY_TABLES, MONTHS_AHEAD
from tests.integration.check_support import World, template
from tests.integration.test_reconciler_service import reconciler, world

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]


def farthest() -> list[str]:
    now = datetime.now(UTC)
    months = now.year * 12 + now.month - 1 + MONTHS_AHEAD
    return [f"{t}_y{months // 12}m{months % 12 + 1:02d}" for t in HISTORY_TABLES]


async def attached(world: World, names: list[str]) -> int:
    count: int = await world.pool.fetchval(
        "SELECT count(*) FROM pg_inherits WHERE inhrelid::regclass::text = ANY($1::text[])",
        names,
    )
    return count


async def test_a_round_creates_the_missing_months_at_start_and_then_daily(world: World) -> None:
    now = [datetime.now(UTC)]
    service = await reconciler(world, clock=lambda: now[0])
    try:
        for name in farthest():
            await world.pool.execute(f"DROP TABLE {name}")
        assert await service.reconciler.round()
        assert await attached(world, farthest()) == len(HISTORY_TABLES)

        for name in farthest():
            await world.pool.execute(f"DROP TABLE {name}")
        now[0] += timedelta(hours=23)
        assert await service.reconciler.round()
        assert await attached(world, farthest()) == 0  # ensured less than a day ago
        now[0] += timedelta(hours=2)
        assert await service.reconciler.round()
        assert await attached(world, farthest()) == len(HISTORY_TABLES)
    finally:
        await service.aclose()

"""The funnel's two settlement metrics on the real PostgreSQL: a settlement paid through the
inbox, or healed to paid by the reconciler, is observed once in
settle_settlement_accepted_to_paid_seconds from its acceptance; and the reconciler's
settle_settlement_oldest_submitted_seconds ages with a settlement left `submitted`, and falls
to 0 once it has an outcome."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from services.domain.settlement import SettlementStatus as S
from tests.integration.check_support import World, template
from tests.integration.inbox_support import T0, Inbox, pool, rail_event, settlement, status_of
from tests.integration.test_reconciler_service import reconciler, sample, world
from tests.unit.test_metrics_endpoints import Samples, scrape

pytestmark = pytest.mark.integration
__all__ = ["pool", "template", "world"]

PAID_AFTER = "settle_settlement_accepted_to_paid_seconds"
OLDEST = "settle_settlement_oldest_submitted_seconds"


def oldest(samples: Samples) -> dict[tuple[tuple[str, str], ...], float]:
    """The oldest submitted age of each (rail, method), by its labels."""
    return {labels: value for (name, labels), value in samples.items() if name == OLDEST}


async def accepted_ago(pool: asyncpg.Pool, sid: str, at: datetime) -> None:
    """Date the settlement's acceptance at `at`, so the test knows how long it waited."""
    await pool.execute("UPDATE settlements SET created_at = $2 WHERE id = $1", uuid.UUID(sid), at)


async def test_a_settlement_paid_by_a_webhook_is_observed_once_from_its_acceptance(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    registry = inbox.metrics.registry
    paid, failed = await settlement(pool, S.DISPATCHING), await settlement(pool, S.DISPATCHING)
    await accepted_ago(pool, paid, T0 - timedelta(seconds=90))
    await accepted_ago(pool, failed, T0 - timedelta(seconds=40))
    obj = f"tr_{uuid.uuid4().hex}"

    await inbox.deliver(rail_event("transfer.created", obj, paid))
    assert await status_of(pool, paid) == "paid"
    assert registry.get_sample_value(f"{PAID_AFTER}_count") == 1
    assert registry.get_sample_value(f"{PAID_AFTER}_sum") == 90
    assert registry.get_sample_value(f"{PAID_AFTER}_bucket", {"le": "60.0"}) == 0
    assert registry.get_sample_value(f"{PAID_AFTER}_bucket", {"le": "300.0"}) == 1

    # The same change told again moves nothing, and a failure is no payment: neither counts.
    await inbox.deliver(rail_event("transfer.created", obj, paid))
    await inbox.deliver(rail_event("payout.failed", f"po_{uuid.uuid4().hex}", failed))
    assert await status_of(pool, failed) == "failed"
    assert registry.get_sample_value(f"{PAID_AFTER}_count") == 1


async def test_the_oldest_submitted_gauge_ages_with_a_settlement_left_submitted(
    world: World,
) -> None:
    submitted_at = datetime.now(UTC) - timedelta(hours=3)
    await world.pool.execute(
        "UPDATE settlements SET updated_at = $2 WHERE id = $1",
        uuid.UUID(world.review),
        submitted_at,
    )
    service = await reconciler(world)
    try:
        await service.reconciler.refresh()
        ages = oldest(await scrape(service.app))
        (key,) = [labels for labels, value in ages.items() if value]  # its rail and method
        assert dict(key)["method"] in ("transfer", "payout"), key
        age = ages[key]
        assert 3 * 3600 <= age <= (datetime.now(UTC) - submitted_at).total_seconds()

        await world.move(world.review, S.PAID)
        await service.reconciler.refresh()
        assert set(oldest(await scrape(service.app)).values()) == {0}
    finally:
        await service.aclose()


async def test_a_drift_the_reconciler_heals_to_paid_is_observed_from_its_acceptance(
    world: World,
) -> None:
    # The rail made the transfer (paid, for a transfer) but its webhook never came: with no
    # grace, the run finds the drift and heals the settlement to paid from the rail's proof.
    accepted = datetime.now(UTC) - timedelta(hours=2)
    await accepted_ago(world.pool, world.review, accepted)
    service = await reconciler(world, SETTLE_RECONCILE_GRACE_SECONDS="0")
    try:
        # The intraday run heals it. (Dated back past midnight, it also makes yesterday's
        # end of day expect the rail's objects of that day, which this rail made today.)
        await service.reconciler.round()
        healed_by = datetime.now(UTC)
        samples = await scrape(service.app)
    finally:
        await service.aclose()
    assert await status_of(world.pool, world.review) == "paid"
    assert sample(samples, "settle_reconcile_healed_total") == 1
    assert sample(samples, f"{PAID_AFTER}_count") == 1
    assert (
        2 * 3600 <= sample(samples, f"{PAID_AFTER}_sum") <= (healed_by - accepted).total_seconds()
    )
    assert set(oldest(samples).values()) == {0}

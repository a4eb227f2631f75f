"""The month a row is filed under (its partition's lower bound) is the calendar month in UTC,
whatever zone its time is given in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from services.adapters.postgres.history_months import month_start
from services.inbox.store import REDELIVERY_HORIZON


def test_a_time_given_in_another_zone_is_filed_under_its_utc_month() -> None:
    paris_summer = timezone(timedelta(hours=2))
    assert month_start(datetime(2026, 4, 1, 1, 30, tzinfo=paris_summer)) == datetime(
        2026, 3, 1, tzinfo=UTC
    )
    assert month_start(datetime(2026, 3, 31, 23, 59, 59, 999999, tzinfo=UTC)) == datetime(
        2026, 3, 1, tzinfo=UTC
    )
    assert month_start(datetime(2026, 12, 15, tzinfo=UTC)) == datetime(2026, 12, 1, tzinfo=UTC)


def test_the_redelivery_horizon_covers_the_days_stripe_keeps_an_event() -> None:
    # Stripe keeps an event, and so may send it again, for 30 days after it created it.
    assert timedelta(days=30) < REDELIVERY_HORIZON

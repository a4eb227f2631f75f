"""The reconciler's timing without a clock or a database: which end-of-day run is due, once
per closed UTC day; which items a re-check takes at a given time (each age crossed once); the
window a re-check is recorded under; the settings that set them."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from services.apps.reconciler import schedule_of
from services.domain.errors import ConfigError
from services.domain.reconciliation import RunKind
from services.platform.settings import load_settings
from services.reconcile.schedule import (
    CATCH_UP_DAYS,
    end_of_day_due,
    is_recheck_due,
    recheck_bounds,
    recheck_window,
)

HOUR, DAY = 3600, 86400
SEED_AGES = (HOUR, DAY, 7 * DAY, 30 * DAY)
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_first_end_of_day_due_is_yesterdays() -> None:
    now = datetime(2026, 11, 26, 0, 0, 1, tzinfo=UTC)
    assert end_of_day_due(now, None) == date(2026, 11, 25)


def test_a_closed_day_is_due_once_and_not_again_once_completed() -> None:
    just_closed = datetime(2026, 11, 26, 0, 0, tzinfo=UTC)
    assert end_of_day_due(just_closed, date(2026, 11, 24)) == date(2026, 11, 25)
    assert end_of_day_due(just_closed, date(2026, 11, 25)) is None
    # All day long after it completed, and until the next midnight, nothing more is due.
    assert (
        end_of_day_due(datetime(2026, 11, 26, 23, 59, 59, tzinfo=UTC), date(2026, 11, 25)) is None
    )


def test_the_day_still_going_on_is_never_due() -> None:
    late = datetime(2026, 11, 26, 23, 59, 59, 999999, tzinfo=UTC)
    assert end_of_day_due(late, date(2026, 11, 25)) is None
    assert end_of_day_due(late, date(2026, 11, 26)) is None


def test_days_missed_are_caught_up_oldest_first_within_the_catch_up_limit() -> None:
    now = datetime(2026, 11, 26, 6, 0, tzinfo=UTC)
    assert end_of_day_due(now, date(2026, 11, 22)) == date(2026, 11, 23)
    oldest = date(2026, 11, 25) - timedelta(days=CATCH_UP_DAYS - 1)
    assert end_of_day_due(now, date(2026, 1, 1)) == oldest


def test_an_end_of_day_due_is_read_in_utc() -> None:
    # 00:30 in UTC+2 is still 22:30 of the day before in UTC: that day has not closed.
    now = datetime(2026, 11, 26, 0, 30, tzinfo=timezone(timedelta(hours=2)))
    assert end_of_day_due(now, date(2026, 11, 24)) is None


@pytest.mark.parametrize(
    ("last", "now", "due"),
    [
        (at(HOUR - 300), at(HOUR - 1), False),  # not an hour old yet
        (at(HOUR - 300), at(HOUR), True),  # T+1h reached at now
        (at(HOUR), at(HOUR + 300), False),  # T+1h was taken by the re-check at `last`
        (at(HOUR + 1), at(DAY - 1), False),  # between T+1h and T+1d
        (at(DAY - 1), at(DAY), True),  # T+1d
        (at(7 * DAY - 60), at(7 * DAY + 60), True),  # T+7d
        (at(30 * DAY), at(31 * DAY), False),  # after the last age: never again
        (None, at(HOUR - 1), False),  # no re-check yet: still too young
        (None, at(5 * DAY), True),  # no re-check yet: an age already passed
    ],
)
def test_an_item_is_due_when_a_re_check_age_falls_after_the_last_re_check(
    last: datetime | None, now: datetime, due: bool
) -> None:
    assert is_recheck_due(T0, last, now, SEED_AGES) is due


def test_each_age_is_crossed_once_however_often_the_re_checks_run() -> None:
    ticks = [at(s) for s in range(0, 40 * DAY, 1800)]  # a re-check every half hour for 40 days
    due_at = [
        now for last, now in itertools.pairwise(ticks) if is_recheck_due(T0, last, now, SEED_AGES)
    ]
    assert due_at == [at(HOUR), at(DAY), at(7 * DAY), at(30 * DAY)]


def test_ages_in_seconds_as_tests_use_them() -> None:
    assert not is_recheck_due(T0, at(0), at(1), (2, 5))
    assert is_recheck_due(T0, at(1), at(2), (2, 5))
    assert not is_recheck_due(T0, at(2), at(4), (2, 5))
    assert is_recheck_due(T0, at(4), at(6), (2, 5))


def test_bounds_leave_out_ages_nothing_can_have_crossed() -> None:
    assert recheck_bounds(at(10), at(10), SEED_AGES) == ()
    (only,) = recheck_bounds(at(0), at(60), (60,))
    assert (only.after, only.until) == (at(-60), at(0))


def test_a_re_check_is_recorded_from_the_last_one_to_now() -> None:
    assert recheck_window(at(0), at(60), SEED_AGES) == (RunKind.RECHECK, at(0), at(60))
    first = recheck_window(None, at(60), SEED_AGES)
    assert first.start == at(60 - HOUR) and first.end == at(60)
    assert first.start < first.end  # the database refuses an empty window


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        end_of_day_due(datetime(2026, 11, 26), None)


def test_settings_read_the_interval_and_ages_with_or_without_units() -> None:
    settings = load_settings(
        {"SETTLE_RECONCILE_INTERVAL": "0.5", "SETTLE_RECONCILE_RECHECK_AGES": "2, 5s, 1m"}
    )
    assert settings.reconcile_interval_seconds == 0.5
    assert settings.reconcile_recheck_ages == (2, 5, 60)
    assert load_settings({}).reconcile_recheck_ages == SEED_AGES


@pytest.mark.parametrize("ages", ["1d,1h", "1h,,1d", "soon", "0"])
def test_settings_refuse_ages_that_do_not_grow_or_read(ages: str) -> None:
    with pytest.raises(ConfigError, match="SETTLE_RECONCILE_RECHECK_AGES"):
        load_settings({"SETTLE_RECONCILE_RECHECK_AGES": ages})


def test_the_overlap_an_intraday_run_reads_again_is_a_setting() -> None:
    assert schedule_of(load_settings({})).overlap == 300.0
    plan = schedule_of(load_settings({"SETTLE_RECONCILE_OVERLAP_SECONDS": "30"}))
    assert plan.overlap == 30.0
    with pytest.raises(ConfigError, match="SETTLE_RECONCILE_OVERLAP_SECONDS"):
        load_settings({"SETTLE_RECONCILE_OVERLAP_SECONDS": "-1"})

"""Which idempotency records the cleanup may delete: only those whose deletion changes no answer
and whose settlement is final."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.errors import ConfigError
from services.domain.settlement import SettlementStatus
from services.ledger.idempotency import Decision, KeyState, StoredKey, decide
from services.ledger.key_retention import (
    FINAL_STATUSES,
    KeyRetention,
    deletable,
    key_retention,
)
from services.platform.settings import load_settings

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)
MS = timedelta(milliseconds=1)
POLICY = key_retention(replay=DAY, tombstone=DAY, retention=2 * DAY)
_S = SettlementStatus


def may_go(
    age: timedelta,
    settlement: SettlementStatus | None = _S.PAID,
    state: KeyState = KeyState.COMPLETED,
) -> bool:
    return deletable(POLICY, state, T0, settlement, T0 + age)


def test_a_record_stays_until_its_retention_has_passed() -> None:
    assert not may_go(timedelta(0))
    assert not may_go(DAY)  # tombstoned: it answers 410, which deleting would turn into a run
    assert not may_go(2 * DAY - MS)
    assert may_go(2 * DAY)
    assert may_go(30 * DAY)


def test_an_in_flight_record_stays_whatever_its_age() -> None:
    assert not may_go(30 * DAY, settlement=None, state=KeyState.IN_FLIGHT)
    assert not may_go(30 * DAY, settlement=_S.PAID, state=KeyState.IN_FLIGHT)


@pytest.mark.parametrize(
    "status", [_S.ACCEPTED, _S.DISPATCHING, _S.SUBMITTED, _S.NEEDS_REVIEW], ids=str
)
def test_a_record_stays_while_its_settlement_is_not_final(status: SettlementStatus) -> None:
    assert not may_go(30 * DAY, settlement=status)


@pytest.mark.parametrize("status", [_S.PAID, _S.PARTLY_REVERSED, _S.FAILED, _S.REVERSED], ids=str)
def test_a_record_of_a_final_settlement_goes(status: SettlementStatus) -> None:
    assert may_go(2 * DAY, settlement=status)


def test_a_refused_request_with_no_settlement_goes_with_its_age() -> None:
    assert not may_go(2 * DAY - MS, settlement=None)
    assert may_go(2 * DAY, settlement=None)


def test_the_sql_list_of_final_statuses_is_the_final_statuses() -> None:
    assert set(FINAL_STATUSES) == {"paid", "partly_reversed", "failed", "reversed"}


def test_a_retention_shorter_than_replay_plus_tombstone_is_refused() -> None:
    with pytest.raises(ValueError, match="shorter than replay"):
        key_retention(replay=DAY, tombstone=DAY, retention=2 * DAY - MS)
    assert key_retention(replay=DAY, tombstone=DAY, retention=2 * DAY).retention == 2 * DAY


@pytest.mark.parametrize("batch", [0, -1, 50_001])
def test_a_batch_outside_its_bounds_is_refused(batch: int) -> None:
    with pytest.raises(ValueError, match="batch"):
        KeyRetention(2 * DAY, batch)


@given(
    replay=st.integers(1, 10_000),
    tombstone=st.integers(0, 10_000),
    extra=st.integers(0, 10_000),
    age=st.integers(0, 40_000),
    in_flight=st.booleans(),
    same_fingerprint=st.booleans(),
)
def test_deleting_a_deletable_record_changes_no_answer(
    replay: int, tombstone: int, extra: int, age: int, in_flight: bool, same_fingerprint: bool
) -> None:
    r, t = timedelta(seconds=replay), timedelta(seconds=tombstone)
    policy = key_retention(r, t, r + t + timedelta(seconds=extra))
    state = KeyState.IN_FLIGHT if in_flight else KeyState.COMPLETED
    stored = StoredKey(b"\x01" * 32, state, T0, T0 + timedelta(seconds=30) if in_flight else None)
    now = T0 + timedelta(seconds=age)
    if deletable(policy, state, T0, None, now):
        fingerprint = b"\x01" * 32 if same_fingerprint else b"\x02" * 32
        assert decide(stored, fingerprint, now, r, t) is decide(None, fingerprint, now, r, t)
        assert decide(None, fingerprint, now, r, t) is Decision.EXECUTE


def test_the_retention_setting_defaults_to_48_hours_and_takes_fractions() -> None:
    assert load_settings({}).idempotency_retention_hours == 48
    short = load_settings(
        {
            "SETTLE_IDEMPOTENCY_REPLAY_SECONDS": "1",
            "SETTLE_IDEMPOTENCY_TOMBSTONE_SECONDS": "2",
            "SETTLE_IDEMPOTENCY_RETENTION_HOURS": str(3 / 3600),
        }
    )
    assert timedelta(hours=short.idempotency_retention_hours) == timedelta(seconds=3)


def test_a_retention_setting_shorter_than_the_windows_names_its_variable() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings({"SETTLE_IDEMPOTENCY_RETENTION_HOURS": "47"})
    assert "SETTLE_IDEMPOTENCY_RETENTION_HOURS" in str(refused.value)
    assert "replay + tombstone" in str(refused.value)

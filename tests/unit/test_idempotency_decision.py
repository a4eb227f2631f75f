"""The idempotency decision: every branch, at the edges of the replay and tombstone windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.ledger.idempotency import REFUSALS, Decision, KeyState, StoredKey, decide

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
REPLAY = timedelta(hours=24)
TOMBSTONE = timedelta(hours=24)
MS = timedelta(milliseconds=1)
FP = b"\x01" * 32
OTHER = b"\x02" * 32


def completed() -> StoredKey:
    return StoredKey(FP, KeyState.COMPLETED, T0, None)


def in_flight(lease: timedelta) -> StoredKey:
    return StoredKey(FP, KeyState.IN_FLIGHT, T0, T0 + lease)


def at(age: timedelta, stored: StoredKey | None, fingerprint: bytes = FP) -> Decision:
    return decide(stored, fingerprint, T0 + age, REPLAY, TOMBSTONE)


def test_a_key_never_seen_executes() -> None:
    assert at(timedelta(0), None) is Decision.EXECUTE


def test_a_completed_key_with_the_same_fingerprint_replays_until_the_window_ends() -> None:
    assert at(timedelta(0), completed()) is Decision.REPLAY
    assert at(REPLAY - MS, completed()) is Decision.REPLAY


def test_a_different_fingerprint_is_a_mismatch_inside_the_window() -> None:
    assert at(timedelta(0), completed(), OTHER) is Decision.MISMATCH
    assert at(REPLAY - MS, completed(), OTHER) is Decision.MISMATCH


def test_a_different_fingerprint_is_a_mismatch_even_while_in_flight() -> None:
    assert at(timedelta(seconds=1), in_flight(timedelta(seconds=30)), OTHER) is Decision.MISMATCH
    assert at(timedelta(minutes=5), in_flight(timedelta(seconds=30)), OTHER) is Decision.MISMATCH


def test_an_in_flight_key_is_in_use_while_its_lease_holds() -> None:
    lease = timedelta(seconds=30)
    assert at(timedelta(0), in_flight(lease)) is Decision.IN_USE
    assert at(lease - MS, in_flight(lease)) is Decision.IN_USE


def test_an_in_flight_key_whose_lease_ran_out_is_taken_over() -> None:
    lease = timedelta(seconds=30)
    assert at(lease, in_flight(lease)) is Decision.EXECUTE
    assert at(lease + MS, in_flight(lease)) is Decision.EXECUTE


def test_an_in_flight_key_without_a_lease_is_taken_over() -> None:
    assert at(MS, StoredKey(FP, KeyState.IN_FLIGHT, T0, None)) is Decision.EXECUTE


@pytest.mark.parametrize("fingerprint", [FP, OTHER])
@pytest.mark.parametrize("stored", [completed(), in_flight(timedelta(days=3))])
def test_past_the_replay_window_the_key_is_expired_whatever_the_request(
    stored: StoredKey, fingerprint: bytes
) -> None:
    assert at(REPLAY, stored, fingerprint) is Decision.EXPIRED
    assert at(REPLAY + TOMBSTONE - MS, stored, fingerprint) is Decision.EXPIRED


@pytest.mark.parametrize("fingerprint", [FP, OTHER])
@pytest.mark.parametrize("stored", [completed(), in_flight(timedelta(days=3))])
def test_past_the_tombstone_window_the_key_starts_a_new_request(
    stored: StoredKey, fingerprint: bytes
) -> None:
    assert at(REPLAY + TOMBSTONE, stored, fingerprint) is Decision.EXECUTE
    assert at(REPLAY + TOMBSTONE + timedelta(days=365), stored, fingerprint) is Decision.EXECUTE


def test_without_a_tombstone_window_a_key_is_new_again_as_soon_as_replay_ends() -> None:
    decision = decide(completed(), OTHER, T0 + REPLAY, REPLAY, timedelta(0))
    assert decision is Decision.EXECUTE
    assert decide(completed(), OTHER, T0 + REPLAY - MS, REPLAY, timedelta(0)) is Decision.MISMATCH


def test_a_state_read_back_as_a_string_still_replays() -> None:
    stored = StoredKey(FP, KeyState("completed"), T0, None)
    assert at(timedelta(0), stored) is Decision.REPLAY


@pytest.mark.parametrize(
    ("replay", "tombstone"), [(timedelta(0), TOMBSTONE), (REPLAY, timedelta(seconds=-1))]
)
def test_windows_that_make_no_sense_are_refused(replay: timedelta, tombstone: timedelta) -> None:
    with pytest.raises(ValueError):
        decide(None, FP, T0, replay, tombstone)


def test_each_refusal_maps_to_the_status_and_code_the_spec_names() -> None:
    assert REFUSALS == {
        Decision.MISMATCH: (422, "idempotency_key_reused"),
        Decision.IN_USE: (409, "idempotency_key_in_use"),
        Decision.EXPIRED: (410, "idempotency_key_expired"),
    }

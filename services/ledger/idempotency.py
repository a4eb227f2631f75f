"""What to do with a request given the idempotency record stored under its key: a pure decision.

    record age                          what the key means
    [0, replay)                         the stored request: replay, reject or wait
    [replay, replay + tombstone)        expired: 410, whatever the fingerprint
    [replay + tombstone, ...)           forgotten: the key starts a new request

Inside the replay window a different fingerprint is always a mismatch (422, nothing runs), even
while the first request is in flight. An in-flight record whose lease ran out belongs to a
holder that crashed or stalled; the next request takes it over, and the caller bumps the fence
so the old holder's late write is rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum


class KeyState(StrEnum):
    """The stored record's state; the values are `idempotency_keys.state`."""

    IN_FLIGHT = "in_flight"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True)
class StoredKey:
    """The parts of an idempotency record the decision reads."""

    fingerprint: bytes  # SHA-256 of the request that took the key
    state: KeyState
    created_at: datetime  # when the key was first taken; the windows count from here
    locked_until: datetime | None  # the in-flight holder's lease; None once completed


class Decision(StrEnum):
    """What the caller does next."""

    EXECUTE = "execute"  # run the request; take the key (over, if a record exists)
    REPLAY = "replay"  # send the stored status and body bytes again
    MISMATCH = "mismatch"  # 422 idempotency_key_reused; nothing runs
    IN_USE = "in_use"  # 409 idempotency_key_in_use, after a bounded wait
    EXPIRED = "expired"  # 410 idempotency_key_expired


# The HTTP status and `error.code` of each refusal; a Kafka command dead-letters with the code.
REFUSALS: Mapping[Decision, tuple[int, str]] = {
    Decision.MISMATCH: (422, "idempotency_key_reused"),
    Decision.IN_USE: (409, "idempotency_key_in_use"),
    Decision.EXPIRED: (410, "idempotency_key_expired"),
}


def decide(
    stored: StoredKey | None,
    fingerprint: bytes,
    now: datetime,
    replay: timedelta,
    tombstone: timedelta,
) -> Decision:
    """The decision for a request with `fingerprint` at `now`, given the record under its key."""
    if replay <= timedelta(0) or tombstone < timedelta(0):
        raise ValueError("replay must be positive and tombstone not negative")
    if stored is None:
        return Decision.EXECUTE
    age = now - stored.created_at
    if age >= replay + tombstone:
        return Decision.EXECUTE
    if age >= replay:
        return Decision.EXPIRED
    if stored.fingerprint != fingerprint:
        return Decision.MISMATCH
    if stored.state == KeyState.COMPLETED:
        return Decision.REPLAY
    if stored.locked_until is not None and stored.locked_until > now:
        return Decision.IN_USE
    return Decision.EXECUTE

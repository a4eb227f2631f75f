"""The simulator's idempotency store: first answer per key, kept for a window, then forgotten."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from railsim.errors import ApiError
from railsim.objects import new_id
from railsim.replies import Reply, error_reply

# Stripe's answer to a key used again with other parameters ({key}: the key)
KEY_REUSED = (
    "Keys for idempotent requests can only be used with the same parameters they were first "
    "used with. Try using a key other than '{key}' if you meant to execute a different request."
)


@dataclass(frozen=True, slots=True)
class Stored:
    """The first answer given under a key, and what the request looked like."""

    fingerprint: str
    reply: Reply
    stored_at: float


def fingerprint(method: str, path: str, pairs: Iterable[tuple[str, str]]) -> str:
    """A digest of the request that does not depend on the order of its form fields."""
    canonical = orjson.dumps([method.upper(), path, sorted(pairs)])
    return hashlib.sha256(canonical).hexdigest()


class IdempotencyStore:
    """Keys to first answers; a key older than the window is forgotten, as Stripe prunes them."""

    def __init__(self, window_seconds: float) -> None:
        if window_seconds < 0:
            raise ValueError("window_seconds must be >= 0 (0 ignores keys entirely)")
        self.window_seconds = window_seconds
        self._stored: dict[str, Stored] = {}

    @property
    def enabled(self) -> bool:
        """False for a rail that ignores idempotency keys."""
        return self.window_seconds > 0

    def find(self, key: str, now: float) -> Stored | None:
        """The answer stored under `key` within the window, if any."""
        self._forget_expired(now)
        return self._stored.get(key)

    def remember(self, key: str, stored: Stored) -> None:
        """Keep `stored` as the answer for `key`."""
        self._stored[key] = stored

    def clear(self) -> None:
        """Forget every key."""
        self._stored.clear()

    def _forget_expired(self, now: float) -> None:
        # Insertion order is time order, so the oldest entries sit at the front.
        while self._stored:
            key, oldest = next(iter(self._stored.items()))
            if now - oldest.stored_at < self.window_seconds:
                return
            del self._stored[key]


def replay(stored: Stored, fp: str, key: str) -> Reply:
    """The stored answer again for the same request under `key`; a request that differs
    (another fingerprint) gets Stripe's idempotency_error instead."""
    if stored.fingerprint != fp:
        mismatch = ApiError(KEY_REUSED.format(key=key), type_="idempotency_error")
        return error_reply(mismatch, new_id("req"))
    return dataclasses.replace(stored.reply, replayed=True)

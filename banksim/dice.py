"""Seeded dice: each decision is a pure function of (seed, what is decided, about whom).

railsim counts its rolls, because a retried Stripe call may meet a fault again; the bank
decides each transaction's fate once, when its file is taken, and keeps the answer, so a roll
needs no memory: the same seed and EndToEndId decide the same in every run and after every
restart, however files interleave.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping


def roll(seed: int, name: str, subject: str) -> float:
    """A number in [0, 1) fixed by `seed`, the decision's `name` and its `subject`."""
    digest = hashlib.sha256(f"{seed}\x1f{name}\x1f{subject}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def chance(seed: int, name: str, subject: str, probability: float) -> bool:
    """Whether the decision `name` comes out yes for `subject`, given its probability."""
    return probability > 0 and roll(seed, name, subject) < probability


def pick(seed: int, name: str, subject: str, rates: Mapping[str, float]) -> str | None:
    """One of the codes of `rates` (code -> probability) for `subject`, or None for none.

    The codes share [0, 1) in code order, each a slice as wide as its rate; the rest of the
    interval picks none.
    """
    if not rates:
        return None
    point = roll(seed, name, subject)
    edge = 0.0
    for code in sorted(rates):
        edge += rates[code]
        if point < edge:
            return code
    return None


def between(seed: int, name: str, subject: str, low: int, high: int) -> int:
    """An integer in [low, high] for `subject`."""
    return low + int(roll(seed, name, subject) * (high - low + 1))

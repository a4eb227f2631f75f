"""The one clock: UTC wall time, and the type of a clock that a test can move on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

# What a component that tells time is given: utc_now, or a test's own.
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)

"""The one way a test waits: for a condition, never for a fixed time."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

POLL_SECONDS = 0.02


async def eventually(
    condition: Callable[[], object],
    within: float = 10.0,
    what: str = "the condition",
    every: float = POLL_SECONDS,
) -> Any:
    """Poll `condition()` (a plain or an async function) every `every` seconds until it gives
    a true value, and return that value; fail the test after `within` seconds. A condition
    that also acts (sweeps, say) sets its own pace with `every`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() >= deadline:
            raise AssertionError(f"{what} did not hold within {within} s (last: {value!r})")
        await asyncio.sleep(every)


def eventually_blocking(
    condition: Callable[[], object], within: float = 10.0, what: str = "the condition"
) -> Any:
    """`eventually` for a test that is not a coroutine: the thread blocks between looks."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} did not hold within {within} s (last: {value!r})")
        time.sleep(POLL_SECONDS)

"""Running a service's loops: concurrent loops as one unit (the first to stop stops them
all), and a job repeated on a timer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


async def run_until_first_exits(*loops: Coroutine[Any, Any, object]) -> None:
    """Run `loops` together until one returns or fails (its error is raised); cancel the rest."""
    tasks = [asyncio.create_task(loop) for loop in loops]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def every(
    seconds: float,
    job: Callable[[], Awaitable[object]],
    what: str,
    retriable: Callable[[BaseException], bool],
) -> None:
    """Run `job` every `seconds` until cancelled; a round that failed with an error `retriable`
    says may pass is logged and the next one runs on time, any other error is raised."""
    while True:
        try:
            await job()
        except Exception as e:
            if not retriable(e):
                raise
            log.warning("%s failed, next round in %.0f s: %s", what, seconds, e)
        await asyncio.sleep(seconds)

"""Running a service's concurrent loops as one unit: the first to stop stops them all."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


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

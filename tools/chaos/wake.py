"""Relays that froze themselves at a failpoint (tools/chaos/schedule.py `self_pauses`): found,
recorded as a `self_pause` naming the point, and woken (`resume`) past their lease.

Each catch of a relay starts a new nap; a wake-up belongs to its nap only, so one that comes
due after the relay was woken otherwise (the schedule's own pause and resume, the run's final
recovery) and froze itself again never cuts the new nap short.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from tools.chaos import evidence
from tools.chaos.inject import Injector, Landing

POLL_S = 0.1
LOG_TAIL_BYTES = 8192


def frozen_at(log: Path) -> str:
    """The failpoint a child last said it stops at (its own line in its log), or "unknown"."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - LOG_TAIL_BYTES))
            tail = f.read().decode(errors="replace")
    except OSError:
        return "unknown"
    said = [
        line for line in tail.splitlines() if line.startswith("failpoint ") and ": stop" in line
    ]
    return said[-1].split()[1].rstrip(":") if said else "unknown"


class Waker:
    """Finds the relays of `points` (their SETTLE_FAILPOINTS by name) stopped by themselves
    and wakes each after `asleep()` seconds; records both through the run's injector."""

    def __init__(
        self,
        injector: Injector,
        points: dict[str, str],
        asleep: Callable[[], float],
        began: float,
    ) -> None:
        self.injector = injector
        self.points = points
        self.asleep = asleep
        self.began = began
        self._naps = dict.fromkeys(points, 0)
        self._waking: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Until cancelled; wake-ups still pending are cancelled with it."""
        supervisor = self.injector.supervisor
        try:
            while True:
                for name in self.points:
                    proc = evidence.live_process(supervisor.pid(name))
                    if proc is None or supervisor.is_paused(name):
                        continue  # down, or frozen by the schedule (which wakes it itself)
                    if evidence.stopped(proc):
                        self._caught(name, proc.pid)
                await asyncio.sleep(POLL_S)
        finally:
            for task in self._waking:
                task.cancel()

    def _caught(self, name: str, pid: int) -> None:
        supervisor = self.injector.supervisor
        supervisor.pause(name)  # marked so: the run's final recovery wakes it in any case
        self._naps[name] += 1
        seconds, point = self.asleep(), frozen_at(supervisor.log_dir / f"{name}.log")
        seen = Landing(pid, True, {"stopped_itself": True, "at": point})
        self.injector.record("self_pause", name, f"{seconds:.1f} s at {point}", self.began, seen)
        task = asyncio.create_task(self._wake(name, pid, self._naps[name], seconds))
        self._waking.add(task)
        task.add_done_callback(self._waking.discard)

    async def _wake(self, name: str, pid: int, nap: int, seconds: float) -> None:
        await asyncio.sleep(seconds)
        supervisor, record = self.injector.supervisor, self.injector.record
        if supervisor.pid(name) != pid or evidence.live_process(pid) is None:
            # Killed by the schedule while stopped (restarted already, or not yet).
            record("resume", name, "", self.began, Landing(pid, True, {"killed_meanwhile": True}))
        elif self._naps[name] != nap:
            # Woken otherwise and frozen again since: that nap has its own wake-up.
            record("resume", name, "", self.began, Landing(pid, True, {"woken_meanwhile": True}))
        else:
            record("resume", name, "", self.began, await self.injector.freeze(name, frozen=False))

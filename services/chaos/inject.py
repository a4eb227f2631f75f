"""Carrying out a fault schedule against the supervised stack and the private servers."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.chaos.infra import PrivateInfra
from services.chaos.schedule import Fault
from services.infra import kafka, postgres
from services.run.demo import set_fault_profile
from services.run.supervisor import Supervisor

RESTART_WAIT_S = 15.0


@dataclass(frozen=True)
class Injected:
    """A fault as it happened."""

    fault: Fault
    at: float  # seconds after the start when it was carried out
    took: float  # seconds the action itself took (a server start waits until it answers)
    pid: int | None  # the process it hit, where there is one

    def as_json(self) -> dict[str, Any]:
        """at, action, target, detail, planned_at, took, pid."""
        return {
            "at": round(self.at, 2),
            "action": self.fault.action,
            "target": self.fault.target,
            "detail": self.fault.detail,
            "planned_at": self.fault.at,
            "took": round(self.took, 2),
            "pid": self.pid,
        }


class Injector:
    """Runs each fault at its time; infrastructure starts do not hold back later faults."""

    def __init__(
        self,
        supervisor: Supervisor,
        infra: PrivateInfra,
        rail_url: str,
        say: Callable[[str], None],
    ) -> None:
        self.supervisor = supervisor
        self.infra = infra
        self.rail_url = rail_url
        self.say = say
        self.done: list[Injected] = []

    async def run(self, schedule: list[Fault], began: float) -> list[Injected]:
        """Carry out every fault of `schedule` at `began` + its time; what was done, in order."""
        await asyncio.gather(*(self._at(f, began) for f in schedule))
        return sorted(self.done, key=lambda i: i.at)

    async def _at(self, fault: Fault, began: float) -> None:
        await asyncio.sleep(max(0.0, began + fault.at - time.monotonic()))
        at = time.monotonic() - began
        self.say(f"[{at:6.1f} s] {fault.action} {fault.target} {fault.detail}".rstrip())
        pid = await self._do(fault)
        self.done.append(Injected(fault, at, time.monotonic() - began - at, pid))

    async def _do(self, fault: Fault) -> int | None:
        action, target, paths = fault.action, fault.target, self.infra.paths
        if action == "kill":
            # A kill that lands while the child waits for its restart would be no fault at all.
            for _ in range(int(RESTART_WAIT_S / 0.1)):
                if self.supervisor.running(target):
                    break
                await asyncio.sleep(0.1)
            pid = self.supervisor.pid(target)
            self.supervisor.kill(target, signal.SIGKILL)
            return pid
        if action == "pause":
            self.supervisor.pause(target)
            return self.supervisor.pid(target)
        if action == "resume":
            self.supervisor.resume(target)
            return self.supervisor.pid(target)
        if action == "kafka_stop":
            broker = kafka.broker_pid(paths)
            if broker is not None:
                os.kill(broker, signal.SIGKILL)  # a crash, not a clean shutdown
            return broker
        if action == "kafka_start":
            return (await asyncio.to_thread(kafka.start, paths))[1]
        if action == "postgres_stop":
            return await asyncio.to_thread(postgres.crash, paths)
        if action == "postgres_start":
            return (await asyncio.to_thread(postgres.start, paths))[1]
        if action == "rail_faults":
            await set_fault_profile(self.rail_url, fault.detail)
            return None
        raise ValueError(f"unknown fault action {action!r}")

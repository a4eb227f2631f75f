"""Carrying out a fault schedule against the supervised stack and the private servers, and
recording for each fault the evidence that it landed (tools/chaos/evidence.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import httpx
import psutil

from banksim.faults import as_json as bank_faults_json
from banksim.faults import profile as bank_profile
from railsim.faults import profile
from tools.chaos import evidence
from tools.chaos.infra import PrivateInfra
from tools.chaos.schedule import Fault
from tools.infra import kafka, postgres
from tools.infra.paths import pg_endpoint
from tools.run.demo import set_fault_profile
from tools.run.supervisor import Supervisor

RESTART_WAIT_S = 15.0
RAIL_ATTEMPTS = 3
# For a stopped or continued process to show its new state: a process busy in the kernel (a
# disk read while it starts) takes a stop only once it comes back, which a loaded machine
# can delay by seconds.
SIGNAL_WAIT_S = 15.0


class Landing(NamedTuple):
    """What a fault hit, whether its effect was seen, and what was seen."""

    pid: int | None  # the process it hit, where there is one
    landed: bool
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Injected:
    """A fault as it happened."""

    fault: Fault
    at: float  # seconds after the start when it was carried out
    took: float  # seconds the action itself took (a server start waits until it answers)
    pid: int | None  # the process it hit, where there is one
    landed: bool = False  # its effect was seen (see `evidence`)
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """at, action, target, detail, planned_at, took, pid, landed, evidence."""
        return {
            "at": round(self.at, 2),
            "action": self.fault.action,
            "target": self.fault.target,
            "detail": self.fault.detail,
            "planned_at": self.fault.at,
            "took": round(self.took, 2),
            "pid": self.pid,
            "landed": self.landed,
            "evidence": self.evidence,
        }


async def _dies(proc: psutil.Process) -> bool:
    """Whether `proc` is dead within DEATH_WAIT_S."""
    return await evidence.within(evidence.DEATH_WAIT_S, lambda: not evidence.alive(proc))


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


class Injector:
    """Runs each fault at its time; infrastructure starts do not hold back later faults."""

    def __init__(
        self,
        supervisor: Supervisor,
        infra: PrivateInfra,
        rail_url: str,
        say: Callable[[str], None],
        bank_url: str | None = None,
    ) -> None:
        self.supervisor = supervisor
        self.infra = infra
        self.rail_url = rail_url
        self.bank_url = bank_url
        self.say = say
        self.done: list[Injected] = []
        self._stopped = {"kafka": asyncio.Event(), "postgres": asyncio.Event()}
        self._broker_killed: int | None = None
        self._postmaster_before: datetime | None = None
        endpoint = pg_endpoint(infra.database_url)
        self._pg_address = f"{endpoint.host}:{endpoint.port}"

    async def run(self, schedule: list[Fault], began: float) -> list[Injected]:
        """Carry out every fault of `schedule` at `began` + its time; what was done, in order."""
        await asyncio.gather(*(self._at(f, began) for f in schedule))
        return self.carried_out()

    def carried_out(self) -> list[Injected]:
        """Every fault carried out so far, scheduled or self-inflicted, in order."""
        return sorted(self.done, key=lambda i: i.at)

    def record(self, action: str, target: str, detail: str, began: float, seen: Landing) -> None:
        """Add a fault that happened outside the schedule (a relay that froze itself)."""
        at = time.monotonic() - began
        self.say(f"[{at:6.1f} s] {action} {target} {detail}".rstrip())
        fault = Fault(round(at, 2), action, target, detail)
        self.done.append(Injected(fault, at, 0.0, seen.pid, seen.landed, seen.evidence))

    async def _at(self, fault: Fault, began: float) -> None:
        await asyncio.sleep(max(0.0, began + fault.at - time.monotonic()))
        at = time.monotonic() - began
        self.say(f"[{at:6.1f} s] {fault.action} {fault.target} {fault.detail}".rstrip())
        pid, landed, seen = await self._do(fault)
        if not landed:
            self.say(f"[{at:6.1f} s] {fault.action} {fault.target} did NOT land: {seen}")
        took = time.monotonic() - began - at
        self.done.append(Injected(fault, at, took, pid, landed, seen))

    async def _do(self, fault: Fault) -> Landing:
        action, target = fault.action, fault.target
        if action == "kill":
            return await self._kill(target)
        if action in ("pause", "resume"):
            return await self.freeze(target, frozen=action == "pause")
        if action in ("kafka_stop", "postgres_stop"):
            try:
                return await (self._kafka_stop() if target == "kafka" else self._postgres_stop())
            finally:
                self._stopped[target].set()
        if action in ("kafka_start", "postgres_start"):
            # On a loaded machine a crash can take longer than the planned outage; a start
            # begun before the stop ended would find the dying server and start nothing.
            await self._stopped[target].wait()
            return await (self._kafka_start() if target == "kafka" else self._postgres_start())
        if action == "rail_faults":
            return await self._rail_faults(fault.detail)
        if action == "bank_faults":
            return await self._bank_faults(fault.detail)
        raise ValueError(f"unknown fault action {action!r}")

    async def _running(self, target: str) -> None:
        """Wait, up to RESTART_WAIT_S, until child `target` is alive: a kill or a pause that
        lands while it waits for its restart would be no fault at all."""
        for _ in range(int(RESTART_WAIT_S / 0.1)):
            if self.supervisor.running(target):
                return
            await asyncio.sleep(0.1)

    async def _kill(self, target: str) -> Landing:
        await self._running(target)
        pid = self.supervisor.pid(target)
        proc = evidence.live_process(pid)
        self.supervisor.kill(target, signal.SIGKILL)
        dead = proc is not None and await _dies(proc)
        return Landing(pid, dead, {"alive_before": proc is not None, "dead_after": dead})

    async def freeze(self, target: str, *, frozen: bool) -> Landing:
        """SIGSTOP (`frozen`) or SIGCONT child `target`, and whether it was seen so: stopped,
        or running again (or seen to have run: a relay may freeze itself again at once)."""
        if frozen:
            await self._running(target)
        pid = self.supervisor.pid(target)
        proc = evidence.live_process(pid)
        ran = evidence.switches(proc) if proc is not None else 0
        if frozen:
            self.supervisor.pause(target)
        else:
            self.supervisor.resume(target)
        if proc is None:
            return Landing(pid, False, {"alive_before": False})
        if frozen:
            seen = await evidence.within(SIGNAL_WAIT_S, lambda: evidence.stopped(proc))
            shown = {} if seen else {"status": evidence.status(proc)}
            return Landing(pid, seen, {"alive_before": True, "stopped_after": seen, **shown})
        seen = await evidence.within(
            SIGNAL_WAIT_S, lambda: not evidence.stopped(proc) or evidence.switches(proc) != ran
        )
        return Landing(pid, seen, {"alive_before": True, "ran_after": seen})

    async def _kafka_stop(self) -> Landing:
        broker = kafka.broker_pid(self.infra.paths)
        proc = evidence.live_process(broker)
        if proc is None:
            return Landing(broker, False, {"alive_before": False})
        os.kill(proc.pid, signal.SIGKILL)  # a crash, not a clean shutdown
        dead = await _dies(proc)
        bootstrap = self.infra.bootstrap
        refused = await evidence.within(
            evidence.REFUSAL_WAIT_S, lambda: evidence.refuses(bootstrap)
        )
        self._broker_killed = proc.pid
        seen = {"alive_before": True, "dead_after": dead, "port_refused": refused}
        return Landing(proc.pid, dead and refused, seen)

    async def _kafka_start(self) -> Landing:
        started, pid = await asyncio.to_thread(kafka.start, self.infra.paths)
        answers = not evidence.refuses(self.infra.bootstrap)
        new = pid != self._broker_killed
        seen = {"started": started, "new_pid": new, "port_open": answers}
        return Landing(pid, started and new and answers, seen)

    async def _postmaster(self) -> evidence.Postmaster:
        # On a loop of its own: this one, busy with the load, can starve a connect past its
        # timeout again and again while the server answers everyone else.
        ask = evidence.postmaster_started(self.infra.database_url)
        return await asyncio.to_thread(asyncio.run, ask)

    async def _postgres_stop(self) -> Landing:
        before = await self._postmaster()
        pid = await asyncio.to_thread(postgres.crash, self.infra.paths)
        address = self._pg_address
        refused = pid is not None and await evidence.within(
            evidence.REFUSAL_WAIT_S, lambda: evidence.refuses(address)
        )
        self._postmaster_before = before.started if refused else None
        seen = {"postmaster_started": _iso(before.started), "port_refused": refused}
        if before.error:
            seen["error"] = before.error
        return Landing(pid, before.started is not None and refused, seen)

    async def _postgres_start(self) -> Landing:
        started, pid = await asyncio.to_thread(postgres.start, self.infra.paths)
        after = await self._postmaster()
        before = self._postmaster_before
        restarted = before is not None and after.started is not None and after.started > before
        seen: dict[str, Any] = {
            "started": started,
            "postmaster_started_before": _iso(before),
            "postmaster_started_after": _iso(after.started),
            "restarted": restarted,
        }
        if after.error:
            seen["error"] = after.error
        return Landing(pid, started and restarted, seen)

    async def _bank_faults(self, name: str) -> Landing:
        """The bank simulator's fault profile `name`, landed when it answers with it."""
        failures: list[str] = []
        for _ in range(RAIL_ATTEMPTS):
            try:
                await self._running("banksim")
                async with httpx.AsyncClient(base_url=self.bank_url or "", timeout=10.0) as c:
                    answer = await c.post("/_control/faults", json={"profile": name})
                    answer.raise_for_status()
                    in_force = answer.json()
            except httpx.HTTPError as e:
                failures.append(repr(e))
                continue
            wanted = bank_faults_json(bank_profile(name))
            applied = {**in_force, "seed": 0} == {**wanted, "seed": 0}
            return Landing(None, applied, {"profile": name, "in_force": applied})
        return Landing(None, False, {"profile": name, "errors": failures})

    async def _rail_faults(self, name: str) -> Landing:
        failures: list[str] = []
        # A simulator starved of CPU can miss a connect timeout; try again before giving up.
        for _ in range(RAIL_ATTEMPTS):
            try:
                await set_fault_profile(self.rail_url, name)
                async with httpx.AsyncClient(base_url=self.rail_url, timeout=10.0) as client:
                    in_force = (await client.get("/_sim/faults")).json()
            except httpx.HTTPError as e:
                failures.append(repr(e))
                continue
            applied = in_force == dataclasses.asdict(profile(name))
            return Landing(None, applied, {"profile": name, "in_force": applied})
        return Landing(None, False, {"profile": name, "errors": failures})

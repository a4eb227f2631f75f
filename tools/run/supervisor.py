"""Child processes of the local stack: started, health-checked, restarted, paused, stopped.

Spawning, health waits and stopping are `tools.infra.children`'s (children die with the
supervisor, and a Ctrl-C reaches them too); this module adds restarts with backoff, pauses,
and names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from services.domain.errors import InfrastructureError
from services.platform.backoff import backoff
from tools.infra import children

log = logging.getLogger(__name__)
WATCH_SECONDS = 0.2
RESTART_BASE_S = 0.5  # the first restart in a row comes within this; each later one doubles
RESTART_CAP_S = 5.0  # the most a restart waits
STABLE_SECONDS = 30.0  # a child up this long has its backoff reset
HEALTH_TIMEOUT_S = 60.0


class SupervisorError(InfrastructureError):
    """A child could not be started or did not become healthy."""

    retriable = False


def settle_executable() -> str:
    """The `settle` console script of this interpreter's environment."""
    beside = Path(sys.executable).with_name("settle")
    if beside.exists():
        return str(beside)
    found = shutil.which("settle")
    if found is None:
        raise SupervisorError("no `settle` script beside the interpreter or on PATH")
    return found


@dataclass
class ServiceSpec:
    """One child process: a `settle` subcommand, or any argv given as `command`."""

    name: str  # unique among the supervisor's children; names its log file
    args: list[str]  # `settle` subcommand and options, e.g. ["ledger", "--port", "8081"]
    env: dict[str, str]  # the child's whole environment
    port: int | None = None  # where it listens, for display
    health_url: str | None = None  # answers 200 once the child is ready; None: ready at once
    command: list[str] | None = None  # full argv instead of `settle` + args (tests, tools)
    admin_port: int | None = None  # where its operator endpoints and /metrics listen, if any

    def argv(self) -> list[str]:
        """What is executed."""
        return list(self.command) if self.command else [settle_executable(), *self.args]


@dataclass
class _Child:
    spec: ServiceSpec
    proc: subprocess.Popen[bytes]
    started_at: float
    restarts: int = 0
    streak: int = 0  # restarts since it last stayed up STABLE_SECONDS
    paused: bool = False


class Supervisor:
    """Runs ServiceSpecs as child processes, logging to `log_dir/<name>.log`."""

    def __init__(self, log_dir: Path = Path(".run/logs")) -> None:
        self.log_dir = log_dir
        self._children: dict[str, _Child] = {}
        self._stopping = False
        self._watcher: asyncio.Task[None] | None = None
        self._rng = random.Random()

    async def start(self, spec: ServiceSpec) -> None:
        """Start `spec` as a child (not waiting for health); a name may be started once."""
        if spec.name in self._children:
            raise SupervisorError(f"{spec.name}: already started")
        self._children[spec.name] = _Child(spec, self._spawn(spec), time.monotonic())
        if self._watcher is None:
            self._watcher = asyncio.create_task(self.watch(), name="supervisor-watch")

    async def start_all(self, specs: list[ServiceSpec]) -> None:
        """Start every spec, then wait until each health URL answers 200."""
        for spec in specs:
            await self.start(spec)
        await asyncio.gather(*(self._healthy(s) for s in specs if s.health_url))

    async def wait_healthy(self, names: list[str] | None = None) -> None:
        """Wait until the health URL of each named child (default: all) answers 200."""
        specs = [c.spec for n, c in self._children.items() if names is None or n in names]
        await asyncio.gather(*(self._healthy(s) for s in specs if s.health_url))

    async def stop_all(self, grace: float = 10.0) -> None:
        """SIGTERM every child, SIGKILL whichever is still alive after `grace` seconds."""
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        procs = [child.proc for child in self._children.values()]
        for pid in await children.stop(procs, grace):
            log.warning("pid %d: still alive after %.0f s, killed", pid, grace)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to child `name` (the watcher restarts it if it dies)."""
        self._child(name).proc.send_signal(sig)

    def pause(self, name: str) -> None:
        """Freeze child `name` (SIGSTOP) until `resume`."""
        child = self._child(name)
        child.proc.send_signal(signal.SIGSTOP)
        child.paused = True

    def resume(self, name: str) -> None:
        """Let a paused child run again (SIGCONT)."""
        child = self._child(name)
        child.proc.send_signal(signal.SIGCONT)
        child.paused = False

    def running(self, name: str) -> bool:
        """Whether child `name` is alive now (not dead and waiting for its restart)."""
        return self._child(name).proc.poll() is None

    def is_paused(self, name: str) -> bool:
        """Whether child `name` is frozen by `pause`."""
        return self._child(name).paused

    def pid(self, name: str) -> int:
        """The current process id of child `name`."""
        return self._child(name).proc.pid

    def restarts(self, name: str) -> int:
        """How many times child `name` was restarted after dying."""
        return self._child(name).restarts

    def specs(self) -> list[ServiceSpec]:
        """The children's specs, in start order."""
        return [c.spec for c in self._children.values()]

    async def watch(self) -> None:
        """Restart, after a short backoff, any child that exits while not stopping."""
        while not self._stopping:
            for child in list(self._children.values()):
                code = child.proc.poll()
                if code is None or self._stopping:
                    continue
                up_for = time.monotonic() - child.started_at
                child.streak = 0 if up_for >= STABLE_SECONDS else child.streak
                delay = backoff(child.streak, RESTART_BASE_S, RESTART_CAP_S, self._rng)
                log.warning(
                    "%s (pid %d) exited with %d after %.1f s; restarting in %.1f s",
                    child.spec.name,
                    child.proc.pid,
                    code,
                    up_for,
                    delay,
                )
                await asyncio.sleep(delay)
                if self._stopping:  # a Ctrl-C that reached the child before us
                    return
                child.proc = self._spawn(child.spec)
                child.started_at = time.monotonic()
                child.restarts += 1
                child.streak += 1
                child.paused = False
            await asyncio.sleep(WATCH_SECONDS)

    def _child(self, name: str) -> _Child:
        try:
            return self._children[name]
        except KeyError:
            raise SupervisorError(f"no child named {name!r}") from None

    def _spawn(self, spec: ServiceSpec) -> subprocess.Popen[bytes]:
        try:
            return children.spawn(spec.argv(), spec.env, self._log(spec))
        except OSError as e:
            raise SupervisorError(f"{spec.name}: cannot start {spec.argv()[0]}: {e}") from e

    def _log(self, spec: ServiceSpec) -> Path:
        return self.log_dir / f"{spec.name}.log"

    async def _healthy(self, spec: ServiceSpec) -> None:
        if spec.health_url is None:
            return
        try:
            await children.wait_healthy(
                spec.name,
                spec.health_url,
                self._log(spec),
                timeout_s=HEALTH_TIMEOUT_S,
                running=lambda: not self._stopping,
            )
        except children.ChildUnhealthy as e:
            raise SupervisorError(str(e)) from e

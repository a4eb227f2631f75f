"""Child processes of the local stack: started, health-checked, restarted, paused, stopped.

Process group: children stay in ours (no `setsid`). A Ctrl-C typed at the terminal therefore
reaches them as well as us, and we still stop each one explicitly (SIGTERM, then SIGKILL after
a grace period), so whichever of the two lands first, nothing of ours is left behind. On Linux
each child is also asked (PR_SET_PDEATHSIG) to receive SIGTERM should the supervisor itself
die without stopping it, e.g. when it is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

log = logging.getLogger(__name__)
WATCH_SECONDS = 0.2
BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0)  # before the 1st, 2nd, 3rd, later restarts in a row
STABLE_SECONDS = 30.0  # a child up this long has its backoff reset
HEALTH_TIMEOUT_S = 60.0
PR_SET_PDEATHSIG = 1


class SupervisorError(Exception):
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


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; Linux only, ignored elsewhere.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Supervisor:
    """Runs ServiceSpecs as child processes, logging to `log_dir/<name>.log`."""

    def __init__(self, log_dir: Path = Path(".run/logs")) -> None:
        self.log_dir = log_dir
        self._children: dict[str, _Child] = {}
        self._stopping = False
        self._watcher: asyncio.Task[None] | None = None

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
        for child in self._children.values():
            if child.proc.poll() is None:
                if child.paused:  # a stopped process would hold SIGTERM until continued
                    child.proc.send_signal(signal.SIGCONT)
                child.proc.terminate()
        deadline = time.monotonic() + grace
        while any(c.proc.poll() is None for c in self._children.values()):
            if time.monotonic() >= deadline:
                for child in self._children.values():
                    if child.proc.poll() is None:
                        log.warning("%s: still alive after %.0f s, killing", child.spec.name, grace)
                        child.proc.kill()
                for child in self._children.values():
                    child.proc.wait()
                break
            await asyncio.sleep(0.05)

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
                delay = BACKOFF_SECONDS[min(child.streak, len(BACKOFF_SECONDS) - 1)]
                log.warning(
                    "%s (pid %d) exited with %d after %.1f s; restarting in %.1f s",
                    child.spec.name, child.proc.pid, code, up_for, delay,
                )  # fmt: skip
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
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{spec.name}.log").open("ab") as out:
            try:
                return subprocess.Popen(
                    spec.argv(),
                    env=spec.env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                )
            except OSError as e:
                raise SupervisorError(f"{spec.name}: cannot start {spec.argv()[0]}: {e}") from e

    async def _healthy(self, spec: ServiceSpec) -> None:
        assert spec.health_url is not None
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get(spec.health_url)).status_code == 200:
                        return
                await asyncio.sleep(0.2)
        where = self.log_dir / f"{spec.name}.log"
        late = f"not healthy after {HEALTH_TIMEOUT_S:.0f} s"
        raise SupervisorError(f"{spec.name}: {spec.health_url} {late}; see {where}")

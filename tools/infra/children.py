"""Child processes of settle's tools (`settle run`, chaos, benchmarks): spawned with their
output appended to a log file, waited for until their health URL answers, and stopped.

A child is asked on Linux (PR_SET_PDEATHSIG) to receive SIGTERM should its parent die without
stopping it, e.g. when the parent is SIGKILLed. Children stay in the parent's process group,
so a Ctrl-C typed at the terminal reaches them as well; `stop` ends each one explicitly all the
same (SIGTERM, then SIGKILL after a grace period), whichever of the two lands first.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import httpx

from services.domain.errors import InfrastructureError
from tools.infra.paths import log_tail

PR_SET_PDEATHSIG = 1
HEALTH_POLL_S = 0.2


class ChildUnhealthy(InfrastructureError):
    """A child exited, or its health URL did not answer 200 in time; the message has its log."""

    retriable = False


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; Linux only, ignored elsewhere.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start `argv` with stdout and stderr appended to `log`; OSError if it cannot start."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )


async def wait_healthy(
    name: str,
    url: str,
    log: Path,
    *,
    timeout_s: float = 60.0,
    running: Callable[[], bool] = lambda: True,
) -> None:
    """Return once `url` answers 200; ChildUnhealthy, naming `name` and showing the tail of
    its `log`, if time runs out or `running()` turns false first (the child is gone for good;
    a supervisor that restarts children keeps it true)."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline and running():
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(HEALTH_POLL_S)
    why = "exited" if not running() else f"not healthy after {timeout_s:.0f} s"
    raise ChildUnhealthy(f"{name}: {url} {why}; see {log}\n{log_tail(log)}")


async def stop(processes: Iterable[subprocess.Popen[bytes]], grace: float = 10.0) -> list[int]:
    """SIGTERM every live process (SIGCONT first, a stopped one would hold it), SIGKILL those
    still alive after `grace` seconds, reap them all; the pids that had to be killed."""
    live = [p for p in processes if p.poll() is None]
    for process in live:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGCONT)
            process.terminate()
    deadline = time.monotonic() + grace
    while any(p.poll() is None for p in live) and time.monotonic() < deadline:  # noqa: ASYNC110 - polls processes
        await asyncio.sleep(0.05)
    killed = [p.pid for p in live if p.poll() is None]
    for process in live:
        if process.poll() is None:
            process.kill()
        await asyncio.to_thread(process.wait)
    return killed

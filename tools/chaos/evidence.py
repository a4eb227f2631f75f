"""Evidence that a fault landed, and that a run left nothing behind.

A fault counts only when its effect is seen: the process was alive just before and dead
after, the broker's port refused connections, PostgreSQL's postmaster started anew. Read with
psutil, plain sockets and one query; nothing here injects anything, and a dead child is never
reaped here (its parent, the supervisor, does that).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import asyncpg
import psutil

from services.platform.config import libpq_dsn

PROBE_S = 0.05
DEATH_WAIT_S = 10.0  # a SIGKILLed process is gone in milliseconds; this is a generous cap
REFUSAL_WAIT_S = 10.0
ANSWER_WAIT_S = 60.0
CONNECT_TIMEOUT_S = 15.0
_UNREADABLE = (psutil.NoSuchProcess, psutil.AccessDenied)
_DB_DOWN = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def alive(proc: psutil.Process) -> bool:
    """Whether `proc` (that very process, not a later one with its pid) runs and is no zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except _UNREADABLE:
        return False


def live_process(pid: int | None) -> psutil.Process | None:
    """The process with `pid` if it is alive now, else None."""
    if pid is None:
        return None
    try:
        proc = psutil.Process(pid)
    except _UNREADABLE:
        return None
    return proc if alive(proc) else None


def status(proc: psutil.Process) -> str:
    """`proc`'s state as the kernel shows it (running, sleeping, stopped, ...), or "gone"."""
    try:
        return str(proc.status())
    except _UNREADABLE:
        return "gone"


def stopped(proc: psutil.Process) -> bool:
    """Whether `proc` is frozen by SIGSTOP."""
    return status(proc) == psutil.STATUS_STOPPED


def switches(proc: psutil.Process) -> int:
    """How many times `proc` has been switched off a CPU so far (it ran if this moved)."""
    try:
        return sum(proc.num_ctx_switches())
    except _UNREADABLE:
        return 0


async def within(seconds: float, seen: Callable[[], bool], every: float = PROBE_S) -> bool:
    """Whether `seen()` comes true within `seconds`, asking every `every` seconds."""
    deadline = time.monotonic() + seconds
    while not seen():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(every)
    return True


def refuses(address: str) -> bool:
    """Whether a TCP connection to `host:port` is refused: nothing listens there."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False  # a timeout or an unreachable host proves nothing about the server


class Postmaster(NamedTuple):
    """When the server's postmaster started, or why that could not be read."""

    started: datetime | None
    error: str = ""


async def postmaster_started(database_url: str, within_s: float = ANSWER_WAIT_S) -> Postmaster:
    """`pg_postmaster_start_time()` of the server, asked until it answers or `within_s` pass
    (on a loaded machine a connection can take seconds; the last error is kept)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            conn = await asyncpg.connect(libpq_dsn(database_url), timeout=CONNECT_TIMEOUT_S)
            try:
                started: datetime = await conn.fetchval("SELECT pg_postmaster_start_time()")
                return Postmaster(started)
            finally:
                await conn.close()
        except _DB_DOWN as e:
            if time.monotonic() >= deadline:
                return Postmaster(None, repr(e))
        await asyncio.sleep(0.5)


def run_processes(run_dir: Path, database_url: str) -> list[dict[str, object]]:
    """Processes of a run still alive: those whose command line names its directory (its
    servers) or whose environment names its database (its services and their children)."""
    found: list[dict[str, object]] = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid == os.getpid():
            continue
        try:
            command = " ".join(proc.info["cmdline"] or ())
            ours = str(run_dir) in command
            ours = ours or proc.environ().get("SETTLE_DATABASE_URL") == database_url
        except _UNREADABLE:
            continue
        if ours and alive(proc):
            found.append({"pid": proc.pid, "cmdline": command[:200]})
    return found


async def leftovers(run_dir: Path, database_url: str, wait_s: float) -> list[dict[str, object]]:
    """The run's processes still alive after waiting up to `wait_s` for them to end."""
    await within(wait_s, lambda: not run_processes(run_dir, database_url), every=0.5)
    return run_processes(run_dir, database_url)

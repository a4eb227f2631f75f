"""Settle's own services as the benchmarks run them: real processes on the bench database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.bench.runner import BenchError
from tools.infra import children
from tools.infra.procs import free_ports

SETTLE = str(Path(sys.executable).with_name("settle"))


# The services with an admin port beside the public one (/readyz sits on the admin port).
WITH_ADMIN_PORT = frozenset({"ledger", "inbox"})


@dataclass(frozen=True)
class RunningService:
    """A service process started for a benchmark, and where it listens."""

    process: subprocess.Popen[bytes]
    url: str  # its public port: the tenant API, the webhook endpoint, the simulator
    admin_url: str  # /readyz and /metrics: the admin port, or `url` for a one-port service
    log: Path


@contextmanager
def running(
    command: list[str], env: dict[str, str], log: Path, ready_path: str = "/readyz"
) -> Iterator[RunningService]:
    """Run `settle <command> --port P [--admin-port P+1]` until the block ends; it must answer
    200 at `ready_path` (on its admin port, if it has one) first."""
    admin = command[0] in WITH_ADMIN_PORT
    port = free_ports(2 if admin else 1)
    argv = [SETTLE, *command, "--port", str(port)]
    if admin:
        argv += ["--admin-port", str(port + 1)]
    process = children.spawn(argv, {**os.environ, **env}, log)
    url = f"http://127.0.0.1:{port}"
    service = RunningService(process, url, f"http://127.0.0.1:{port + 1}" if admin else url, log)
    try:
        ready = children.wait_healthy(
            command[0],
            f"{service.admin_url}{ready_path}",
            log,
            running=lambda: process.poll() is None,
        )
        try:
            asyncio.run(ready)
        except children.ChildUnhealthy as e:
            raise BenchError(str(e)) from e
        yield service
    finally:
        asyncio.run(children.stop([process], grace=20))

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


@dataclass(frozen=True)
class RunningService:
    """A service process started for a benchmark, and where it listens."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path


@contextmanager
def running(command: list[str], env: dict[str, str], log: Path) -> Iterator[RunningService]:
    """Run `settle <command> --port P` until the block ends; it must become ready first."""
    port = free_ports()
    argv = [SETTLE, *command, "--port", str(port)]
    process = children.spawn(argv, {**os.environ, **env}, log)
    service = RunningService(process, f"http://127.0.0.1:{port}", log)
    try:
        ready = children.wait_healthy(
            command[0], f"{service.url}/readyz", log, running=lambda: process.poll() is None
        )
        try:
            asyncio.run(ready)
        except children.ChildUnhealthy as e:
            raise BenchError(str(e)) from e
        yield service
    finally:
        asyncio.run(children.stop([process], grace=20))

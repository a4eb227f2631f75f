"""Settle's own services as the benchmarks run them: real processes on the bench database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from services.bench.runner import BenchError

SETTLE = str(Path(sys.executable).with_name("settle"))


@dataclass(frozen=True)
class RunningService:
    """A service process started for a benchmark, and where it listens."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(
    url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float = 60
) -> None:
    """Block until `url`/readyz answers 200, or raise BenchError with the log tail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
    raise BenchError(f"{url} did not become ready:\n{tail}")


@contextmanager
def running(command: list[str], env: dict[str, str], log: Path) -> Iterator[RunningService]:
    """Run `settle <command> --port P` until the block ends; it must become ready first."""
    port = free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [SETTLE, *command, "--port", str(port)], env={**os.environ, **env},
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    service = RunningService(process, f"http://127.0.0.1:{port}", log)
    try:
        wait_ready(service.url, process, log)
        yield service
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

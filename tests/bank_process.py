"""`settle banksim` as a child process on a free port, for the tests that talk to a bank."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tools.infra.procs import free_ports

START = "from banksim.cli import banksim; banksim()"


@contextmanager
def running_bank(state_dir: Path, *options: str) -> Iterator[str]:
    """The bank simulator's URL while it runs with its state in `state_dir`, stopped after."""
    port = free_ports()
    log_path = state_dir / "banksim.log"
    command = [sys.executable, "-c", START, "--port", str(port), "--state-dir", str(state_dir)]
    with log_path.open("a") as log:
        child = subprocess.Popen([*command, *options], stderr=log)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 20
            while not answers(url):
                assert child.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.05)
            yield url
        finally:
            child.terminate()
            child.wait(timeout=10)


def answers(url: str) -> bool:
    """Whether the bank at `url` answers its health check."""
    try:
        return httpx.get(f"{url}/healthz").status_code == 200
    except httpx.TransportError:
        return False

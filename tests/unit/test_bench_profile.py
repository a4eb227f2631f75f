"""`settle bench --profile`: a flame graph per service and rate, or a clear error when py-spy
cannot attach."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tools.bench.profile import graph_path, recording
from tools.bench.runner import BenchError

SPIN = "while True: sum(range(1000))"


def record(
    directory: Path | None, pids: Mapping[str, int], seconds: int, happened: list[str] | None = None
) -> list[str]:
    """Run a rate's window (doing nothing) under `recording`; what happened inside it."""
    happened = [] if happened is None else happened

    async def window() -> None:
        async with recording(directory, 50, pids, seconds):
            happened.append("window")

    asyncio.run(window())
    return happened


def test_each_service_gets_its_flame_graph(tmp_path: Path) -> None:
    service = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        assert record(tmp_path, {"ledger": service.pid}, seconds=1) == ["window"]
    finally:
        service.kill()
        service.wait()
    graph = graph_path(tmp_path, 50, "ledger")
    assert graph == tmp_path / "50-ledger.svg"
    assert "<svg" in graph.read_text()


def test_a_service_idle_for_the_whole_window_gets_a_graph_that_says_so(tmp_path: Path) -> None:
    sleeper = "import time; print('asleep', flush=True); time.sleep(60)"
    service = subprocess.Popen([sys.executable, "-c", sleeper], stdout=subprocess.PIPE, text=True)
    try:
        assert service.stdout is not None and service.stdout.readline() == "asleep\n"  # started
        assert record(tmp_path, {"reconciler": service.pid}, seconds=1) == ["window"]
    finally:
        service.kill()
        service.wait()
    graph = graph_path(tmp_path, 50, "reconciler").read_text()
    assert "<svg" in graph and "reconciler: no samples in 1 s (idle" in graph


def test_a_process_py_spy_cannot_attach_to_is_a_clear_error(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid names no process now
    happened: list[str] = []
    with pytest.raises(
        BenchError, match=rf"could not record relay-1 \(pid {gone.pid}, exit 1\): Error: .*ptrace"
    ):
        record(tmp_path, {"relay-1": gone.pid}, seconds=5, happened=happened)
    assert happened == []  # found before the rate is offered, not after
    assert list(tmp_path.iterdir()) == []


def test_nothing_is_recorded_without_a_directory() -> None:
    assert record(None, {"ledger": 1}, seconds=1) == ["window"]

"""Evidence that a chaos fault landed, and the scan for processes a run left behind, against
processes and sockets this test makes itself."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import unique
from tools.chaos import evidence
from tools.chaos.inject import Injector, Landing
from tools.chaos.schedule import Fault
from tools.infra.procs import free_ports

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(SLEEP)
    yield child
    child.kill()
    child.wait()


class OneChild:
    """The part of the supervisor a kill uses, over one process that is never restarted and
    that it believes running (a crash between two of its looks goes unnoticed for a while)."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child

    def running(self, _: str) -> bool:
        return True

    def pid(self, _: str) -> int:
        return self.child.pid

    def kill(self, _: str, sig: int) -> None:
        if self.child.poll() is None:
            self.child.send_signal(sig)

    def pause(self, name: str) -> None:
        self.kill(name, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.kill(name, signal.SIGCONT)


def injector(child: subprocess.Popen[bytes]) -> Injector:
    infra = type("Infra", (), {"database_url": "postgresql://x@127.0.0.1:1/x"})()
    return Injector(OneChild(child), infra, "http://127.0.0.1:1", lambda _: None)  # type: ignore[arg-type]


async def test_a_process_is_alive_until_it_dies_even_before_it_is_reaped(
    sleeper: subprocess.Popen[bytes],
) -> None:
    proc = evidence.live_process(sleeper.pid)
    assert proc is not None and evidence.alive(proc)
    sleeper.kill()
    assert await evidence.within(5, lambda: not evidence.alive(proc))
    # Not waited for: a zombie until its parent reaps it, and dead all the same.
    assert proc.status() == psutil.STATUS_ZOMBIE
    assert evidence.live_process(sleeper.pid) is None


async def test_a_stopped_process_shows_as_stopped_until_continued(
    sleeper: subprocess.Popen[bytes],
) -> None:
    proc = psutil.Process(sleeper.pid)
    assert not evidence.stopped(proc)
    sleeper.send_signal(signal.SIGSTOP)
    assert await evidence.within(5, lambda: evidence.stopped(proc))
    sleeper.send_signal(signal.SIGCONT)
    assert await evidence.within(5, lambda: not evidence.stopped(proc))


async def test_a_pause_lands_on_a_running_process(sleeper: subprocess.Popen[bytes]) -> None:
    landing = await injector(sleeper).freeze("relay-1", frozen=True)
    assert landing == (sleeper.pid, True, {"alive_before": True, "stopped_after": True})


@pytest.fixture
def refreezing() -> Iterator[subprocess.Popen[bytes]]:
    """A process that stops itself, and again the moment it is continued, as a relay at a busy
    failpoint may."""
    code = "import os, signal\nwhile True:\n    os.kill(os.getpid(), signal.SIGSTOP)"
    child = subprocess.Popen([sys.executable, "-c", code])
    yield child
    child.kill()
    child.wait()


async def test_a_process_that_freezes_itself_again_at_once_still_counts_as_woken(
    refreezing: subprocess.Popen[bytes],
) -> None:
    proc = psutil.Process(refreezing.pid)
    assert await evidence.within(5, lambda: evidence.stopped(proc))
    landing = await injector(refreezing).freeze("relay-1", frozen=False)
    assert landing == (refreezing.pid, True, {"alive_before": True, "ran_after": True})


def test_a_port_with_no_listener_refuses_and_a_listening_one_does_not() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        assert not evidence.refuses(address)
    assert evidence.refuses(address)


async def test_a_kill_lands_on_a_running_process(sleeper: subprocess.Popen[bytes]) -> None:
    landing = await injector(sleeper)._do(Fault(1.0, "kill", "ledger", "SIGKILL"))
    assert landing == (sleeper.pid, True, {"alive_before": True, "dead_after": True})
    assert sleeper.wait(timeout=5) == -signal.SIGKILL


async def test_a_kill_of_a_process_already_dead_does_not_land(
    sleeper: subprocess.Popen[bytes],
) -> None:
    sleeper.kill()
    sleeper.wait()
    landing = await injector(sleeper)._kill("ledger")
    assert landing == (sleeper.pid, False, {"alive_before": False, "dead_after": False})


@pytest.fixture
def run_of_three(tmp_path: Path) -> Iterator[tuple[Path, str, list[subprocess.Popen[bytes]]]]:
    """A run's directory and database, a process naming each, and one of another run."""
    url = f"postgresql+asyncpg://settle@127.0.0.1:1/{unique('chaos_')}"
    run_dir = tmp_path / "seed-1"
    children = [
        subprocess.Popen(SLEEP, env={"SETTLE_DATABASE_URL": url}),
        subprocess.Popen([*SLEEP, str(run_dir / "kafka" / "server.properties")]),
        subprocess.Popen(SLEEP, env={"SETTLE_DATABASE_URL": url + "_other"}),
    ]
    yield run_dir, url, children
    for child in children:
        child.kill()
        child.wait()


async def test_processes_of_a_run_are_found_by_directory_or_database(
    run_of_three: tuple[Path, str, list[subprocess.Popen[bytes]]],
) -> None:
    run_dir, url, (by_env, by_dir, _) = run_of_three
    found = {p["pid"] for p in evidence.run_processes(run_dir, url)}
    assert found == {by_env.pid, by_dir.pid}
    by_env.kill()
    assert [p["pid"] for p in await evidence.leftovers(run_dir, url, wait_s=1)] == [by_dir.pid]
    by_dir.kill()
    assert await evidence.leftovers(run_dir, url, wait_s=5) == []


async def test_a_server_is_started_only_after_its_crash_has_ended(
    sleeper: subprocess.Popen[bytes],
) -> None:
    # A crash slower than the planned outage, as on a loaded machine.
    order: list[str] = []
    chaos = injector(sleeper)

    async def slow_crash() -> Landing:
        await asyncio.sleep(0.5)
        order.append("stopped")
        return Landing(1, True, {})

    async def start() -> Landing:
        order.append("started")
        return Landing(2, True, {})

    chaos._postgres_stop = slow_crash  # type: ignore[method-assign]
    chaos._postgres_start = start  # type: ignore[method-assign]
    schedule = [Fault(0.0, "postgres_stop", "postgres"), Fault(0.1, "postgres_start", "postgres")]
    done = await chaos.run(schedule, time.monotonic())
    assert order == ["stopped", "started"]
    assert [i.landed for i in done] == [True, True]


async def test_a_database_that_never_answers_has_no_start_time_and_says_why() -> None:
    nowhere = f"postgresql+asyncpg://settle@127.0.0.1:{free_ports()}/settle"
    answer = await evidence.postmaster_started(nowhere, within_s=1.0)
    assert answer.started is None and "ConnectionRefused" in answer.error

"""The supervisor with tiny child processes: restart after a kill, pause/resume, clean stop."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.waiting import eventually
from tools.run.supervisor import ServiceSpec, Supervisor, SupervisorError

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
# Ignores SIGTERM, so only the SIGKILL after the grace period ends it.
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)",
]


def spec(name: str, command: list[str] = SLEEPER) -> ServiceSpec:
    return ServiceSpec(name, [], dict(os.environ), None, None, command=command)


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def state_of(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.fixture
async def supervisor(tmp_path: Path) -> AsyncIterator[Supervisor]:
    sup = Supervisor(tmp_path / "logs")
    yield sup
    await sup.stop_all(grace=2)


async def test_a_killed_child_is_restarted_with_a_new_pid(supervisor: Supervisor) -> None:
    await supervisor.start_all([spec("a"), spec("b")])
    first, other = supervisor.pid("a"), supervisor.pid("b")
    supervisor.kill("a")
    await eventually(lambda: supervisor.restarts("a") == 1)
    assert supervisor.pid("a") != first
    assert alive(supervisor.pid("a"))
    assert not alive(first)
    assert supervisor.pid("b") == other and supervisor.restarts("b") == 0
    assert (supervisor.log_dir / "a.log").exists()


async def test_stop_all_leaves_no_child_alive_even_one_ignoring_sigterm(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "logs")
    await sup.start_all([spec("calm"), spec("stubborn", STUBBORN), spec("frozen")])
    await asyncio.sleep(0.5)  # the stubborn one has installed its handler
    sup.pause("frozen")
    pids = [sup.pid(name) for name in ("calm", "stubborn", "frozen")]
    await sup.stop_all(grace=1)
    assert [alive(pid) for pid in pids] == [False, False, False]
    await asyncio.sleep(0.6)  # past the first backoff: nothing was restarted
    assert [sup.restarts(name) for name in ("calm", "stubborn", "frozen")] == [0, 0, 0]


async def test_pause_and_resume_stop_and_continue_the_child(supervisor: Supervisor) -> None:
    await supervisor.start(spec("p"))
    pid = supervisor.pid("p")
    supervisor.pause("p")
    await eventually(lambda: state_of(pid) == "T")
    supervisor.resume("p")
    await eventually(lambda: state_of(pid) == "S")
    assert supervisor.restarts("p") == 0


async def test_start_all_waits_for_health_and_names_an_unhealthy_child(
    supervisor: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tools.run.supervisor.HEALTH_TIMEOUT_S", 1.0)
    unhealthy = spec("deaf")
    unhealthy.health_url = "http://127.0.0.1:9/healthz"
    with pytest.raises(SupervisorError, match="deaf"):
        await supervisor.start_all([unhealthy])


async def test_unknown_or_repeated_names_are_refused(supervisor: Supervisor) -> None:
    await supervisor.start(spec("once"))
    with pytest.raises(SupervisorError, match="already started"):
        await supervisor.start(spec("once"))
    with pytest.raises(SupervisorError, match="no child named"):
        supervisor.pid("nobody")


ORPHANING_PARENT = """
import asyncio, sys
from pathlib import Path
from tools.run.supervisor import ServiceSpec, Supervisor

async def main():
    sup = Supervisor(Path(sys.argv[1]))
    await sup.start(ServiceSpec("child", [], {}, None, None, command=sys.argv[2:]))
    print(sup.pid("child"), flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


async def test_children_are_terminated_when_the_supervisor_itself_is_killed(
    tmp_path: Path,
) -> None:
    parent = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        ORPHANING_PARENT,
        str(tmp_path / "logs"),
        *SLEEPER,
        stdout=asyncio.subprocess.PIPE,
    )
    assert parent.stdout is not None
    child = int(await asyncio.wait_for(parent.stdout.readline(), 10))
    assert alive(child)
    parent.kill()
    await parent.wait()
    await eventually(lambda: not alive(child), 5)

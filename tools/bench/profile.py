"""`settle bench --scenario e2e --profile DIR`: py-spy records each Python service of the stack
during a rate's offered window and writes `DIR/<rate>-<service>.svg` (a flame graph), so a
note can show where the CPU went at that rate.

py-spy samples 100 times a second without pausing the service (`--nonblocking`: the figures
of the same run stay close to an unprofiled one's; a few stacks may come out torn). It reads
the services' memory, which needs ptrace rights: root, CAP_SYS_PTRACE, or
kernel.yama.ptrace_scope 0 for a process's own children. A service that was idle for the whole
window (the reconciler between runs, at low rates) leaves py-spy no stack to draw: its graph
then says so in words instead of failing the bench.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from tools.bench.runner import BenchError

SERVICES = ("ledger", "relay-1", "relay-2", "inbox", "railsim", "reconciler")
SAMPLES_PER_S = 100
ATTACH_S = 1.0  # a py-spy that cannot attach has exited by then
FINISH_GRACE_S = 30.0  # beyond its duration, how long py-spy may take to write its graph
NO_SAMPLES = "No stack counts found"  # what py-spy says of a process idle throughout


def py_spy() -> str:
    """The py-spy executable of this environment (`make install` puts it there)."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise BenchError("--profile needs py-spy: `make install` installs it into .venv")
    return found


def graph_path(directory: Path, rate: int, service: str) -> Path:
    """Where the flame graph of `service` at `rate` is written."""
    return directory / f"{rate}-{service}.svg"


async def _spy(executable: str, pid: int, seconds: int, out: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        executable,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(seconds),
        "--nonblocking",
        "--rate",
        str(SAMPLES_PER_S),
        "--format",
        "flamegraph",
        "--output",
        str(out),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def _said(spy: asyncio.subprocess.Process) -> str:
    said = (await spy.stderr.read()).decode(errors="replace") if spy.stderr else ""
    return " ".join(said.split("Stack backtrace:")[0].split())  # its words, not its stack


def _failure(service: str, pid: int, spy: asyncio.subprocess.Process, said: str) -> str:
    return f"py-spy could not record {service} (pid {pid}, exit {spy.returncode}): {said}"


def _idle_graph(path: Path, service: str, seconds: int) -> None:
    """The graph of a service py-spy never found running: one line of text saying so."""
    words = f"{service}: no samples in {seconds} s (idle for the whole window)"
    path.write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="600" height="40">'
        f'<text x="10" y="25" font-family="monospace" font-size="14">{words}</text></svg>\n'
    )


@asynccontextmanager
async def recording(
    directory: Path | None, rate: int, pids: Mapping[str, int], seconds: int
) -> AsyncIterator[None]:
    """Record every service of `pids` for `seconds` while the block runs, into `directory`
    (which exists; nothing is recorded when it is None); BenchError, with py-spy's own words,
    if one cannot be attached or recorded."""
    if directory is None:
        yield
        return
    executable = py_spy()
    spies = {
        s: await _spy(executable, pid, seconds, graph_path(directory, rate, s))
        for s, pid in pids.items()
    }
    said: dict[str, str] = {}  # what a py-spy that has ended said, read once
    try:
        await asyncio.sleep(ATTACH_S)
        for service, spy in spies.items():
            if spy.returncode not in (None, 0):
                said[service] = await _said(spy)
                if NO_SAMPLES not in said[service]:  # else: ended early, finding nothing to draw
                    raise BenchError(
                        _failure(service, pids[service], spy, said[service])
                        + " (py-spy attaches with ptrace: it needs root or CAP_SYS_PTRACE)"
                    )
        yield
        for service, spy in spies.items():
            try:
                await asyncio.wait_for(spy.wait(), seconds + FINISH_GRACE_S)
            except TimeoutError:
                spy.kill()
                await spy.wait()
            graph = graph_path(directory, rate, service)
            if spy.returncode == 0 and graph.exists():
                continue
            words = said[service] if service in said else await _said(spy)
            if NO_SAMPLES not in words:
                raise BenchError(_failure(service, pids[service], spy, words))
            _idle_graph(graph, service, seconds)
    finally:
        for spy in spies.values():
            if spy.returncode is None:
                spy.kill()
                await spy.wait()

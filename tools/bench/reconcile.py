"""The `reconcile` scenario: rail objects reconciled per second, and the reconciler's peak
memory, at N settlements for each N of `--settlements` (100,000 and 1,000,000 by default).

For each N, a fresh bench database gets N paid settlements (set-based SQL) and a fresh
`settle railsim` the same N transfers (`POST /_sim/seed`), with breaks planted
(reconcile_seed.py); then `settle reconcile --json` runs as its own process, timed from its
start to its exit. It must find exactly the planted breaks. Its peak RSS and CPU are what the
kernel reports for that child (wait4): objects per CPU second is the figure a busy machine
moves least. The simulator's CPU over the run is reported apart, since it shares the cores.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import orjson
import psutil

from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from tools.bench.database import bench_database
from tools.bench.reconcile_seed import EXPECTED, PLANTED, rail_chunks, seed_ledger
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.bench.services import SETTLE, running
from tools.infra.paths import run_paths

SPREAD = 2400  # seconds the settlements were sent over, inside the run's first hour window
SEED_CHUNK = 50_000  # transfers per seed request


@dataclass(frozen=True)
class _Run:
    """One `settle reconcile` over N settlements."""

    objects: int  # rail objects listed
    seconds: float  # from the process's start to its exit
    peak_rss_mb: float  # the reconciler's high-water resident memory
    cpu: float  # seconds of CPU the reconciler spent (user + system)
    simulator_cpu: float  # seconds of CPU the simulator spent answering it


def _seed(url: str, sim_url: str, count: int, end: int) -> int:
    """Seed the ledger and the simulator; the rail objects the run will list."""

    async def ledger() -> None:
        conn = await asyncpg.connect(libpq_dsn(url))
        try:
            await seed_ledger(conn, count, end, SPREAD)
        finally:
            await conn.close()

    asyncio.run(ledger())
    seeded = 0
    with httpx.Client(base_url=sim_url, timeout=300) as client:
        for chunk in rail_chunks(count, end, SPREAD, SEED_CHUNK):
            answer = client.post("/_sim/seed", content=orjson.dumps(chunk))
            answer.raise_for_status()
            seeded += answer.json()["seeded"]
    return seeded


def _reconcile(url: str, sim_url: str, sim_pid: int) -> tuple[_Run, dict[str, Any]]:
    """Run `settle reconcile`: its figures (objects still to fill in) and its report."""
    env = {**os.environ, "SETTLE_DATABASE_URL": url}
    sim = psutil.Process(sim_pid)
    cpu_before = sum(sim.cpu_times()[:2])
    started = time.monotonic()
    argv = [SETTLE, "reconcile", "--json", "--grace", "0", "--rail-url", sim_url]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE)
    assert process.stdout is not None
    out = process.stdout.read()
    # wait4, not wait: the kernel's rusage of this child alone (ru_maxrss in KiB on Linux)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    simulator_cpu = sum(sim.cpu_times()[:2]) - cpu_before
    if process.returncode != 1:
        raise BenchError(f"settle reconcile exited {process.returncode}: {out[-2000:]!r}")
    cpu = usage.ru_utime + usage.ru_stime
    return _Run(0, seconds, usage.ru_maxrss / 1024, cpu, simulator_cpu), json.loads(out)


def _one(settings: Settings, count: int) -> _Run:
    url = bench_database(settings.database_url)
    log = run_paths().run / "bench" / "railsim-reconcile.log"
    with running(["railsim"], {}, log) as sim:
        objects = _seed(url, sim.url, count, int(time.time()) - 60)
        run, report = _reconcile(url, sim.url, sim.process.pid)
    found = {kind: n for kind, n in report["counts"].items() if n}
    if found != dict.fromkeys(EXPECTED, PLANTED):
        raise BenchError(f"expected {PLANTED} of each of {sorted(EXPECTED)}, found {found}")
    return dataclasses.replace(run, objects=objects)


def run_reconcile(settings: Settings, options: BenchOptions) -> BenchResult:
    """Measure rail objects reconciled per second and peak memory at each N settlements."""
    runs = {count: _one(settings, count) for count in options.settlements}
    figures: list[Figure] = []
    for count, run in runs.items():
        figures += [
            Figure(f"reconciled, N={count:,}", run.objects / run.seconds, "objects/s"),
            Figure(f"peak RSS, N={count:,}", run.peak_rss_mb, "MB"),
            Figure(f"reconciler CPU, N={count:,}", run.objects / run.cpu, "objects/CPU s"),
            Figure(f"simulator CPU, N={count:,}", run.simulator_cpu, "s"),
        ]
    first, last = runs[min(runs)], runs[max(runs)]
    figures.append(
        Figure("peak RSS, largest N / smallest N", last.peak_rss_mb / first.peak_rss_mb, "x")
    )
    return BenchResult(
        scenario="reconcile",
        parameters={
            "settlements": "+".join(str(c) for c in runs),
            "planted_breaks": PLANTED * len(EXPECTED),
            "rail": "railsim over HTTP, seeded",
            "process": "settle reconcile --json --grace 0",
        },
        figures=figures,
    )

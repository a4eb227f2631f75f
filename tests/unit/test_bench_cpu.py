"""The e2e scenario's CPU reading on real processes: a service this process started is
counted in its own group, not again in the load client's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

from tools.bench.e2e_figures import ProcessGroup, group_cpu
from tools.bench.e2e_probe import sample_groups
from tools.bench.ingest import CpuMeter

BURN_S = 0.4  # CPU seconds the child spends before it says so and waits to be read
BURN = f"""
import sys, time
began = time.process_time()
while time.process_time() - began < {BURN_S}:
    pass
print("burnt", flush=True)
sys.stdin.read()
"""


def cpu_reading(groups: Mapping[str, ProcessGroup]) -> dict[str, float]:
    return group_cpu(sample_groups(groups), groups)


def test_a_child_service_is_counted_in_its_own_group_not_in_the_load_client() -> None:
    load_client = ProcessGroup((os.getpid(),), descendants=False)
    before = cpu_reading({"load client": load_client})["load client"]
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        after = cpu_reading({"load client": load_client, "service": ProcessGroup((child.pid,))})
        assert after["service"] >= BURN_S
        assert after["load client"] - before < BURN_S / 2  # starting it and reading it only
    finally:
        child.kill()
        child.wait()


def test_the_ingest_meter_reads_each_phase_of_a_process_apart() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        meter = CpuMeter(child.pid)
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        burnt, idle = meter.lap(), meter.lap()
    finally:
        child.communicate("")
    assert BURN_S * 0.9 <= burnt <= BURN_S + 0.5
    assert idle < 0.05

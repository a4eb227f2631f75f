"""`settle chaos` as CI runs it: two short seeded runs side by side, one with the rail
honouring idempotency keys and one ignoring them, each under kills, a relay paused past its
lease, both relays freezing themselves mid-dispatch and woken past their lease, a Kafka and a
PostgreSQL restart and the simulator's faults. Each fault must be seen to land (the killed
process alive before and dead after, the broker's port refusing, PostgreSQL started anew),
every invariant must hold, and no process of the run (server, service or a child of one) may
be left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools.chaos.evidence import run_processes
from tools.chaos.schedule import RELAYS, SELF_PAUSE_EVERY, kills_per_service
from tools.infra.paths import run_paths
from tools.infra.procs import pids_matching

pytestmark = [pytest.mark.e2e, pytest.mark.alone]
SETTLE = str(Path(sys.executable).with_name("settle"))
COUNT, SECONDS = 1500, 40


# The two runs side by side, as the long chaos runs are made: each on its own PostgreSQL,
# Kafka and services, so the pair also shows that nothing of one reaches the other.
RUNS = ((101, False), (202, True))


@pytest.mark.timeout(420)
def test_chaos_runs_side_by_side_keep_every_guarantee(tmp_path: Path) -> None:
    started = []
    for seed, rail_ignores_keys in RUNS:
        report_file = tmp_path / f"report-{seed}.json"
        args = [SETTLE, "chaos", "--count", str(COUNT), "--seconds", str(SECONDS)]
        args += ["--seed", str(seed), "--report", str(report_file)]
        args += ["--rail-ignores-keys"] if rail_ignores_keys else []
        out, err = tmp_path / f"out-{seed}.txt", tmp_path / f"err-{seed}.txt"
        with out.open("w") as stdout, err.open("w") as stderr:
            process = subprocess.Popen(args, stdout=stdout, stderr=stderr, text=True)
        started.append((seed, rail_ignores_keys, process, report_file, out, err))
    try:
        for seed, rail_ignores_keys, process, report_file, out, err in started:
            returncode = process.wait(timeout=400)
            # The summary (stdout) first: the services' log lines (stderr) would crowd it out.
            tail = out.read_text()[-3000:] + err.read_text()[-1500:]
            assert returncode == 0, tail
            report = json.loads(report_file.read_text())
            _judge(report, seed, rail_ignores_keys, tail)
    finally:
        for *_, process, _report, _out, _err in started:
            if process.poll() is None:  # a run the other's failure cut short stops itself
                process.terminate()
                process.wait(timeout=60)


def _judge(report: dict[str, Any], seed: int, rail_ignores_keys: bool, tail: str) -> None:
    assert report["ok"] and report["checks"]["ok"], tail
    assert report["seed"] == seed and report["rail_ignores_keys"] is rail_ignores_keys
    assert report["booked"] == {"rows": COUNT, "distinct_references": COUNT, "exactly_once": True}
    assert sum(report["final_states"].values()) == COUNT
    assert report["submitted"]["kafka_messages"] >= COUNT // 2  # every command acknowledged
    # A fault counts only where it was seen to land (tools/chaos/evidence.py).
    assert report["faults_landed"] is True
    assert [f for f in report["faults"] if not f["landed"]] == [], tail
    done_kinds = [
        (f["action"], "relay" if f["target"] in RELAYS else f["target"])
        for f in report["faults"]
        if f["landed"]
    ]
    seen = {(f["action"], f["target"]): f["evidence"] for f in report["faults"]}
    for fault in report["faults"]:
        if fault["action"] == "kill":
            assert fault["evidence"] == {"alive_before": True, "dead_after": True}, fault
    assert seen[("kafka_stop", "kafka")] == {
        "alive_before": True,
        "dead_after": True,
        "port_refused": True,
    }
    assert seen[("kafka_start", "kafka")] == {"started": True, "new_pid": True, "port_open": True}
    assert seen[("postgres_stop", "postgres")]["port_refused"] is True
    assert seen[("postgres_start", "postgres")]["restarted"] is True
    for service in ("ledger", "relay", "inbox"):
        assert done_kinds.count(("kill", service)) == kills_per_service(SECONDS)
    for kind in [
        ("pause", "relay"),
        ("resume", "relay"),
        ("kafka_stop", "kafka"),
        ("kafka_start", "kafka"),
        ("postgres_stop", "postgres"),
        ("postgres_start", "postgres"),
        ("rail_faults", "railsim"),
    ]:
        assert kind in done_kinds, kind
    # Each relay froze itself at one of its moments that matter for money, past its lease.
    self_paused = [f for f in report["faults"] if f["action"] == "self_pause"]
    assert {f["target"] for f in self_paused} == set(RELAYS), tail
    points = {f["evidence"]["at"] for f in self_paused}
    assert points <= set(SELF_PAUSE_EVERY) and points & {"rail.before_write", "rail.after_write"}
    killed = sum(n for name, n in report["restarts"].items() if name != "railsim")
    assert killed >= 3 * kills_per_service(SECONDS)  # each kill was followed by a restart
    run_dir = run_paths().run / "chaos" / f"seed-{seed}"
    leftovers = pids_matching(str(run_dir))
    assert not leftovers, f"processes of the run still alive: {leftovers}"
    # No service either, nor any child of one: nothing running on the run's database.
    assert report["leftover_processes"] == []
    assert run_processes(run_dir, report["postgres"]) == []

"""`settle bench --scenario e2e` as a user runs it: the whole stack at a tiny open-loop rate,
every figure present and the counts adding up, rows written per table, a flame graph of each
service. Speed is not asserted: the machine is shared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import Servers

pytestmark = [pytest.mark.e2e, pytest.mark.alone]
SETTLE = str(Path(sys.executable).with_name("settle"))
RATE, SECONDS = 10, 3


def test_e2e_reports_every_figure_and_every_offered_settlement_is_paid(
    infra: Servers, tmp_path: Path
) -> None:
    out = tmp_path / "e2e.json"
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": infra.database_url,
        "SETTLE_KAFKA_BOOTSTRAP": infra.kafka_bootstrap,
    }
    graphs = tmp_path / "profile"
    args = [
        "--rates",
        str(RATE),
        "--seconds",
        str(SECONDS),
        "--json",
        str(out),
        "--no-markdown",
        "--profile",
        str(graphs),
    ]
    result = subprocess.run(
        [SETTLE, "bench", "--scenario", "e2e", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["scenario"] == "e2e"
    figures = {f["name"].removeprefix(f"{RATE}/s "): f["value"] for f in report["figures"]}
    offered = RATE * SECONDS
    assert figures["offered"] == offered
    assert figures["accepted over kafka"] + figures["accepted over http"] == offered
    assert figures["paid"] == offered  # fault profile none: every settlement is paid
    for what in ("accepted", "submitted", "paid"):
        assert 0 < figures[f"{what} rate"] <= offered  # never faster than all at once
    for path in ("accepted->submitted", "accepted->paid"):
        p50, p99, p999 = (figures[f"{path} {p}"] for p in ("p50", "p99", "p999"))
        assert 0 < p50 <= p99 <= p999
    assert figures["http p99"] > 0 and figures["send lag max"] >= 0
    parts = ("ledger", "relay", "inbox", "reconciler", "postgres", "kafka")
    assert figures["cpu stack"] == pytest.approx(sum(figures[f"cpu {p}"] for p in parts))
    assert figures["cpu ledger"] > 0 and figures["cpu relay"] > 0 and figures["cpu inbox"] > 0
    assert figures["cpu railsim"] > 0 and figures["cpu load client"] > 0
    assert 0 < figures["cpu postgres sessions"] <= figures["cpu postgres"]
    services = ("ledger", "relay", "inbox", "reconciler", "railsim")
    # The services are the bench's children, but their CPU is theirs, not the load client's.
    assert figures["cpu load client"] < sum(figures[f"cpu {s}"] for s in services)
    assert figures["pg commits"] >= 1  # at least the booking's own commit
    assert figures["wal"] > 0
    best = figures["highest rate with p99 accepted->paid < 1 s"]
    assert best in (0, RATE) and (best == RATE) == (figures["accepted->paid p99"] < 1000)
    writes = {f["name"].removeprefix(f"{RATE}/s writes "): f["value"] for f in report["breakdown"]}
    assert writes["settlements inserted"] == pytest.approx(1.0)  # each offered one, once
    assert writes["settlements updated"] > 0 and writes["settlement_transitions inserted"] > 0
    assert writes["database inserted"] >= writes["settlements inserted"]
    for service in ("ledger", "relay-1", "relay-2", "inbox", "railsim", "reconciler"):
        assert (graphs / f"{RATE}-{service}.svg").stat().st_size > 0


def test_e2e_with_prefill_reports_each_fill_and_their_ratios(
    infra: Servers, tmp_path: Path
) -> None:
    out = tmp_path / "e2e.json"
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": infra.database_url,
        "SETTLE_KAFKA_BOOTSTRAP": infra.kafka_bootstrap,
    }
    args = [
        "--rates",
        str(RATE),
        "--seconds",
        str(SECONDS),
        "--prefill",
        "0,2000",
        "--json",
        str(out),
        "--no-markdown",
    ]
    result = subprocess.run(
        [SETTLE, "bench", "--scenario", "e2e", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "prefill: 2,000 of 2,000 settlements" in result.stderr
    report = json.loads(out.read_text())
    assert report["parameters"]["prefill"] == "0/2000"
    figures = {f["name"]: f["value"] for f in report["figures"]}
    for fill in (0, 2000):
        # The history is another tenant's: each fill's run counts its own settlements alone.
        assert figures[f"prefill {fill}: {RATE}/s paid"] == RATE * SECONDS
        assert figures[f"prefill {fill}: {RATE}/s accepted->paid p99"] > 0
    assert figures["prefill 2000: fill time"] > 0 and figures["prefill 2000: database size"] > 0
    assert "prefill 0: fill time" not in figures  # nothing filled, nothing to time
    for what in ("accepted rate", "accepted->paid p99"):
        assert figures[f"{RATE}/s {what}, prefill 2000 vs 0"] > 0  # percent

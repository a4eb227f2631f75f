"""The `settle` console script as a user runs it: migrate, infra status/env, bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import create_database, drop_database, unique
from tests.harness import Servers

pytestmark = pytest.mark.e2e
SETTLE = str(Path(sys.executable).with_name("settle"))


def settle(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SETTLE, *args], capture_output=True, text=True, env=env, timeout=240, check=False
    )


def environment(database_url: str, bootstrap: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "SETTLE_DATABASE_URL": database_url,
        "SETTLE_KAFKA_BOOTSTRAP": bootstrap,
        **extra,
    }


async def test_migrate_creates_schema_and_prefixed_topics(infra: Servers) -> None:
    name = unique("settle_cli_")
    url = await create_database(infra.database_url, name)
    try:
        prefix = unique("t") + "."
        env = environment(url, infra.kafka_bootstrap, SETTLE_TOPIC_PREFIX=prefix)
        first = settle("migrate", env=env)
        assert first.returncode == 0, first.stderr
        assert "database migrated to head" in first.stdout
        assert f"{prefix}settlement.commands" in first.stdout
        again = settle("migrate", env=env)
        assert again.returncode == 0, again.stderr
        assert "none (all exist)" in again.stdout
    finally:
        await drop_database(infra.database_url, name)


def test_infra_status_and_env_report_the_servers_in_use(infra: Servers) -> None:
    env = environment(infra.database_url, infra.kafka_bootstrap)
    status = settle("infra", "status", env=env)
    assert status.returncode == 0, status.stderr
    assert "postgres" in status.stdout and "kafka" in status.stdout
    printed = settle("infra", "env", env=env)
    assert printed.stdout.startswith("export SETTLE_DATABASE_URL=")
    assert infra.kafka_bootstrap in printed.stdout


def test_bad_configuration_stops_start_up_naming_the_variable(infra: Servers) -> None:
    env = environment(infra.database_url, infra.kafka_bootstrap, SETTLE_RAIL="carrier-pigeon")
    result = settle("relay", env=env)
    assert result.returncode != 0
    assert "SETTLE_RAIL" in result.stderr


def test_bench_baseline_writes_json_figures(infra: Servers, tmp_path: Path) -> None:
    out = tmp_path / "baseline.json"
    env = environment(infra.database_url, infra.kafka_bootstrap)
    args = ("bench", "--scenario", "baseline", "--seconds", "2", "--clients", "2")
    result = settle(*args, "--json", str(out), "--no-markdown", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["scenario"] == "baseline"
    assert report["machine"]["cores"] == os.cpu_count()
    assert report["parameters"]["clients"] == 2
    throughputs = [f["value"] for f in report["figures"] if f["unit"] == "settlements/s"]
    assert len(throughputs) == 2 and all(value > 0 for value in throughputs)
    assert report["parameters"]["batch"] > 1


def test_bench_rejects_an_unknown_scenario() -> None:
    result = settle("bench", "--scenario", "nonesuch", "--no-markdown")
    assert result.returncode == 2
    assert "baseline" in result.stderr


def test_bench_rejects_rates_below_one_settlement_a_second() -> None:
    result = settle("bench", "--scenario", "e2e", "--rates", "100,0", "--no-markdown")
    assert result.returncode == 2
    assert "--rates" in result.stderr

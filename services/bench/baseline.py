"""The `baseline` scenario: pgbench running the accept transaction's statements.

It measures what PostgreSQL itself does on this machine for one accepted settlement, so the
service's own figures can be given as a ratio to it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from services.bench.database import bench_database, libpq_args, libpq_env
from services.bench.report import BenchResult, Figure
from services.bench.runner import BenchError, BenchOptions
from services.infra.postgres import bindir
from services.shared.config import Settings

SCRIPT = Path(__file__).with_name("accept_settlement.pgbench.sql")
BALANCE_SHARDS = 8
TENANT = "bench"


def _open_accounts(url: str) -> None:
    # The accounts every bench settlement posts to, each with its balance shards.
    sql = f"""
        INSERT INTO accounts (id, tenant, kind, currency) VALUES
            ('{TENANT}:funding:USD', '{TENANT}', 'funding', 'USD'),
            ('{TENANT}:payable:USD', '{TENANT}', 'payable', 'USD')
        ON CONFLICT DO NOTHING;
        INSERT INTO account_balances (account_id, shard)
            SELECT a, s FROM unnest(ARRAY['{TENANT}:funding:USD', '{TENANT}:payable:USD']) a,
                 generate_series(0, {BALANCE_SHARDS - 1}) s
        ON CONFLICT DO NOTHING;
    """
    psql = [str(bindir() / "psql"), *libpq_args(url), "-q", "-v", "ON_ERROR_STOP=1", "-c", sql]
    subprocess.run(psql, check=True, capture_output=True, text=True, env=libpq_env(url))


def _parse(output: str) -> tuple[float, float, int]:
    tps = re.search(r"^tps = ([0-9.]+)", output, re.MULTILINE)
    latency = re.search(r"^latency average = ([0-9.]+) ms", output, re.MULTILINE)
    done = re.search(r"^number of transactions actually processed: (\d+)", output, re.MULTILINE)
    failed = re.search(r"^number of failed transactions: (\d+)", output, re.MULTILINE)
    if not (tps and latency and done):
        raise BenchError(f"could not read pgbench's output:\n{output}")
    if failed and int(failed.group(1)):
        raise BenchError(f"pgbench reported failed transactions:\n{output}")
    return float(tps.group(1)), float(latency.group(1)), int(done.group(1))


def run_baseline(settings: Settings, options: BenchOptions) -> BenchResult:
    """Run the accept-transaction script under pgbench; settlements/s and mean latency."""
    url = bench_database(settings.database_url)
    _open_accounts(url)
    command = [
        str(bindir() / "pgbench"), *libpq_args(url), "--no-vacuum", "--protocol=prepared",
        f"--client={options.clients}", f"--jobs={min(options.clients, 2)}",
        f"--time={options.seconds}", f"--define=shards={BALANCE_SHARDS}", f"--file={SCRIPT}",
    ]  # fmt: skip
    finished = subprocess.run(
        command, capture_output=True, text=True, check=False, env=libpq_env(url)
    )
    if finished.returncode != 0:
        raise BenchError(f"pgbench failed ({finished.returncode}):\n{finished.stderr}")
    tps, latency_ms, done = _parse(finished.stdout)
    return BenchResult(
        scenario="baseline",
        parameters={
            "tool": "pgbench -M prepared",
            "clients": options.clients,
            "seconds": options.seconds,
            "balance_shards": BALANCE_SHARDS,
            "transactions": done,
        },
        figures=[
            Figure("accept transactions", tps, "settlements/s"),
            Figure("latency mean", latency_ms, "ms"),
        ],
    )

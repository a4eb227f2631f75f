"""The `baseline` scenario: pgbench running the ledger's own accept transaction.

The script is generated from `services.ledger.sql.BOOK_BATCH`, so pgbench issues exactly
the statement the ledger issues (BEGIN with the lock bound, the booking statement,
COMMIT), with columns generated in SQL instead of minted in Python. It measures what
PostgreSQL itself does on this machine, at one settlement per transaction and at a batch,
and what the idempotency claim adds: the same statement with the claim replaced by a pass
through, compared at the 99th percentile of transaction latency.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from services.domain.balance_shards import BALANCE_SHARDS
from services.ledger import sql
from services.ledger.booking import LOCK_WAIT
from services.platform.service_settings import Settings
from tools.bench.database import bench_database, libpq_args, libpq_env
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.infra.postgres import bindir

TENANT = "bench"
BATCH = 100
# pgbench reads any colon-word as a variable, so account ids are assembled with chr(58).
_ACCOUNT = "concat_ws(chr(58), 'bench', '{kind}', 'USD')"
GENERATE = f"""
SELECT array_agg('{TENANT}'::text) AS p1,
       array_agg(k) AS p2,
       array_agg(sha256(convert_to(k, 'UTF8'))) AS p3,
       array_agg(sid) AS p4,
       array_agg(k) AS p5,
       array_agg('payee-bench'::text) AS p6,
       array_agg('acct_bench'::text) AS p7,
       array_agg(amount) AS p8,
       array_agg('USD'::text) AS p9,
       array_agg('sim'::text) AS p10,
       array_agg('{{}}'::text) AS p11,
       array_agg(encode(sha256(convert_to(k || 'rail', 'UTF8')), 'hex')) AS p12,
       array_agg(decode(repeat('7b', 420), 'hex')) AS p13,
       array_agg(entry) AS p14,
       array_agg(event) AS p15,
       array_agg(decode(repeat('c3', 160), 'hex')) AS p16,
       now() AS p17,
       now() - interval '48 hours' AS p18,
       array_agg(entry) || array_agg(entry) AS p19,
       array_agg({_ACCOUNT.format(kind="funding")})
           || array_agg({_ACCOUNT.format(kind="payable")}) AS p20,
       array_agg(-amount) || array_agg(amount) AS p21,
       array_agg('USD'::text) || array_agg('USD'::text) AS p22,
       'transfer' AS p24,
       'settlement.events' AS p25,
       array_agg('00-' || md5(k) || '-' || left(md5(sid::text), 16) || '-01') AS p26,
       array_agg(NULL::text) AS p27
  FROM (SELECT gen_random_uuid()::text AS k, gen_random_uuid() AS sid,
               gen_random_uuid() AS entry, gen_random_uuid() AS event,
               (random() * 1000000)::bigint + 1 AS amount
          FROM generate_series(1, :batch)) AS g \\gset
"""
PASS_THROUGH_CLAIM = "claimed AS (\n    SELECT tenant, key FROM input\n), settled AS ("


@dataclass(frozen=True)
class Run:
    """One pgbench run: transactions per second and per-transaction latencies (ms)."""

    tps: float
    latencies_ms: list[float]

    @property
    def mean_ms(self) -> float:
        """The mean transaction latency."""
        return statistics.fmean(self.latencies_ms)

    @property
    def p99_ms(self) -> float:
        """The 99th percentile transaction latency."""
        return statistics.quantiles(self.latencies_ms, n=100)[98]


def script(batch: int, claim: bool = True) -> str:
    """The pgbench script of one booking transaction of `batch` settlements."""
    statement = sql.BOOK_BATCH.strip()
    if not claim:
        statement = re.sub(
            r"claimed AS \(.*?\), settled AS \(", PASS_THROUGH_CLAIM, statement, flags=re.DOTALL
        )
    statement = re.sub(r"\$(\d+)", r":p\1", statement)
    return "\n".join(
        [
            f"\\set batch {batch}",
            f"\\set p23 random(0, {BALANCE_SHARDS - 1})",
            GENERATE.strip(),
            f"BEGIN;\nSET LOCAL lock_timeout = '{LOCK_WAIT}';",
            statement + ";",
            "COMMIT;",
            "",
        ]
    )


def _open_accounts(url: str) -> None:
    ids = ", ".join(
        f"('{TENANT}:{kind}:USD', '{TENANT}', '{kind}', 'USD')"
        for kind in ("funding", "payable", "in_transit", "paid_out")
    )
    statement = f"""
        INSERT INTO accounts (id, tenant, kind, currency) VALUES {ids} ON CONFLICT DO NOTHING;
        INSERT INTO account_balances (account_id, shard)
            SELECT a.id, s FROM accounts a, generate_series(0, {BALANCE_SHARDS - 1}) s
             WHERE a.tenant = '{TENANT}'
        ON CONFLICT DO NOTHING;
    """
    psql = [
        str(bindir() / "psql"),
        *libpq_args(url),
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-c",
        statement,
    ]
    subprocess.run(psql, check=True, capture_output=True, text=True, env=libpq_env(url))


def _pgbench(url: str, text: str, clients: int, seconds: int) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "accept.pgbench.sql"
        path.write_text(text)
        command = [
            str(bindir() / "pgbench"),
            *libpq_args(url),
            "--no-vacuum",
            "--protocol=prepared",
            f"--client={clients}",
            f"--jobs={min(clients, 2)}",
            f"--time={seconds}",
            "--log",
            f"--log-prefix={tmp}/txn",
            f"--file={path}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=libpq_env(url), cwd=tmp)
        if done.returncode != 0 or "number of failed transactions: 0" not in done.stdout:
            raise BenchError(f"pgbench failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        tps = re.search(r"^tps = ([0-9.]+)", done.stdout, re.MULTILINE)
        if tps is None:
            raise BenchError(f"could not read pgbench's output:\n{done.stdout}")
        # Log lines: client_id transaction_no time(us) script_no time_epoch time_us
        latencies = [
            int(line.split()[2]) / 1000
            for log in Path(tmp).glob("txn*")
            for line in log.read_text().splitlines()
        ]
    return Run(float(tps.group(1)), latencies)


def run_baseline(settings: Settings, options: BenchOptions) -> BenchResult:
    """pgbench on the ledger's booking statement: settlements/s and the claim's p99 cost."""
    url = bench_database(settings.database_url)
    _open_accounts(url)
    single = _pgbench(url, script(1), options.clients, options.seconds)
    batched = _pgbench(url, script(BATCH), options.clients, options.seconds)
    unclaimed = _pgbench(url, script(1, claim=False), options.clients, options.seconds)
    return BenchResult(
        scenario="baseline",
        parameters={
            "tool": "pgbench -M prepared, script generated from BOOK_BATCH",
            "clients": options.clients,
            "seconds_per_run": options.seconds,
            "batch": BATCH,
            "balance_shards": BALANCE_SHARDS,
        },
        figures=[
            Figure("accept, 1 per transaction", single.tps, "settlements/s"),
            Figure(f"accept, {BATCH} per transaction", batched.tps * BATCH, "settlements/s"),
            Figure("transaction p99, 1 per transaction", single.p99_ms, "ms"),
            # The claim's cost: the same transaction with the claim replaced by a pass-through.
            Figure("transaction p99 without the idempotency claim", unclaimed.p99_ms, "ms"),
            Figure(
                "mean latency added by the idempotency claim",
                single.mean_ms - unclaimed.mean_ms,
                "ms",
            ),
        ],
    )

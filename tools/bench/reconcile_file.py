"""The `reconcile-file` scenario: `settle reconcile --statement` over Stripe's report-run files,
statement lines read per second and the reconciler's peak memory, at N settlements for each N
of `--settlements` (100,000 and 1,000,000 by default).

For each N, a fresh bench database gets N paid settlements (reconcile_seed.py), and a balance
change report (balance_change_from_activity.itemized.3) their transfers, one line each, with
the breaks and strays the `reconcile` scenario plants at the simulator
(reconcile_seed.rail_chunks: no line, a cent more, a second transfer, transfers naming
settlements the ledger lacks, others' transfers naming none), and a charge line every
thousand; beside it a payouts report (payouts.itemized.3) of no payout. Then `settle
reconcile --json --grace 0 --day D --statement BALANCE --statement PAYOUTS` runs as its own
process, as a user would run it on the day's files, timed from its start to its exit; it
must find exactly the planted breaks and count every line, the charges as lines not compared,
the others' transfers as out of scope. Peak RSS is the child's own high-water mark
(VmHWM), its CPU what the kernel reports for it (wait4).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from railsim.statement import major_units
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from services.reconcile.statement import ReportKind
from tools.bench.database import bench_database
from tools.bench.reconcile_seed import PLANTED, planted_breaks, rail_chunks, seed_ledger
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.bench.services import SETTLE

SPREAD = 2400  # seconds the settlements were sent over, inside the day the files are of
CHARGE_EVERY = 1000  # a charge line after every this many transfers: not settle's to compare
# The reports' default columns, and the optional ones settle asks the balance report for.
BALANCE_COLUMNS = (
    "balance_transaction_id,created_utc,created,available_on_utc,available_on,currency,gross,"
    "fee,net,reporting_category,source_id,description,customer_facing_amount,"
    "customer_facing_currency,automatic_payout_id,connected_account_id,"
    "transfer_metadata[settlement_id]"
)
PAYOUTS_COLUMNS = (
    "payout_id,effective_at_utc,effective_at,currency,gross,fee,net,reporting_category,"
    "description,payout_expected_arrival_date,payout_status,payout_reversed_at_utc,"
    "payout_reversed_at,payout_type,payout_description,payout_destination_id"
)
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class _Run:
    """One `settle reconcile --statement` over the files of N settlements."""

    lines: int  # data lines in the files
    seconds: float  # from the process's start to its exit
    peak_rss_mb: float  # the reconciler's high-water resident memory
    cpu: float  # seconds of CPU the reconciler spent (user + system)


def write_files(directory: Path, count: int, end: int, spread: int) -> tuple[Path, Path, int, int]:
    """The balance and payouts reports of the seeded books; how many lines they hold, and how
    many of them are charges."""
    balance, payouts = directory / "balance.csv", directory / "payouts.csv"
    lines = charged = 0
    with balance.open("w") as out:
        out.write(BALANCE_COLUMNS + "\n")
        for chunk in rail_chunks(count, end, spread, 10_000):
            transfers = chunk["transfers"]
            out.writelines(_transfer_line(t) for t in transfers)
            charges = [_charge_line(t) for t in transfers[CHARGE_EVERY - 1 :: CHARGE_EVERY]]
            out.writelines(charges)
            lines, charged = lines + len(transfers) + len(charges), charged + len(charges)
    payouts.write_text(PAYOUTS_COLUMNS + "\n")
    return balance, payouts, lines, charged


def run_reconcile_file(settings: Settings, options: BenchOptions) -> BenchResult:
    """Measure statement lines reconciled per second and peak memory at each N settlements."""
    runs = {count: _one(settings, count) for count in options.settlements}
    figures: list[Figure] = []
    for count, run in runs.items():
        figures += [
            Figure(f"read and reconciled, N={count:,}", run.lines / run.seconds, "rows/s"),
            Figure(f"peak RSS, N={count:,}", run.peak_rss_mb, "MB"),
            Figure(f"reconciler CPU, N={count:,}", run.lines / run.cpu, "rows/CPU s"),
        ]
    first, last = runs[min(runs)], runs[max(runs)]
    figures.append(
        Figure("peak RSS, largest N / smallest N", last.peak_rss_mb / first.peak_rss_mb, "x")
    )
    return BenchResult(
        scenario="reconcile-file",
        parameters={
            "settlements": "+".join(str(c) for c in runs),
            "planted_breaks": PLANTED * 4,
            "files": f"{ReportKind.BALANCE} + {ReportKind.PAYOUTS}",
            "process": "settle reconcile --json --grace 0 --day D --statement B --statement P",
        },
        figures=figures,
    )


def _one(settings: Settings, count: int) -> _Run:
    url = bench_database(settings.database_url)
    end, spread = _books_span()
    asyncio.run(_seed(url, count, end, spread))
    with tempfile.TemporaryDirectory(prefix="settle-bench-files-") as directory:
        balance, payouts, lines, charged = write_files(Path(directory), count, end, spread)
        day = datetime.fromtimestamp(end, UTC).date().isoformat()
        argv = [SETTLE, "reconcile", "--json", "--grace", "0", "--day", day]
        argv += ["--statement", str(balance), "--statement", str(payouts)]
        run, report = _reconcile(argv, {**os.environ, "SETTLE_DATABASE_URL": url}, lines)
    found = {(b["type"], b["settlement_id"], b["rail_object_id"]) for b in report["breaks"]}
    planted = planted_breaks()
    if found != planted:
        unplanted, missed = sorted(found - planted, key=str), sorted(planted - found, key=str)
        raise BenchError(f"found unplanted breaks {unplanted[:10]}, missed {missed[:10]}")
    read, others = report["statement"], report["out_of_scope"]["count"]
    charges = {"charge": charged} if charged else {}
    if (read["lines"], read["out_of_scope"], others) != (lines, charges, PLANTED):
        raise BenchError(f"expected {lines} lines, {charges} not compared, read {read}")
    return run


async def _seed(url: str, count: int, end: int, spread: int) -> None:
    conn = await asyncpg.connect(libpq_dsn(url))
    try:
        await seed_ledger(conn, count, end, spread)
    finally:
        await conn.close()


def _reconcile(argv: list[str], env: dict[str, str], lines: int) -> tuple[_Run, dict[str, Any]]:
    """Run the reconciler as its own process: its figures and its report."""
    started = time.monotonic()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE)
    peak = _HighWater(process.pid)
    peak.start()
    assert process.stdout is not None
    out = process.stdout.read()
    # wait4, not wait: the kernel's rusage of this child alone
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.monotonic() - started
    peak.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 1:
        raise BenchError(f"settle reconcile exited {process.returncode}: {out[-2000:]!r}")
    cpu = usage.ru_utime + usage.ru_stime
    return _Run(lines, seconds, peak.kib / 1024, cpu), json.loads(out)


class _HighWater(threading.Thread):
    """The peak resident memory of a running process (VmHWM, KiB), read until it exits.
    Not wait4's ru_maxrss: that counts the memory of the bench process it was forked from."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.status, self.kib = Path(f"/proc/{pid}/status"), 0

    def run(self) -> None:
        while True:
            try:
                text = self.status.read_text()
            except OSError:
                return
            found = re.search(r"^VmHWM:\s+(\d+) kB", text, re.MULTILINE)
            if found is None:  # a zombie: the process has exited
                return
            self.kib = int(found.group(1))
            time.sleep(0.02)


def _books_span() -> tuple[int, int]:
    """When the last settlement was sent and over how many seconds: inside today (UTC), so
    that the day's files hold every one, waiting out the first minutes of a day."""
    now = int(time.time())
    since_midnight = now % 86_400
    if since_midnight < 180:
        time.sleep(180 - since_midnight)
        now, since_midnight = now + 180 - since_midnight, 180
    return now - 60, min(SPREAD, since_midnight - 120)


def _transfer_line(transfer: dict[str, Any]) -> str:
    at, named = _times(transfer["created"]), transfer["metadata"].get("settlement_id", "")
    gross = major_units(-transfer["amount"], "USD")
    return (
        f"txn_{transfer['id']},{at},usd,{gross},0.00,{gross},transfer,{transfer['id']},,,,,"
        f"{transfer['destination']},{named}\n"
    )


def _charge_line(transfer: dict[str, Any]) -> str:
    at, charge = _times(transfer["created"]), f"ch_{transfer['id']}"
    return f"txn_{charge},{at},usd,25.00,1.03,23.97,charge,{charge},,25.00,usd,,,\n"


def _times(seconds: int) -> str:
    """created_utc, created, available_on_utc and available_on of a line (all UTC here)."""
    text = datetime.fromtimestamp(seconds, UTC).strftime(TIME_FORMAT)
    return f"{text},{text},{text},{text}"

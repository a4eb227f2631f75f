"""The `sepa` scenario: the SEPA rail end to end, as `settle run` starts it with the bank
simulator, at one offered rate.

Settlements in euros to IBANs arrive open-loop (half as Kafka commands, half over HTTP, as
in the e2e scenario) at `--rates`' first rate for `--seconds`. The relays put them in files
and upload them; the bank books them on their execution day and issues its statement at the
day's end; the inbox reads its reports. Measured: accepted -> paid (the bank's booking, read
from its debit notification or status report) per settlement, and the rate at which the
batch was carried from its first acceptance to the delivery of the statement that holds its
last debit, in wall seconds, with the simulator's business day lasting `DAY_SECONDS`.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import asyncpg

from services.adapters.kafka.access import kafka_access
from services.adapters.kafka.topics import ensure_topics
from services.adapters.sepa.bank import Bank
from services.contracts.topics import COMMANDS
from services.domain.sepa import end_to_end_id
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from services.reconcile.bank_source import BankStatements
from tools.bench import e2e_probe as probe
from tools.bench.database import bench_database
from tools.bench.e2e_load import Arrivals, offer
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.infra.paths import run_paths
from tools.infra.procs import free_ports
from tools.run.supervisor import Supervisor, SupervisorError
from tools.run.topology import Ports, StackOptions, service_specs

TOKEN = "bench-sepa-token"
SIGNING_SECRET = "bench-sepa-signing-secret"
DAY_SECONDS = 10.0  # the bank simulator's business day
SETTLE_GRACE_S = 120.0
STATEMENT_POLL_S = 1.0
IDS = "SELECT id::text FROM settlements WHERE tenant = $1 AND reference LIKE $2"


async def _on_statements(bank: Bank, wanted: set[str], timeout_s: float) -> float:
    """Wait until every EndToEndId of `wanted` is debited on a delivered statement; when."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        statements = await BankStatements.from_bank(bank)
        debited = {name.partition("/")[0] for name in statements.objects}
        if wanted <= debited:
            return time.monotonic()
        await asyncio.sleep(STATEMENT_POLL_S)
    raise BenchError(f"not every transfer was on a statement within {timeout_s:.0f} s")


async def _measure(
    settings: Settings, options: BenchOptions, url: str, tenant: str
) -> list[Figure]:
    ports = Ports.from_base(free_ports(Ports.SPAN))
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": url,
        "SETTLE_TOPIC_PREFIX": settings.topic_prefix,
        "SETTLE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "SETTLE_API_TOKENS": f"{tenant}:{TOKEN}",
        "SETTLE_COMMAND_SIGNING_SECRETS": f"{tenant}:{SIGNING_SECRET}",
    }
    state = Path(run_paths().run) / "bench" / f"banksim-{uuid.uuid4().hex[:8]}"
    stack = StackOptions("none", rails=("sim", "sepa"), bank_state=state, day_seconds=DAY_SECONDS)
    supervisor = Supervisor(Path(run_paths().run) / "bench" / "sepa")
    rate, seconds = options.rates[0], options.seconds
    run = f"sepa-{rate}-{uuid.uuid4().hex[:6]}"
    load = Arrivals(tenant, TOKEN, run, rate, seconds, (SIGNING_SECRET,), sepa=True)
    bank = Bank(ports.url(ports.banksim), timeout=30.0)
    try:
        await supervisor.start_all(service_specs(ports, env, stack))
        conn = await asyncpg.connect(libpq_dsn(url))
        try:
            began = time.monotonic()
            offered = await offer(
                load, ports.url(ports.ledger), kafka_access(settings), settings.topic(COMMANDS)
            )
            accepted = offered.kafka_sent + offered.accepted_http
            if accepted < load.count:
                raise BenchError(f"{run}: {accepted} of {load.count} accepted")
            await probe.wait_final(conn, tenant, run, accepted, seconds + SETTLE_GRACE_S)
            ids = [r["id"] for r in await conn.fetch(IDS, tenant, f"{run}-%")]
            done = await _on_statements(bank, {end_to_end_id(i) for i in ids}, SETTLE_GRACE_S)
            seen = await probe.transition_figures(conn, tenant, run)
        finally:
            await conn.close()
    except SupervisorError as e:
        raise BenchError(str(e)) from e
    finally:
        await bank.aclose()
        await supervisor.stop_all(grace=20)
    carried = done - began
    figures = [
        Figure(f"{rate}/s offered for {seconds} s", load.count, "settlements"),
        Figure("accepted to booked on the statement", load.count / carried, "settlements/s"),
        Figure("the batch, first accept to its last statement", carried, "s"),
        Figure("business day of the bank simulator", DAY_SECONDS, "s"),
    ]
    if seen.to_paid:
        p50, p99, _ = seen.to_paid
        figures += [
            Figure("accepted->paid p50", p50 * 1000, "ms"),
            Figure("accepted->paid p99", p99 * 1000, "ms"),
        ]
    return figures


def run_sepa(settings: Settings, options: BenchOptions) -> BenchResult:
    """The SEPA rail at `options.rates[0]` settlements/s for `options.seconds`."""
    url = bench_database(settings.database_url)
    prefix, tenant = f"bench-{uuid.uuid4().hex[:8]}.", f"bench{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(kafka_access(settings), prefix))
    bench_settings = settings.model_copy(update={"topic_prefix": prefix})
    figures = asyncio.run(_measure(bench_settings, options, url, tenant))
    return BenchResult(
        scenario="sepa",
        parameters={
            "rate": options.rates[0],
            "seconds": options.seconds,
            "day_seconds": DAY_SECONDS,
            "fault_profile": "none",
        },
        figures=figures,
    )

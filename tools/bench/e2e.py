"""The `e2e` scenario: the whole stack as `settle run` starts it, at fixed offered rates.

The six children of `settle run` (ledger, inbox, rail simulator with fault profile `none`,
two relays, reconciler) run on free ports against a fresh bench database and a topic prefix
of their own. For each rate, settlements arrive open-loop (tools/bench/e2e_load.py), half as
Kafka commands and half over HTTP, and the run waits until every accepted one is final.
Latencies come from settlement_transitions; CPU from every process before and after; commits,
WAL, rows written per table and statement costs from PostgreSQL's counters (WAL is the
server's: other databases' writes count too). `--profile DIR` records each service with py-spy
during each rate's offered window.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from services.adapters.kafka.access import kafka_access
from services.adapters.kafka.topics import ensure_topics
from services.contracts.topics import COMMANDS
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from tools.bench import e2e_pgstats as pgstats
from tools.bench import e2e_probe as probe
from tools.bench import e2e_waits, e2e_wal, fills, profile
from tools.bench.database import bench_database
from tools.bench.e2e_figures import (
    ProcessGroup,
    cpu_deltas,
    group_cpu,
    highest_rate_within,
    per_second,
    per_settlement,
    percentile,
    sessions_cpu,
    statement_figures,
    writes_figures,
)
from tools.bench.e2e_load import Arrivals, Offered, offer
from tools.bench.prefill import Filled
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.infra import kafka, postgres
from tools.infra.paths import run_paths
from tools.infra.procs import free_ports
from tools.run.supervisor import Supervisor, SupervisorError
from tools.run.topology import Ports, StackOptions, service_specs

TOKEN = "bench-e2e-token"
SIGNING_SECRET = "bench-e2e-signing-secret"  # commands are signed, as production requires
STACK = ("ledger", "relay", "inbox", "reconciler", "postgres", "kafka")  # the product's CPU
# Reported beside the stack, not in it. "postgres sessions" is the part of "postgres" spent
# by the backends serving the bench database (the server is shared; its background writers
# and the other databases' backends are the rest).
APART = ("postgres sessions", "railsim", "load client")
SETTLE_GRACE_S = 120.0  # beyond the offered window, how long the last settlement may take
# Compared between pre-filled sizes, per rate: what a user gets, throughput and tail latency.
COMPARED = ("accepted rate", "accepted->paid p99")


def _process_groups(supervisor: Supervisor) -> dict[str, ProcessGroup]:
    paths = run_paths()
    pg, broker = postgres.server_pid(paths), kafka.broker_pid(paths)
    return {
        "ledger": ProcessGroup((supervisor.pid("ledger"),)),
        "relay": ProcessGroup((supervisor.pid("relay-1"), supervisor.pid("relay-2"))),
        "inbox": ProcessGroup((supervisor.pid("inbox"),)),
        "reconciler": ProcessGroup((supervisor.pid("reconciler"),)),
        "postgres": ProcessGroup((pg,) if pg else ()),
        "kafka": ProcessGroup((broker,) if broker else ()),
        "railsim": ProcessGroup((supervisor.pid("railsim"),)),
        # The services are this process's children: the load client is its own CPU alone
        # (its threads, not its children, nor the restarted ones it reaped, nor py-spy).
        "load client": ProcessGroup((os.getpid(),), descendants=False),
    }


def _rate_figures(
    rate: int,
    seconds: int,
    offered: Offered,
    seen: probe.Transitions,
    cpu: dict[str, float],
    commits: int,
    wal: int,
) -> list[Figure]:
    at, paid = f"{rate}/s", seen.counts["paid"]
    figures = [
        Figure(f"{at} offered", rate * seconds, "settlements"),
        Figure(f"{at} accepted over kafka", offered.kafka_sent, "settlements"),
        Figure(f"{at} accepted over http", offered.accepted_http, "settlements"),
        Figure(f"{at} paid", paid, "settlements"),
    ]
    figures += [
        Figure(
            f"{at} {s} rate", per_second(seen.counts[s], seen.spans[s], 1.0 / rate), "settlements/s"
        )
        for s in ("accepted", "submitted", "paid")
    ]
    for name, cuts in (
        ("accepted->submitted", seen.to_submitted),
        ("accepted->paid", seen.to_paid),
    ):
        for label, value in zip(("p50", "p99", "p999"), cuts or (0.0, 0.0, 0.0), strict=True):
            figures.append(Figure(f"{at} {name} {label}", value * 1000, "ms"))
    # How far behind schedule the load client fell: a large lag means the client, not the
    # stack, set the pace, and the run was not open-loop at the offered rate.
    figures.append(Figure(f"{at} send lag max", offered.late_s * 1000, "ms"))
    if offered.http_latencies:
        http_p99 = percentile(offered.http_latencies, 0.99) * 1000
        figures.append(Figure(f"{at} http p99", http_p99, "ms"))
    stack = sum(cpu.get(name, 0.0) for name in STACK)
    figures.append(Figure(f"{at} cpu stack", per_settlement(stack * 1000, paid), "ms/settlement"))
    figures += [
        Figure(f"{at} cpu {name}", per_settlement(cpu.get(name, 0.0) * 1000, paid), "ms/settlement")
        for name in (*STACK, *APART)
    ]
    figures.append(Figure(f"{at} pg commits", per_settlement(commits, paid), "per settlement"))
    figures.append(Figure(f"{at} wal", per_settlement(wal, paid), "bytes/settlement"))
    return figures


@dataclass(frozen=True)
class _Stack:
    """The running stack a rate is offered to, and how it is watched."""

    supervisor: Supervisor
    conn: asyncpg.Connection  # the bench database, for the counters and the transitions
    settings: Settings
    tenant: str
    ledger_url: str
    statements: bool  # pg_stat_statements is loaded: statement costs are read
    profile: Path | None  # where py-spy's flame graphs go, if anywhere
    dsn: str  # the bench database, for the wait sampler's own connection


async def _one_rate(
    stack: _Stack, rate: int, seconds: int
) -> tuple[list[Figure], list[Figure], float | None]:
    """The rate's figures, its breakdown (rows and statements) and its p99 accepted -> paid."""
    run = f"e2e-{rate}-{uuid.uuid4().hex[:6]}"
    load = Arrivals(stack.tenant, TOKEN, run, rate, seconds, (SIGNING_SECRET,))
    groups, conn, topic = (
        _process_groups(stack.supervisor),
        stack.conn,
        stack.settings.topic(COMMANDS),
    )
    if stack.statements:
        await pgstats.reset_statements(conn)
    sessions = await pgstats.session_pids(conn)
    before, db_before = probe.sample_groups(groups), await pgstats.database_counters(conn)
    pids = {name: stack.supervisor.pid(name) for name in profile.SERVICES}
    async with (
        profile.recording(stack.profile, rate, pids, seconds),
        e2e_waits.sampling(stack.dsn) as waits,
    ):
        offered = await offer(load, stack.ledger_url, kafka_access(stack.settings), topic)
    accepted = offered.kafka_sent + offered.accepted_http
    if accepted < load.count:
        raise BenchError(
            f"{load.run}: {accepted} of {load.count} accepted ({offered.http_statuses})"
        )
    await probe.wait_final(conn, stack.tenant, load.run, accepted, seconds + SETTLE_GRACE_S)
    after = probe.sample_groups(groups)
    cpu = cpu_deltas(group_cpu(before, groups), group_cpu(after, groups))
    sessions |= await pgstats.session_pids(conn)
    cpu["postgres sessions"] = sessions_cpu(before, after, sessions)
    db_after = await pgstats.database_counters(conn, settle=True)
    wal = await pgstats.wal_bytes(conn, db_before.wal_lsn, db_after.wal_lsn)
    costs = await pgstats.statement_costs(conn) if stack.statements else []
    seen = await probe.transition_figures(conn, stack.tenant, load.run)
    figures = _rate_figures(
        rate, seconds, offered, seen, cpu, db_after.commits - db_before.commits, wal
    )
    at, paid = f"{rate}/s", seen.counts["paid"]
    breakdown = writes_figures(
        f"{at} writes",
        {"database": db_before.rows, **db_before.tables},
        {"database": db_after.rows, **db_after.tables},
        paid,
    )
    breakdown += statement_figures(at, costs, paid)
    breakdown += waits.figures(at)
    shares = await e2e_wal.wal_breakdown(conn, db_before.wal_lsn, db_after.wal_lsn)
    breakdown += e2e_wal.wal_figures(at, shares, paid)
    return figures, breakdown, seen.to_paid[1] if seen.to_paid else None


async def _measure(
    settings: Settings, options: BenchOptions, url: str, tenant: str
) -> tuple[list[Figure], list[Figure]]:
    ports = Ports.from_base(free_ports(Ports.SPAN))
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": url,
        "SETTLE_TOPIC_PREFIX": settings.topic_prefix,
        "SETTLE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "SETTLE_API_TOKENS": f"{tenant}:{TOKEN}",
        "SETTLE_COMMAND_SIGNING_SECRETS": f"{tenant}:{SIGNING_SECRET}",
        # Runs every 5 s (settle run's pace) read again 30 s, not 5 minutes: in production
        # (every 5 minutes, 5 minutes of overlap) an object is listed about twice, not 60 times.
        "SETTLE_RECONCILE_OVERLAP_SECONDS": "30",
    }
    supervisor = Supervisor(Path(run_paths().run) / "bench" / "e2e")
    figures: list[Figure] = []
    breakdown: list[Figure] = []
    p99_paid: dict[int, float | None] = {}
    try:
        await supervisor.start_all(service_specs(ports, env, StackOptions("none")))
        conn = await asyncpg.connect(libpq_dsn(url))
        try:
            statements = await pgstats.statements_loaded(conn)
            stack = _Stack(
                supervisor,
                conn,
                settings,
                tenant,
                ports.url(ports.ledger),
                statements,
                options.profile,
                libpq_dsn(url),
            )
            for rate in options.rates:
                found, parts, p99_paid[rate] = await _one_rate(stack, rate, options.seconds)
                figures += found
                breakdown += parts
        finally:
            await conn.close()
    except SupervisorError as e:
        raise BenchError(str(e)) from e
    finally:
        await supervisor.stop_all(grace=20)
    best = highest_rate_within(p99_paid)
    figures.append(Figure("highest rate with p99 accepted->paid < 1 s", best or 0, "settlements/s"))
    return figures, breakdown


def _run_once(
    settings: Settings, options: BenchOptions, fill: int
) -> tuple[list[Figure], list[Figure], Filled | None]:
    """One stack on a fresh bench database (pre-filled with `fill` settlements of history, if
    any), with topics and a tenant of its own, measured at every rate."""
    url = bench_database(settings.database_url)
    filled = asyncio.run(fills.fill_database(url, fill)) if fill else None
    prefix, tenant = f"bench-{uuid.uuid4().hex[:8]}.", f"bench{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(kafka_access(settings), prefix))
    bench_settings = settings.model_copy(update={"topic_prefix": prefix})
    figures, breakdown = asyncio.run(_measure(bench_settings, options, url, tenant))
    return figures, breakdown, filled


def run_e2e(settings: Settings, options: BenchOptions) -> BenchResult:
    """Measure the whole pipeline at each of `options.rates` for `options.seconds` each; with
    `options.prefill`, once per fill, each on a database pre-filled with that much history."""
    if not options.prefill:
        figures, breakdown, _ = _run_once(settings, options, 0)
    else:
        compared = [f"{rate}/s {what}" for rate in options.rates for what in COMPARED]
        figures, breakdown = fills.over_fills(
            options.prefill, lambda fill: _run_once(settings, options, fill), compared
        )
    return BenchResult(
        scenario="e2e",
        parameters={
            "rates": "/".join(map(str, options.rates)),
            "seconds": options.seconds,
            "fault_profile": "none",
            "split": "half kafka, half http",
            **({"prefill": "/".join(map(str, options.prefill))} if options.prefill else {}),
            **({"profiled": f"py-spy {profile.SAMPLES_PER_S} Hz"} if options.profile else {}),
        },
        figures=figures,
        breakdown=breakdown,
    )

"""`settle demo`: a batch of settlements through the running stack, watched, then judged.

The batch goes in half as Kafka commands and half over HTTP (see submit.py), at a steady rate
unless told to send it at once; the simulator's fault profile is set first, a progress bar
follows the batch's settlements through their states in PostgreSQL, and the report gives the
final states, the latency from acceptance to `paid` (over the whole batch, over the
settlements the simulator sent no fault, and per fault, read from the simulator), and the
invariant check (tools/check) taken once the system is quiet.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from services.adapters.kafka.access import kafka_access
from services.contracts.topics import COMMANDS, EVENTS
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from services.relay.triggers import CONSUMER_GROUP
from tools.chaos.reconciled import reconciliation_verdict
from tools.check.cli import effect_source
from tools.check.run import CheckOptions, Report, run_check
from tools.run.latency import LatencySplit, split
from tools.run.pace import AT_ONCE, DEFAULT_RATE, Pace
from tools.run.ready import wait_for_group
from tools.run.submit import Batch, post_settlements, publish_commands, signing_secrets

FINAL = ("paid", "partly_reversed", "failed", "reversed", "needs_review")
STATES = ("accepted", "dispatching", "submitted", *FINAL)
POLL_SECONDS = 0.5
NOTHING_BOOKED_S = 30.0
RELAYS_READY_S = 30.0  # how long the batch waits for the relays to join their group
STATUS_COUNTS = """
SELECT rail, status, count(*) AS n FROM settlements
 WHERE tenant = $1 AND reference LIKE $2 GROUP BY rail, status
"""
# From the settlement's first transition (booked as `accepted`) to its transition to `paid`;
# reversed settlements count too, they were paid first.
PAID_SECONDS = """
SELECT s.id::text AS id, extract(epoch FROM paid.occurred_at - first.occurred_at)::float8 AS d
  FROM settlements s
  JOIN settlement_transitions first ON first.settlement_id = s.id AND first.sequence = 1
  JOIN settlement_transitions paid
    ON paid.settlement_id = s.id AND paid.to_status = 'paid' AND paid.from_status <> 'paid'
 WHERE s.tenant = $1 AND s.reference LIKE $2
"""
BATCH_IDS = "SELECT id::text FROM settlements WHERE tenant = $1 AND reference LIKE $2"
# From the batch's first booking to its last: the rate the stack took the batch in at
BOOKED_OVER = """
SELECT extract(epoch FROM max(first.occurred_at) - min(first.occurred_at))::float8
  FROM settlements s
  JOIN settlement_transitions first ON first.settlement_id = s.id AND first.sequence = 1
 WHERE s.tenant = $1 AND s.reference LIKE $2
"""


@dataclass(frozen=True)
class DemoOptions:
    """Where the stack listens and how the batch runs."""

    ledger_url: str
    rail_url: str
    count: int = 1000
    fault_profile: str | None = "demo"  # set on the simulator first; None leaves it as it is
    rate: int | None = DEFAULT_RATE  # settlements offered per second; None: all at once
    settle_timeout_s: float = 300.0  # how long the batch may take to reach final states
    quiet_timeout_s: float = 60.0  # how long the check waits for in-flight work
    relays: int = 0  # relays to wait for in the events' consumer group first; 0: none


@dataclass(frozen=True)
class DemoReport:
    """What the batch did and whether the guarantees hold afterwards."""

    batch: Batch
    statuses: dict[str, int]  # the batch's settlements per status, at the end
    http: Counter[str]  # HTTP answers by outcome, retries and duplicates included
    commands_sent: int  # Kafka messages, repeats included
    latency: LatencySplit  # accepted -> paid, whole and apart from the faults met
    check: Report
    seconds: float
    rate: int | None  # settlements offered per second; None: all at once
    booked_over: float  # seconds from the batch's first booking to its last
    by_rail: dict[str, dict[str, int]] = field(default_factory=dict)  # statuses per rail
    # The reconciler's record and a last read-only run (tools/chaos/reconciled.py)
    reconciliation: dict[str, Any] = field(default_factory=dict)

    @property
    def settled(self) -> int:
        """Settlements of the batch in a final state (or waiting for review)."""
        return sum(self.statuses.get(s, 0) for s in FINAL)

    @property
    def ok(self) -> bool:
        """Every settlement of the batch settled, every guarantee holds and the rail's
        account reconciles with no open break."""
        reconciled = bool(self.reconciliation.get("ok", False))
        return self.settled == self.batch.count and self.check.ok and reconciled


async def set_fault_profile(rail_url: str, profile: str) -> None:
    """Switch the simulator to a named fault profile."""
    async with httpx.AsyncClient(base_url=rail_url, timeout=10.0) as client:
        answer = await client.post("/_sim/faults", json={"profile": profile})
        answer.raise_for_status()


async def _statuses(conn: asyncpg.Connection, batch: Batch) -> dict[str, dict[str, int]]:
    """The batch's settlements per rail and status."""
    rows = await conn.fetch(STATUS_COUNTS, batch.tenant, batch.reference_pattern)
    by_rail: dict[str, dict[str, int]] = {}
    for r in rows:
        by_rail.setdefault(str(r["rail"]), {})[str(r["status"])] = int(r["n"])
    return by_rail


async def statuses_over_rails(conn: asyncpg.Connection, batch: Batch) -> dict[str, int]:
    """The batch's settlements per status, over every rail."""
    return _total(await _statuses(conn, batch))


def _total(by_rail: dict[str, dict[str, int]]) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for statuses in by_rail.values():
        totals.update(statuses)
    return dict(totals)


async def faults_met(rail_url: str, settlement_ids: list[str]) -> dict[str, list[str]]:
    """The faults the simulator sent each of `settlement_ids`; those that met none are absent."""
    async with httpx.AsyncClient(base_url=rail_url, timeout=30.0) as client:
        answer = await client.post("/_sim/faults/met", json={"settlement_ids": settlement_ids})
        answer.raise_for_status()
        met: dict[str, list[str]] = answer.json()["met"]
        return met


async def _latency(conn: asyncpg.Connection, batch: Batch, rail_url: str) -> LatencySplit:
    rows = await conn.fetch(PAID_SECONDS, batch.tenant, batch.reference_pattern)
    ids = [str(r["id"]) for r in await conn.fetch(BATCH_IDS, batch.tenant, batch.reference_pattern)]
    met = await faults_met(rail_url, ids)
    return split({str(r["id"]): float(r["d"]) for r in rows}, met)


def _describe(statuses: dict[str, int]) -> str:
    return "  ".join(f"{s} {statuses[s]}" for s in STATES if statuses.get(s))


async def _follow(
    conn: asyncpg.Connection,
    batch: Batch,
    timeout_s: float,
    sending: asyncio.Future[tuple[int, Counter[str]]],
    bar: Progress,
    booked: TaskID,
    settled: TaskID,
) -> None:
    """Poll the batch's statuses into the bars until all are final, sending failed, or timeout."""
    deadline = time.monotonic() + timeout_s
    sent_at: float | None = None
    while time.monotonic() < deadline:
        statuses = await statuses_over_rails(conn, batch)
        done = sum(statuses.get(s, 0) for s in FINAL)
        bar.update(booked, completed=sum(statuses.values()))
        bar.update(settled, completed=done, states=_describe(statuses))
        if sending.done() and (done >= batch.count or sending.exception() is not None):
            return
        if sending.done():
            sent_at = sent_at or time.monotonic()
            if not statuses and time.monotonic() - sent_at > NOTHING_BOOKED_S:
                # The ledger answered, yet nothing shows here: another database than ours.
                bar.console.print(
                    f"[red]nothing of the batch booked {NOTHING_BOOKED_S:.0f} s after sending: "
                    "do the ledger and this command use the same SETTLE_DATABASE_URL?[/]"
                )
                return
        await asyncio.sleep(POLL_SECONDS)


async def _send_and_follow(
    conn: asyncpg.Connection,
    batch: Batch,
    options: DemoOptions,
    settings: Settings,
    console: Console,
) -> tuple[int, Counter[str]]:
    """Half the batch over Kafka and half over HTTP, each at half the rate, followed on
    progress bars until every settlement is final (or the time is up); what was sent."""
    half = options.count // 2
    kafka = kafka_access(settings)
    columns = (
        TextColumn("{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[states]}"),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        http_task = bar.add_task("http", total=options.count - half, states="")
        booked = bar.add_task("booked", total=options.count, states="")
        settled = bar.add_task("settled", total=options.count, states="")
        # Each half takes half the rate, both from the same start
        pace = AT_ONCE if options.rate is None else Pace(options.rate / 2)
        sending = asyncio.gather(
            publish_commands(batch, range(half), kafka, settings.topic(COMMANDS), pace),
            post_settlements(
                batch,
                range(half, options.count),
                options.ledger_url,
                lambda: bar.advance(http_task),
                pace=pace,
            ),
        )
        try:
            await _follow(conn, batch, options.settle_timeout_s, sending, bar, booked, settled)
            commands_sent, http = await sending
        finally:
            sending.cancel()
    return commands_sent, http


async def run_demo(settings: Settings, options: DemoOptions, console: Console) -> DemoReport:
    """Submit the batch, follow it to final states, check the invariants; the report."""
    began = time.monotonic()
    token, tenant = next(iter(settings.tenant_by_token.items()))
    batch = Batch(
        uuid.uuid4().hex[:8],
        tenant,
        token,
        options.count,
        signing_secrets(settings, tenant),
        rails=tuple(rail.value for rail in settings.rails),
    )
    if options.fault_profile is not None:
        await set_fault_profile(options.rail_url, options.fault_profile)
    kafka = kafka_access(settings)
    group = settings.topic(CONSUMER_GROUP)
    if options.relays and not await wait_for_group(kafka, group, options.relays, RELAYS_READY_S):
        console.print(f"[yellow]{group} is not stable with {options.relays} relays yet[/]")
    conn = await asyncpg.connect(libpq_dsn(settings.database_url))
    try:
        commands_sent, http = await _send_and_follow(conn, batch, options, settings, console)
        console.print(f"checking the invariants (waiting up to {options.quiet_timeout_s:.0f} s)")
        check = await run_check(
            settings.database_url,
            kafka,
            settings.topic(EVENTS),
            effect_source(settings, options.rail_url),
            CheckOptions(wait_quiet_s=options.quiet_timeout_s),
        )
        # Read after the wait for quiet: late reversals and reviews have landed.
        by_rail = await _statuses(conn, batch)
        latency = await _latency(conn, batch, options.rail_url)
        booked_over = await conn.fetchval(BOOKED_OVER, batch.tenant, batch.reference_pattern)
    finally:
        await conn.close()
    console.print("reconciling the rail's account (the reconciler's next run, then a last one)")
    reconciliation = await reconciliation_verdict(settings, options.rail_url)
    seconds = time.monotonic() - began
    return DemoReport(
        batch,
        _total(by_rail),
        http,
        commands_sent,
        latency,
        check,
        seconds,
        options.rate,
        booked_over or 0.0,
        by_rail,
        reconciliation,
    )

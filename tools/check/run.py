"""Composition of a check run: wait for quiet, read every source, judge, report.

Read PostgreSQL first, then Kafka and the rail: on a busy system an event published after
the database snapshot can look like a stray one, which is why `wait_quiet_s` exists.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from sqlalchemy.engine import make_url

from tools.check.database import connect, in_flight, read_database
from tools.check.eventlog import read_events
from tools.check.invariants import CheckResult, all_hold, run_all
from tools.check.rail import EffectSource

POLL_SECONDS = 0.5


@dataclass(frozen=True)
class CheckOptions:
    """Bounds of a check run, in seconds."""

    wait_quiet_s: float = 0.0  # wait up to this long for in-flight work to finish first
    outbox_bound_s: float = 60.0  # an unpublished outbox row older than this is lost
    inbox_bound_s: float = 60.0  # a webhook still `received` after this is lost
    kafka_timeout_s: float = 300.0  # reading the whole events topic must end within this


@dataclass(frozen=True)
class Report:
    """The verdicts, and what they were judged on."""

    results: list[CheckResult]
    sources: dict[str, str]  # source name -> where it was read
    in_flight: dict[str, int]  # work still moving when the facts were read
    quiet: bool | None  # whether the wait for quiet succeeded; None when not asked
    counts: dict[str, int] = field(default_factory=dict)  # settlements, events read, ...

    @property
    def ok(self) -> bool:
        """True when every guarantee holds."""
        return all_hold(self.results)


async def wait_quiet(database_url: str, seconds: float) -> tuple[bool, dict[str, int]]:
    """Poll until nothing is in flight or `seconds` pass; whether it got quiet, and what moves."""
    conn = await connect(database_url)
    try:
        deadline = time.monotonic() + seconds
        while True:
            moving = await in_flight(conn)
            if not any(moving.values()):
                return True, moving
            if time.monotonic() >= deadline:
                return False, moving
            await asyncio.sleep(POLL_SECONDS)
    finally:
        await conn.close()


async def run_check(
    database_url: str,
    bootstrap: str,
    topic: str,
    rail: EffectSource,
    options: CheckOptions = CheckOptions(),
) -> Report:
    """Check every guarantee over the three sources; raises SourceUnavailable naming one."""
    quiet: bool | None = None
    if options.wait_quiet_s > 0:
        quiet, _ = await wait_quiet(database_url, options.wait_quiet_s)
    conn = await connect(database_url)
    try:
        moving = await in_flight(conn)
        db = await read_database(conn, options.outbox_bound_s, options.inbox_bound_s)
    finally:
        await conn.close()
    effects = await rail.effects()
    log = await read_events(bootstrap, topic, options.kafka_timeout_s)
    return Report(
        results=run_all(db, log, effects),
        sources={"postgresql": _where(database_url), "kafka": topic, "rail": effects.source},
        in_flight=moving,
        quiet=quiet,
        counts={
            "settlements": len(db.settlements),
            "events_read": log.messages,
            "settlements_with_effects": len(effects.effects),
        },
    )


def _where(database_url: str) -> str:
    """The database's host and name, without credentials."""
    url = make_url(database_url)
    return f"{url.host}:{url.port}/{url.database}"

"""Composition of a check run: wait for quiet, read every source, judge page by page, report.

The PostgreSQL snapshot is taken first, then the rail and Kafka are read: on a busy system an
event published after the snapshot can look like a stray one, which is why `wait_quiet_s`
exists. The rail's counts and the events go to a disk spill; the settlements are then read
in keyset pages from the same snapshot, each page judged with its own events and effects and
folded into the verdicts. Memory follows the page size, not the number of settlements.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import asyncpg
from sqlalchemy.engine import make_url

from services.adapters.kafka.access import KafkaAccess
from tools.check.database import connect, in_flight, read_ledger_wide, read_page, snapshot
from tools.check.eventlog import read_events
from tools.check.facts import DatabaseFacts, EventLogFacts, RailFacts
from tools.check.invariants import CheckResult, all_hold, run_all
from tools.check.pages import fold, without_ledger_wide
from tools.check.rail import EffectSource
from tools.check.spill import FactSpill

POLL_SECONDS = 0.5


@dataclass(frozen=True)
class CheckOptions:
    """Bounds of a check run, in seconds."""

    wait_quiet_s: float = 0.0  # wait up to this long for in-flight work to finish first
    outbox_bound_s: float = 60.0  # an unpublished outbox row older than this is lost
    inbox_bound_s: float = 60.0  # a webhook still `received` after this is lost
    kafka_timeout_s: float = 300.0  # reading the whole events topic must end within this
    page_size: int = 10_000  # settlements judged at a time; memory follows it

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError(f"page_size must be 1 or more, not {self.page_size}")


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
    kafka: KafkaAccess,
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
        with FactSpill() as spill:
            async with snapshot(conn):
                wide = await read_ledger_wide(conn, options.outbox_bound_s, options.inbox_bound_s)
                effects = await _spill_effects(rail, spill)
                log = await read_events(kafka, topic, spill, options.kafka_timeout_s)
                spill.seal()
                results, on_rails = await _judge_pages(
                    conn, wide, log, effects, spill, options.page_size
                )
            with_effects = spill.effect_count
    finally:
        await conn.close()
    return Report(
        results=results,
        sources={"postgresql": _where(database_url), "kafka": topic, "rail": effects.source},
        in_flight=moving,
        quiet=quiet,
        counts={
            "settlements": sum(on_rails.values()),
            # per rail, where the stack drives more than one
            **(
                {f"settlements_on_{r}": n for r, n in sorted(on_rails.items())}
                if len(on_rails) > 1
                else {}
            ),
            "events_read": log.messages,
            "settlements_with_effects": with_effects,
        },
    )


async def _spill_effects(rail: EffectSource, spill: FactSpill) -> RailFacts:
    """The rail's counts written to the spill a page at a time; the facts say how complete
    they are and where they were read, the counts stay in the spill."""
    async for page in rail.pages():
        spill.add_effects(page)
    return RailFacts({}, exhaustive=rail.exhaustive, source=rail.source)


async def _judge_pages(
    conn: asyncpg.Connection,
    wide: DatabaseFacts,
    log: EventLogFacts,
    rail: RailFacts,
    spill: FactSpill,
    page_size: int,
) -> tuple[list[CheckResult], Counter[str]]:
    """The verdicts over every page of settlements, and how many settlements there were on
    each rail.
    The ledger-wide findings and the undecodable messages are judged with the first page
    only, so each is counted once."""
    results: list[CheckResult] = []
    settlements: Counter[str] = Counter()
    base, base_log = wide, log
    after: str | None = None
    while True:
        ids, db = await read_page(conn, base, after, page_size)
        page_log = replace(base_log, by_settlement=spill.events_in(ids))
        page_rail = replace(rail, effects=spill.effects_in(ids))
        results = fold(results, run_all(db, page_log, page_rail))
        settlements.update(s.rail or "unknown" for s in db.settlements.values())
        if ids.through is None:
            return results, settlements
        after = ids.through
        base, base_log = without_ledger_wide(wide), replace(log, undecodable=())


def _where(database_url: str) -> str:
    """The database's host and name, without credentials."""
    url = make_url(database_url)
    return f"{url.host}:{url.port}/{url.database}"

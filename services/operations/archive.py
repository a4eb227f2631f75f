"""Detaching whole months of the history (migrations 0010 and 0012) for an archiver.

A month is archived when every history table's partition of it is detached: the tables
stay in the database under their names (`postings_y2019m03`, ...) for an archiver to dump and
drop. A month is refused while it holds a settlement not in a final state, or an open
reconciliation break that concerns it (one about a settlement it holds, or one without a
settlement first seen before its end): its history may still be read or written. So is a
month whose inbox still holds an event for the worker or an operator (received, parked or
dead), and one that ended less than the rail's redelivery horizon ago: the inbox recognises a
redelivered event by the months since then, which must stay attached. Months go oldest first
and stop at the first refused one, so what stays attached is one unbroken run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

import asyncpg

from services.adapters.postgres.history_months import HISTORY_TABLES
from services.domain.settlement import TERMINAL
from services.inbox.store import REDELIVERY_HORIZON
from services.operations.audit import record_action
from services.platform.clock import utc_now

_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
_PARTITION = re.compile(r"_y(\d{4})m(\d{2})$")

PARTITIONS = """
SELECT c.relname, i.inhdetachpending FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = $1::regclass
"""
UNFINISHED = """
SELECT count(DISTINCT s.id)
  FROM settlement_transitions t JOIN settlements s ON s.id = t.settlement_id
 WHERE t.occurred_at >= $1 AND t.occurred_at < $2 AND s.status <> ALL($3::text[])
"""
OPEN_BREAKS = """
SELECT count(*) FROM reconciliation_breaks b
 WHERE b.status = 'open'
   AND (b.settlement_id IN (SELECT settlement_id FROM settlement_transitions
                             WHERE occurred_at >= $1 AND occurred_at < $2)
        OR (b.settlement_id IS NULL AND b.first_seen < $2))
"""
INBOX_OPEN = """
SELECT count(*) FROM inbox_events
 WHERE received_month = $1 AND status IN ('received', 'parked', 'dead')
"""


def parse_month(text: str) -> date:
    """The first day of a `YYYY-MM` month; ValueError naming the form otherwise."""
    found = _MONTH.match(text)
    if found is None:
        raise ValueError(f"a month is YYYY-MM, like 2019-03, not {text!r}")
    return date(int(found[1]), int(found[2]), 1)


def month_of(partition: str) -> date | None:
    """The month a history partition holds, from its name; None for another table."""
    found = _PARTITION.search(partition)
    return None if found is None else date(int(found[1]), int(found[2]), 1)


def next_month(month: date) -> date:
    """The first day of the month after `month`."""
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def months_before(partitions: Iterable[str], before: date) -> list[date]:
    """The months older than `before` that some partition in `partitions` holds, oldest first."""
    months = {month_of(name) for name in partitions}
    return sorted(m for m in months if m is not None and m < before)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a month stays attached."""

    month: date
    unfinished: int  # settlements with history in the month, not in a final state
    open_breaks: int  # open reconciliation breaks that concern the month
    inbox_open: int  # inbox events of the month received, parked or dead
    redeliverable: bool  # ended less than the redelivery horizon ago

    def __str__(self) -> str:
        recent = ", its events may still be redelivered" if self.redeliverable else ""
        return (
            f"{self.month:%Y-%m} refused: {self.unfinished} settlements not final, "
            f"{self.open_breaks} open breaks, {self.inbox_open} inbox events open{recent}"
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """What an archive of the months before a month does: the partitions to detach, by month
    (oldest first), and the first month refused, if one is."""

    detach: Sequence[tuple[date, Sequence[tuple[str, str]]]]  # month, (table, partition)
    refused: Refusal | None


def _bounds(month: date) -> tuple[datetime, datetime]:
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    end = next_month(month)
    return start, datetime(end.year, end.month, 1, tzinfo=UTC)


async def refusal(conn: asyncpg.Connection, month: date, now: datetime) -> Refusal | None:
    """Why `month` may not be archived at `now`, or None if it may."""
    start, end = _bounds(month)
    final = sorted(status.value for status in TERMINAL)
    unfinished = await conn.fetchval(UNFINISHED, start, end, final)
    open_breaks = await conn.fetchval(OPEN_BREAKS, start, end)
    inbox_open = await conn.fetchval(INBOX_OPEN, start)
    redeliverable = end + REDELIVERY_HORIZON > now
    if unfinished or open_breaks or inbox_open or redeliverable:
        return Refusal(month, int(unfinished), int(open_breaks), int(inbox_open), redeliverable)
    return None


async def plan(conn: asyncpg.Connection, before: date) -> Plan:
    """The months before `before` to detach, oldest first, up to the first refused one."""
    now = utc_now()
    attached: dict[str, list[str]] = {}
    for table in HISTORY_TABLES:
        attached[table] = [row["relname"] for row in await conn.fetch(PARTITIONS, table)]
    every = [name for names in attached.values() for name in names]
    detach: list[tuple[date, Sequence[tuple[str, str]]]] = []
    for month in months_before(every, before):
        refused = await refusal(conn, month, now)
        if refused is not None:
            return Plan(detach, refused)
        parts = [(t, n) for t, names in attached.items() for n in names if month_of(n) == month]
        detach.append((month, parts))
    return Plan(detach, None)


async def detach_month(
    conn: asyncpg.Connection, month: date, parts: Sequence[tuple[str, str]], actor: str
) -> None:
    """Audit, then detach every partition of `month` (concurrently: writes to the history go
    on). Run again after an interruption, it finishes a detach left pending."""
    await record_action(
        conn,
        actor=actor,
        action="history.archive",
        target=f"{month:%Y-%m}",
        detail={"partitions": [name for _, name in parts]},
        before={"attached": True},
        after={"attached": False},
        now=utc_now(),
    )
    for table, name in parts:
        pending = await conn.fetchval(
            "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = $1::regclass", name
        )
        how = "FINALIZE" if pending else "CONCURRENTLY"
        await conn.execute(f'ALTER TABLE {table} DETACH PARTITION "{name}" {how}')

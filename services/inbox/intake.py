"""Storing webhooks in groups: concurrent requests share one INSERT and one commit.

Each webhook request hands its event to `EventStore.store` and waits; a few workers take
whatever is waiting, up to `max_batch`, and store it with one multi-row
`INSERT ... ON CONFLICT DO NOTHING` (committed with synchronous commit before anyone is
answered; `platform.group_commit`). So a request still answers only once its row is durable, or
once it is known to be a duplicate, but under load many webhooks share one fsync.

With an `applier` (the apply worker), the rows just stored are applied in the same
transaction, after the INSERT and under a savepoint (`StoredApplier.apply_stored`): one commit
stores and applies them, with no second transaction to find them again. Store before logic
still holds: an apply that fails is rolled back to the savepoint alone, so its rows commit
`received` and the apply loops take them; a crash before the commit answers nobody and the
rail redelivers; a duplicate inserts nothing, so it applies nothing.

The table is partitioned by the month an event is received in (migration 0012): the unique
keys dedupe within a month, and the INSERT also skips an event whose id or change is stored in
an earlier month within the rail's redelivery horizon, in the same statement. Two deliveries
of one event in flight together across the turn of a month may both be stored; applying is
the settlement's guarded transition, so the second moves nothing (docs/retention.md).

Within a group, a second event with the id or the change of an earlier one is answered as
that one's duplicate without being sent (the database would refuse it the same way). Rows go
in ordered by change, then event id, so two groups racing on the same redelivered changes
wait on each other in one order instead of deadlocking; a deadlock with anything else is
retried. A group the database refuses as a whole (one body it cannot hold) is stored one
event at a time, so only the bad event fails. A duplicate whose change a parked event of another
id holds is refused for now instead (503 `change_pending`; `store.RECORD_MONTH` says why).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

import asyncpg

from services.adapters.postgres.history_months import month_start
from services.adapters.postgres.store_errors import REFUSED, retry_contended
from services.domain.errors import StoreUnavailable
from services.domain.rail_event import InboxStatus, ignore_reason, signal_of
from services.inbox.apply import Outcome
from services.inbox.errors import ChangePending
from services.inbox.events import RailEvent
from services.inbox.kept_body import kept
from services.inbox.store import (
    RAIL,
    StoredEvent,
    held_by_parked,
    months_looked_in,
)
from services.platform.group_commit import GroupCommit

# One statement stores the batch. An event whose id or change is stored in this month is
# skipped by the unique keys (ON CONFLICT); one stored in an earlier month within the horizon
# (or, near the turn, in the next) by the NOT EXISTS tests on the months from $12 to before
# $13 (`months_looked_in`), each one probe of a month's unique index. The settlements a new
# row awaiting applying may be about come back with it, found as `apply.FIND_SETTLEMENTS`
# finds them, so applying it as stored needs no search of its own.
INSERT_EVENTS = """
WITH stored AS (
    INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, change_key,
                              settlement_id, payload, status, reason, received_at,
                              received_month, next_attempt_at, amount_reversed)
    SELECT $1, e, t, o, c, s, p, st, r, at, m, at, ar
      FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::bytea[],
                  $8::text[], $9::text[], $10::timestamptz[], $11::timestamptz[], $14::bigint[])
           AS u(e, t, o, c, s, p, st, r, at, m, ar)
     WHERE NOT EXISTS (SELECT 1 FROM inbox_events x
                        WHERE x.rail = $1 AND x.rail_event_id = u.e
                          AND x.received_month >= $12 AND x.received_month < $13)
       AND NOT EXISTS (SELECT 1 FROM inbox_events x
                        WHERE x.rail = $1 AND x.change_key = u.c
                          AND x.received_month >= $12 AND x.received_month < $13)
    ON CONFLICT DO NOTHING
    RETURNING rail_event_id, id, object_id, settlement_id, status
)
SELECT rail_event_id, id,
       CASE WHEN status = 'received' THEN ARRAY(
           SELECT x.id FROM settlements x WHERE x.rail_reference = stored.object_id
           UNION
           SELECT x.id FROM settlements x WHERE x.id = stored.settlement_id
       ) END AS settlements
  FROM stored
"""


class Inserted(NamedTuple):
    """What one INSERT stored: row ids by event id, and the settlements the new rows that
    await applying may be about."""

    ids: dict[str, int]
    settlements: set[uuid.UUID]


def initial_status(event: RailEvent) -> tuple[InboxStatus, str | None]:
    """The status a new row starts in: received, or ignored (with why) if it carries no signal."""
    if signal_of(event.event_type) is None:
        return InboxStatus.IGNORED, ignore_reason(event.event_type)
    return InboxStatus.RECEIVED, None


class Arrival(NamedTuple):
    """An event to store: what was received, its body, and when."""

    event: RailEvent
    payload: bytes
    now: datetime


async def insert_events(
    conn: asyncpg.Connection, rows: Sequence[Arrival], rail: str = RAIL
) -> dict[str, int]:
    """Insert `rows` (events of `rail`) in the caller's transaction, skipping any whose id or
    change is stored already (in the months since `REDELIVERY_HORIZON` before the earliest);
    the event ids stored now, with their row ids."""
    return (await insert_found(conn, rows, rail)).ids


async def insert_found(
    conn: asyncpg.Connection, rows: Sequence[Arrival], rail: str = RAIL
) -> Inserted:
    """`insert_events`, with the settlements the new rows may be about (`Inserted`)."""
    new = await conn.fetch(INSERT_EVENTS, rail, *_columns(rows))
    return Inserted(
        {r["rail_event_id"]: r["id"] for r in new},
        {sid for r in new for sid in r["settlements"] or ()},
    )


class StoredApplier(Protocol):
    """Applies rows in the transaction that stored them (the apply worker)."""

    async def apply_stored(
        self,
        conn: asyncpg.Connection,
        events: Sequence[StoredEvent],
        settlements: Collection[uuid.UUID],
    ) -> Sequence[Outcome] | None:
        """Apply `events`, stored by `conn`'s open transaction, to `settlements` (every one
        they may be about) and record their outcomes in it; None if the apply failed, leaving
        the rows as stored."""

    def committed(self, events: Sequence[StoredEvent], outcomes: Sequence[Outcome] | None) -> None:
        """After the commit: count the outcomes, or see to rows left awaiting the worker."""


def stored_event(arrival: Arrival, row_id: int) -> StoredEvent:
    """The row just stored for `arrival`, as a claim would read it before its first attempt."""
    e = arrival.event
    return StoredEvent(
        row_id,
        e.event_id,
        e.event_type,
        e.object_id,
        e.settlement_id,
        0,
        InboxStatus.RECEIVED,
        arrival.now,
        e.amount_reversed,
        e.reported,
    )


def _stopping() -> StoreUnavailable:
    return StoreUnavailable("the inbox is shutting down; retry")


class EventStore:
    """Stores rail events for concurrent requests in groups; see the module docstring."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        applier: StoredApplier | None = None,
        *,
        workers: int = 2,
        max_batch: int = 500,
    ) -> None:
        self._pool = pool
        self._applier = applier
        self._groups: GroupCommit[Arrival, bool] = GroupCommit(
            self._store_group, workers=workers, max_batch=max_batch, stopping=_stopping
        )

    async def store(
        self, event: RailEvent, payload: bytes, now: datetime
    ) -> tuple[bool, InboxStatus]:
        """Store `event` durably unless its id or change is stored already: (stored, status).
        Raises what the store raised (connection trouble) if it could not be stored."""
        stored = await self._groups.submit(Arrival(event, payload, now))
        return stored, initial_status(event)[0]

    async def _store_group(self, group: Sequence[Arrival]) -> list[bool | Exception]:
        """Per waiter: True if stored now, False if a duplicate, or the error it gets."""
        leads: dict[str, Arrival] = {}  # event id -> the first waiter with it
        lead_of: list[str] = []  # per waiter: the event id of the waiter that leads it
        changes: dict[str, str] = {}  # change key -> event id of its lead
        for w in group:
            e = w.event
            lead = e.event_id if e.event_id in leads else changes.get(e.change_key or "")
            if lead is None:
                leads[e.event_id] = w
                if e.change_key is not None:
                    changes[e.change_key] = e.event_id
                lead = e.event_id
            lead_of.append(lead)
        ordered = sorted(leads.values(), key=lambda w: (w.event.change_key or "", w.event.event_id))
        stored = await self._insert(ordered)
        answers: list[bool | Exception] = []
        for w, lead in zip(group, lead_of, strict=True):
            answer = stored[lead]
            followed = lead != w.event.event_id or leads[lead] is not w
            answers.append(False if followed and not isinstance(answer, Exception) else answer)
        return await self._refuse_held(group, answers)

    async def _refuse_held(
        self, group: Sequence[Arrival], answers: list[bool | Exception]
    ) -> list[bool | Exception]:
        """`answers`, each duplicate whose change a parked row holds refused (ChangePending)."""
        dups = [w.event for w, a in zip(group, answers, strict=True) if a is False]
        changes = [(e.change_key, e.event_id) for e in dups if e.change_key is not None]
        times = [w.now for w in group]
        held = await held_by_parked(self._pool, changes, min(times), max(times))
        return [
            ChangePending() if w.event.event_id in held and a is False else a
            for w, a in zip(group, answers, strict=True)
        ]

    async def _insert(self, rows: Sequence[Arrival]) -> dict[str, bool | Exception]:
        async def insert() -> dict[str, bool | Exception]:
            async with self._pool.acquire() as conn:
                if self._applier is None:
                    inserted = await insert_events(conn, rows)
                else:
                    inserted = await self._store_and_apply(conn, self._applier, rows)
            return {w.event.event_id: w.event.event_id in inserted for w in rows}

        try:
            return await retry_contended(insert)
        except REFUSED:
            if len(rows) == 1:
                raise
        return await self._one_by_one(rows)

    @staticmethod
    async def _store_and_apply(
        conn: asyncpg.Connection, applier: StoredApplier, rows: Sequence[Arrival]
    ) -> dict[str, int]:
        """Insert `rows` and apply the new ones that await applying, in one transaction, in
        the order a worker would claim them (received, then row id)."""
        async with conn.transaction():
            inserted = await insert_found(conn, rows)
            fresh = sorted(
                (
                    stored_event(w, inserted.ids[w.event.event_id])
                    for w in rows
                    if w.event.event_id in inserted.ids
                    and initial_status(w.event)[0] is InboxStatus.RECEIVED
                ),
                key=lambda e: (e.received_at, e.id),
            )
            outcomes = (
                await applier.apply_stored(conn, fresh, inserted.settlements) if fresh else ()
            )
        if fresh:
            applier.committed(fresh, outcomes)
        return inserted.ids

    async def _one_by_one(self, rows: Sequence[Arrival]) -> dict[str, bool | Exception]:
        answers: dict[str, bool | Exception] = {}
        for w in rows:
            try:
                answers.update(await self._insert([w]))
            except REFUSED as e:
                answers[w.event.event_id] = e
        return answers


def _columns(rows: Sequence[Arrival]) -> list[object]:
    """INSERT_EVENTS' $2 to $14."""
    firsts = [initial_status(w.event) for w in rows]
    times = [w.now for w in rows]
    return [
        [w.event.event_id for w in rows],
        [w.event.event_type for w in rows],
        [w.event.object_id for w in rows],
        [w.event.change_key for w in rows],
        [w.event.settlement_id for w in rows],
        [kept(w.payload) for w in rows],
        [status for status, _ in firsts],
        [reason for _, reason in firsts],
        times,
        [month_start(at) for at in times],
        *months_looked_in(min(times), max(times)),
        [w.event.amount_reversed for w in rows],
    ]

"""A break's lineage: what the books hold that explains it, from the instruction to the ledger.

For each stored break: the settlement it names, its transitions, its outbox rows with their
event ids, the rail instruction with its idempotency key and attempts, the inbox rows that
name the settlement or one of its rail objects, its postings, and the rail objects involved
(the break's own with the values the break stored, and those the settlement and instruction
reference). A break naming no settlement (unknown_at_rail, balance_mismatch) has only what
its rail object explains.

Everything is read by id: breaks go BATCH at a time, and each batch costs one query per
table, by lists of ids on the tables' keys and indexes, whatever the number of breaks.
The document is plain JSON values (amounts exact ints, times ISO 8601) with its keys in a
fixed order and its lists in the order the rows happened.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down

BATCH = 500

BREAKS = """
SELECT id, break_key, settlement_id, rail_object_id, field, expected, actual
  FROM reconciliation_breaks WHERE id = ANY($1::bigint[]) OR break_key = ANY($2::text[])
 ORDER BY id
"""
SETTLEMENTS = """
SELECT id, tenant, reference, status, version, amount, currency, destination, rail_reference,
       reason, created_at, updated_at
  FROM settlements WHERE id = ANY($1::uuid[])
"""
TRANSITIONS = """
SELECT settlement_id, sequence, from_status, to_status, reason, actor, occurred_at
  FROM settlement_transitions WHERE settlement_id = ANY($1::uuid[])
 ORDER BY settlement_id, sequence
"""
OUTBOX = """
SELECT settlement_id, id, event_id, sequence, topic, created_at, published_at
  FROM outbox WHERE settlement_id = ANY($1::uuid[])
 ORDER BY settlement_id, sequence
"""
INSTRUCTIONS = """
SELECT settlement_id, idempotency_key, method, status, attempts, fence, first_sent_at,
       next_attempt_at, last_error, error_class, rail_reference, updated_at
  FROM rail_instructions WHERE settlement_id = ANY($1::uuid[])
"""
INBOX = """
SELECT id, rail_event_id, event_type, object_id, change_key, settlement_id, status, attempts,
       reason, received_at, applied_at
  FROM inbox_events WHERE settlement_id = ANY($1::uuid[]) OR object_id = ANY($2::text[])
 ORDER BY id
"""
POSTINGS = """
SELECT e.settlement_id, e.id AS entry_id, e.kind, e.occurred_at, p.id, p.account_id, p.amount,
       p.currency
  FROM journal_entries AS e JOIN postings AS p ON p.entry_id = e.id
 WHERE e.settlement_id = ANY($1::uuid[])
 ORDER BY e.settlement_id, e.occurred_at, p.id
"""

Ref = int | str  # a stored break's id, or its stored key (`store.stored_key`)
Document = dict[str, Any]

_NO_SETTLEMENT = uuid.UUID(int=0)  # no settlement has it: a break naming none finds no rows


async def lineage_of(
    conn: asyncpg.Connection | asyncpg.Pool, refs: Iterable[Ref]
) -> dict[Ref, Document]:
    """The lineage of each stored break among `refs` (ids or stored keys), by the ref given;
    a ref that names no stored break is left out."""
    wanted = list(dict.fromkeys(refs))
    found: dict[Ref, Document] = {}
    for i in range(0, len(wanted), BATCH):
        found |= await _batch(conn, wanted[i : i + BATCH])
    return found


@dataclass
class _Rows:
    """One batch's rows, by the settlement (or break) they belong to."""

    settlements: dict[uuid.UUID, asyncpg.Record]
    instructions: dict[uuid.UUID, asyncpg.Record]
    transitions: dict[uuid.UUID, list[asyncpg.Record]]
    outbox: dict[uuid.UUID, list[asyncpg.Record]]
    postings: dict[uuid.UUID, list[asyncpg.Record]]
    named: dict[int, dict[str, list[str]]]  # by break id: rail object id -> what names it
    inbox: list[asyncpg.Record]


async def _batch(
    conn: asyncpg.Connection | asyncpg.Pool, refs: Sequence[Ref]
) -> dict[Ref, Document]:
    """One batch of breaks, read with one query per table."""
    ids = [r for r in refs if isinstance(r, int)]
    keys = [r for r in refs if isinstance(r, str)]
    with unavailable_when_down("PostgreSQL is unreachable; no lineage was read"):
        breaks = await conn.fetch(BREAKS, ids, keys)
        sids = sorted({b["settlement_id"] for b in breaks if b["settlement_id"]})
        settlements = _one_each(await conn.fetch(SETTLEMENTS, sids), "id")
        instructions = _one_each(await conn.fetch(INSTRUCTIONS, sids), "settlement_id")
        named = {
            b["id"]: _named(
                b, settlements.get(b["settlement_id"]), instructions.get(b["settlement_id"])
            )
            for b in breaks
        }
        objects = sorted({o for n in named.values() for o in n})
        rows = _Rows(
            settlements,
            instructions,
            _grouped(await conn.fetch(TRANSITIONS, sids)),
            _grouped(await conn.fetch(OUTBOX, sids)),
            _grouped(await conn.fetch(POSTINGS, sids)),
            named,
            await conn.fetch(INBOX, sids, objects),
        )
    wanted_ids = set(ids)
    # By key, the latest break of the key (rows come by id): the one that is open now.
    return {
        (b["id"] if b["id"] in wanted_ids else b["break_key"]): _document(b, rows) for b in breaks
    }


def _document(row: asyncpg.Record, rows: _Rows) -> Document:
    """One break's lineage, its keys in a fixed order."""
    sid: uuid.UUID | None = row["settlement_id"]
    objects = rows.named[row["id"]]
    mine = sid if sid is not None else _NO_SETTLEMENT
    return {
        "break_id": row["id"],
        "settlement": _plain(rows.settlements.get(mine)),
        "transitions": [_plain(t, "settlement_id") for t in rows.transitions.get(mine, [])],
        "outbox": [_plain(o, "settlement_id") for o in rows.outbox.get(mine, [])],
        "instruction": _plain(rows.instructions.get(mine), "settlement_id"),
        "inbox": [
            _plain(e) for e in rows.inbox if e["settlement_id"] == mine or e["object_id"] in objects
        ],
        "postings": [_plain(p, "settlement_id") for p in rows.postings.get(mine, [])],
        "rail_objects": [_rail_object(o, by, row) for o, by in objects.items()],
    }


def _named(
    row: asyncpg.Record, settlement: asyncpg.Record | None, instruction: asyncpg.Record | None
) -> dict[str, list[str]]:
    """The rail objects involved, each with what names it: the break, settlement, instruction."""
    named: dict[str, list[str]] = {}
    for source, object_id in (
        ("break", row["rail_object_id"]),
        ("settlement", settlement["rail_reference"] if settlement else None),
        ("instruction", instruction["rail_reference"] if instruction else None),
    ):
        if object_id:
            named.setdefault(object_id, []).append(source)
    return dict(sorted(named.items()))


def _rail_object(object_id: str, named_by: list[str], row: asyncpg.Record) -> Document:
    """One rail object involved; the break's own carries what the break stored for it."""
    own = "break" in named_by
    return {
        "id": object_id,
        "named_by": named_by,
        "field": row["field"] if own else None,
        "expected": json.loads(row["expected"]) if own else None,
        "actual": json.loads(row["actual"]) if own else None,
    }


def _one_each(rows: Iterable[asyncpg.Record], column: str) -> dict[uuid.UUID, asyncpg.Record]:
    return {r[column]: r for r in rows}


def _grouped(rows: Iterable[asyncpg.Record]) -> dict[uuid.UUID, list[asyncpg.Record]]:
    """Rows by their settlement, in the order the query put them."""
    grouped: dict[uuid.UUID, list[asyncpg.Record]] = {}
    for row in rows:
        grouped.setdefault(row["settlement_id"], []).append(row)
    return grouped


def _plain(row: asyncpg.Record | None, *leave_out: str) -> Document | None:
    """A row as JSON values, in its columns' order: ids and times as text, amounts as ints."""
    if row is None:
        return None
    return {k: _value(v) for k, v in row.items() if k not in leave_out}


def _value(value: object) -> object:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value

"""Facts from PostgreSQL, in one read-only, repeatable-read transaction: the ledger-wide
findings counted and cut in SQL, and each settlement's own facts one keyset page at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TypeVar

import asyncpg

from services.adapters.postgres.store_errors import UNREACHABLE
from services.platform.config import libpq_dsn
from tools.check.errors import SourceUnavailable
from tools.check.facts import DatabaseFacts, Offenders, SettlementFact
from tools.check.invariants import FIRST
from tools.check.pages import IdRange, page_range

T = TypeVar("T")

# One page of settlements in id order, with its audit trail; {after} bounds it below.
SETTLEMENTS = """
SELECT s.id::text AS id, s.tenant, s.amount, s.currency::text AS currency, s.status, s.reason,
       s.amount_reversed, s.rail,
       coalesce(t.history, '{{}}') AS history, coalesce(t.sequences, '{{}}') AS sequences,
       coalesce(t.sources, '{{}}') AS sources
  FROM (SELECT * FROM settlements WHERE {after} ORDER BY id LIMIT $1) s
  LEFT JOIN LATERAL (
       SELECT array_agg(to_status ORDER BY sequence) AS history,
              array_agg(sequence ORDER BY sequence) AS sequences,
              array_agg(from_status ORDER BY sequence) AS sources
         FROM settlement_transitions WHERE settlement_id = s.id) t ON true
 ORDER BY s.id
"""
# The rest of a page's facts, over its id range ({ids} on the settlement id column).
NETS = """
SELECT e.settlement_id::text AS sid, p.account_id, sum(p.amount) AS net
  FROM postings p
  JOIN (SELECT id, settlement_id FROM journal_entries
        WHERE settlement_id IS NOT NULL AND {ids}) e ON e.id = p.entry_id
 GROUP BY 1, 2 HAVING sum(p.amount) <> 0
"""
INSTRUCTIONS_ENDED = """
SELECT settlement_id::text AS sid, status FROM rail_instructions
 WHERE status IN ('transferred', 'failed') AND {ids}
"""
FIRST_UNPUBLISHED = """
SELECT settlement_id::text AS sid, min(sequence) AS sequence
  FROM outbox WHERE published_at IS NULL AND {ids} GROUP BY 1
"""
# Each of these selects the offending ids, one column; counted and cut in SQL.
STALE_OUTBOX = """
SELECT event_id::text FROM outbox
 WHERE published_at IS NULL AND created_at < now() - make_interval(secs => $1)
"""
UNAPPLIED_WEBHOOKS = """
SELECT coalesce(rail_event_id, 'inbox:' || id) FROM inbox_events
 WHERE status = 'received' AND coalesce(btrim(reason), '') = ''
   AND received_at < now() - make_interval(secs => $1)
"""
# Set aside is accounted for only with its reason; a mismatch (never applied, final) also
# with both sides of what differs, for reconciliation and an operator to read.
UNEXPLAINED_WEBHOOKS = """
SELECT coalesce(rail_event_id, 'inbox:' || id) FROM inbox_events
 WHERE (status IN ('parked', 'dead', 'mismatch') AND coalesce(btrim(reason), '') = '')
    OR (status = 'mismatch' AND coalesce(jsonb_array_length(mismatch), 0) = 0)
"""
UNBALANCED_CURRENCIES = "SELECT currency::text FROM postings GROUP BY 1 HAVING sum(amount) <> 0"
UNBALANCED_ENTRIES = """
SELECT DISTINCT entry_id::text FROM postings GROUP BY entry_id, currency HAVING sum(amount) <> 0
"""
BALANCE_MISMATCHES = """
SELECT coalesce(b.account_id, p.account_id)
  FROM (SELECT account_id, sum(balance) AS total FROM account_balances GROUP BY 1) b
  FULL JOIN (SELECT account_id, sum(amount) AS total FROM postings GROUP BY 1) p
    ON p.account_id = b.account_id
 WHERE coalesce(b.total, 0) <> coalesce(p.total, 0)
"""
# The same rail change applied twice: by event id, by change key, or by object and type.
APPLIED_TWICE = """
SELECT coalesce(min(settlement_id::text), min(rail_event_id)) FROM inbox_events
 WHERE status = 'applied' GROUP BY rail, rail_event_id HAVING count(*) > 1
UNION
SELECT coalesce(min(settlement_id::text), min(rail_event_id)) FROM inbox_events
 WHERE status = 'applied' AND change_key IS NOT NULL
 GROUP BY rail, change_key HAVING count(*) > 1
UNION
SELECT coalesce(min(settlement_id::text), min(rail_event_id)) FROM inbox_events
 WHERE status = 'applied' AND object_id IS NOT NULL AND event_type IS NOT NULL
 GROUP BY rail, object_id, event_type, amount_reversed HAVING count(*) > 1
"""
IN_FLIGHT = """
SELECT (SELECT count(*) FROM rail_instructions WHERE status IN ('pending', 'processing'))
           AS instructions,
       (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS outbox,
       (SELECT count(*) FROM inbox_events WHERE status IN ('received', 'parked')) AS inbox,
       (SELECT count(*) FROM settlements
         WHERE status NOT IN ('paid', 'partly_reversed', 'failed', 'reversed', 'needs_review'))
           AS settlements
"""
# The database away, or refusing our session or a statement: no verdict can be read from it.
_DRIVER_ERRORS = (*UNREACHABLE, asyncpg.PostgresError)


def _offenders_of(select: str) -> str:
    return (
        f"SELECT count(*) OVER () AS total, o.id FROM ({select}) AS o(id) "
        f"ORDER BY o.id LIMIT {FIRST}"
    )


async def _offenders(conn: asyncpg.Connection, select: str, *args: object) -> Offenders:
    rows = await _fetch(conn, _offenders_of(select), *args)
    return Offenders(rows[0]["total"] if rows else 0, tuple(str(r["id"]) for r in rows))


async def connect(database_url: str) -> asyncpg.Connection:
    """A connection to the database, or SourceUnavailable."""
    try:
        return await asyncpg.connect(libpq_dsn(database_url), timeout=10, command_timeout=300)
    except _DRIVER_ERRORS as e:
        raise SourceUnavailable("postgresql", f"cannot connect: {e}") from e


@asynccontextmanager
async def snapshot(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """One read-only, repeatable-read transaction: every read inside it sees one snapshot,
    taken by its first statement."""
    transaction = conn.transaction(isolation="repeatable_read", readonly=True)
    await _guarded(transaction.start())
    try:
        yield
    finally:
        # Read-only: ending it either way leaves the database as it was.
        await _guarded(transaction.rollback())


async def read_ledger_wide(
    conn: asyncpg.Connection, outbox_bound_s: float, inbox_bound_s: float
) -> DatabaseFacts:
    """The facts counted over the whole ledger, with no settlement's own facts yet."""
    return DatabaseFacts(
        settlements={},
        nets={},
        transferred=frozenset(),
        first_unpublished={},
        stale_outbox=await _offenders(conn, STALE_OUTBOX, outbox_bound_s),
        unapplied_webhooks=await _offenders(conn, UNAPPLIED_WEBHOOKS, inbox_bound_s),
        unexplained_webhooks=await _offenders(conn, UNEXPLAINED_WEBHOOKS),
        unbalanced_currencies=await _offenders(conn, UNBALANCED_CURRENCIES),
        unbalanced_entries=await _offenders(conn, UNBALANCED_ENTRIES),
        balance_mismatches=await _offenders(conn, BALANCE_MISMATCHES),
        webhooks_applied_twice=await _offenders(conn, APPLIED_TWICE),
    )


async def read_page(
    conn: asyncpg.Connection, base: DatabaseFacts, after: str | None, page_size: int
) -> tuple[IdRange, DatabaseFacts]:
    """The next page of at most `page_size` settlements after `after` (keyset on
    settlements.id), the id range it answers for, and its facts added to `base`."""
    bound, args = _bounds("id", IdRange(after, None), 2)
    rows = await _fetch(conn, SETTLEMENTS.format(after=bound), page_size, *args)
    ids = page_range(after, [r["id"] for r in rows], page_size)
    bound, args = _bounds("settlement_id", ids, 1)
    nets: defaultdict[str, dict[str, int]] = defaultdict(dict)
    for r in await _fetch(conn, NETS.format(ids=bound), *args):
        nets[r["sid"]][r["account_id"]] = int(r["net"])
    ended = await _fetch(conn, INSTRUCTIONS_ENDED.format(ids=bound), *args)
    unpublished = await _fetch(conn, FIRST_UNPUBLISHED.format(ids=bound), *args)
    return ids, replace(
        base,
        settlements={r["id"]: _settlement(r) for r in rows},
        nets=dict(nets),
        transferred=frozenset(r["sid"] for r in ended if r["status"] == "transferred"),
        first_unpublished={r["sid"]: r["sequence"] for r in unpublished},
        instruction_failed=frozenset(r["sid"] for r in ended if r["status"] == "failed"),
    )


def _settlement(r: asyncpg.Record) -> SettlementFact:
    return SettlementFact(
        r["id"],
        r["tenant"],
        r["amount"],
        r["currency"],
        r["status"],
        r["reason"],
        tuple(r["history"]),
        tuple(r["sequences"]),
        tuple(r["sources"]),
        r["amount_reversed"],
        r["rail"],
    )


def _bounds(column: str, ids: IdRange, first: int) -> tuple[str, list[str]]:
    """The SQL condition keeping `column` in `ids`, numbering its parameters from `first`.
    Written out per case rather than `$n IS NULL OR ...`, which a generic plan cannot serve
    from the index."""
    conditions, args = ["true"], list[str]()
    for operator, bound in ((">", ids.after), ("<=", ids.through)):
        if bound is not None:
            conditions.append(f"{column} {operator} ${first + len(args)}::uuid")
            args.append(bound)
    return " AND ".join(conditions), args


async def _fetch(conn: asyncpg.Connection, sql: str, *args: object) -> list[asyncpg.Record]:
    return await _guarded(conn.fetch(sql, *args))


async def _guarded(work: Awaitable[T]) -> T:
    """`work`, its driver errors raised as the database being unavailable to the check."""
    try:
        return await work
    except _DRIVER_ERRORS as e:
        raise SourceUnavailable("postgresql", f"query failed: {e}") from e


async def in_flight(conn: asyncpg.Connection) -> dict[str, int]:
    """How much work is still moving: open instructions, unpublished outbox rows, pending
    webhooks, settlements neither terminal nor under review."""
    row = await _guarded(conn.fetchrow(IN_FLIGHT))
    assert row is not None
    return {key: int(value) for key, value in row.items()}

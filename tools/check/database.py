"""Facts from PostgreSQL: set-based queries in one read-only, repeatable-read transaction."""

from __future__ import annotations

from collections import defaultdict

import asyncpg

from services.shared.config import libpq_dsn
from services.shared.store_errors import UNREACHABLE
from tools.check.errors import SourceUnavailable
from tools.check.facts import DatabaseFacts, Offenders, SettlementFact
from tools.check.invariants import FIRST

SETTLEMENTS = """
SELECT s.id::text AS id, s.tenant, s.amount, s.currency::text AS currency, s.status, s.reason,
       s.amount_reversed,
       coalesce(t.history, '{}') AS history, coalesce(t.sequences, '{}') AS sequences,
       coalesce(t.sources, '{}') AS sources
  FROM settlements s
  LEFT JOIN (SELECT settlement_id, array_agg(to_status ORDER BY sequence) AS history,
                    array_agg(sequence ORDER BY sequence) AS sequences,
                    array_agg(from_status ORDER BY sequence) AS sources
               FROM settlement_transitions GROUP BY settlement_id) t ON t.settlement_id = s.id
"""
NETS = """
SELECT e.settlement_id::text AS sid, p.account_id, sum(p.amount) AS net
  FROM postings p JOIN journal_entries e ON e.id = p.entry_id
 WHERE e.settlement_id IS NOT NULL
 GROUP BY 1, 2 HAVING sum(p.amount) <> 0
"""
TRANSFERRED = (
    "SELECT settlement_id::text AS sid FROM rail_instructions WHERE status = 'transferred'"
)
INSTRUCTION_FAILED = (
    "SELECT settlement_id::text AS sid FROM rail_instructions WHERE status = 'failed'"
)
FIRST_UNPUBLISHED = """
SELECT settlement_id::text AS sid, min(sequence) AS sequence
  FROM outbox WHERE published_at IS NULL GROUP BY 1
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
UNEXPLAINED_WEBHOOKS = """
SELECT coalesce(rail_event_id, 'inbox:' || id) FROM inbox_events
 WHERE status IN ('parked', 'dead') AND coalesce(btrim(reason), '') = ''
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
    rows = await conn.fetch(_offenders_of(select), *args)
    return Offenders(rows[0]["total"] if rows else 0, tuple(str(r["id"]) for r in rows))


async def connect(database_url: str) -> asyncpg.Connection:
    """A connection to the database, or SourceUnavailable."""
    try:
        return await asyncpg.connect(libpq_dsn(database_url), timeout=10, command_timeout=300)
    except _DRIVER_ERRORS as e:
        raise SourceUnavailable("postgresql", f"cannot connect: {e}") from e


async def read_database(
    conn: asyncpg.Connection, outbox_bound_s: float, inbox_bound_s: float
) -> DatabaseFacts:
    """Every fact the checks need from PostgreSQL, from one snapshot, writing nothing."""
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            return await _read(conn, outbox_bound_s, inbox_bound_s)
    except _DRIVER_ERRORS as e:
        raise SourceUnavailable("postgresql", f"query failed: {e}") from e


async def _read(
    conn: asyncpg.Connection, outbox_bound_s: float, inbox_bound_s: float
) -> DatabaseFacts:
    settlements = {
        r["id"]: SettlementFact(
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
        )
        for r in await conn.fetch(SETTLEMENTS)
    }
    nets: defaultdict[str, dict[str, int]] = defaultdict(dict)
    for r in await conn.fetch(NETS):
        nets[r["sid"]][r["account_id"]] = int(r["net"])
    return DatabaseFacts(
        settlements=settlements,
        nets=dict(nets),
        transferred=frozenset(r["sid"] for r in await conn.fetch(TRANSFERRED)),
        first_unpublished={r["sid"]: r["sequence"] for r in await conn.fetch(FIRST_UNPUBLISHED)},
        stale_outbox=await _offenders(conn, STALE_OUTBOX, outbox_bound_s),
        unapplied_webhooks=await _offenders(conn, UNAPPLIED_WEBHOOKS, inbox_bound_s),
        unexplained_webhooks=await _offenders(conn, UNEXPLAINED_WEBHOOKS),
        unbalanced_currencies=await _offenders(conn, UNBALANCED_CURRENCIES),
        unbalanced_entries=await _offenders(conn, UNBALANCED_ENTRIES),
        balance_mismatches=await _offenders(conn, BALANCE_MISMATCHES),
        webhooks_applied_twice=await _offenders(conn, APPLIED_TWICE),
        instruction_failed=frozenset(r["sid"] for r in await conn.fetch(INSTRUCTION_FAILED)),
    )


async def in_flight(conn: asyncpg.Connection) -> dict[str, int]:
    """How much work is still moving: open instructions, unpublished outbox rows, pending
    webhooks, settlements neither terminal nor under review."""
    try:
        row = await conn.fetchrow(IN_FLIGHT)
    except _DRIVER_ERRORS as e:
        raise SourceUnavailable("postgresql", f"query failed: {e}") from e
    assert row is not None
    return {key: int(value) for key, value in row.items()}

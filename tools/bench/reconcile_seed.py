"""The `reconcile` scenario's books: N settlements paid in the ledger, set-based SQL, and the
same N transfers at the simulator, with a few breaks planted on purpose.

Settlement n has the id md5('bench-reconcile-n') as a UUID (PostgreSQL and Python compute
the same), the rail reference `tr_bench<n>`, and was sent `spread` seconds before `end`
at most. Planted, `PLANTED` each: settlements with no transfer (missing_at_rail), transfers
of one more cent (amount_mismatch), a second transfer naming the settlement
(duplicate_at_rail), and transfers naming no settlement (unknown_at_rail).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg

PLANTED = 5  # breaks of each planted type
TENANT = "bench"
EXPECTED = {"missing_at_rail", "amount_mismatch", "duplicate_at_rail", "unknown_at_rail"}
_MISSING, _AMOUNT, _DUPLICATE = (range(k * PLANTED, (k + 1) * PLANTED) for k in range(3))

# $1 count, $2 the last one's send time (epoch seconds), $3 seconds spread over.
SETTLEMENTS = """
INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination, amount,
                         currency, rail, status, version, rail_reference, created_at, updated_at)
SELECT md5('bench-reconcile-' || n)::uuid, 'bench', 'r-' || n, 'k-' || n, 'p', 'acct_' || n % 50,
       100 + n % 10000, 'USD', 'stripe', 'paid', 4, 'tr_bench' || lpad(n::text, 16, '0'),
       to_timestamp($2::bigint - $3::bigint + (n * $3::bigint) / $1::bigint),
       to_timestamp($2::bigint - $3::bigint + (n * $3::bigint) / $1::bigint)
  FROM generate_series(0::bigint, $1::bigint - 1) AS n
"""
TRANSITIONS = """
INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status, actor,
                                    occurred_at)
SELECT s.id, t.sequence, t.from_status, t.to_status, 'bench', s.created_at
  FROM settlements AS s,
       (VALUES (1, NULL, 'accepted'), (2, 'accepted', 'dispatching'),
               (3, 'dispatching', 'submitted'), (4, 'submitted', 'paid'))
         AS t (sequence, from_status, to_status)
 WHERE s.tenant = 'bench'
"""


def settlement_id(n: int) -> str:
    """Settlement n's id, as the ledger seed computes it."""
    return str(uuid.UUID(hashlib.md5(f"bench-reconcile-{n}".encode()).hexdigest()))


async def seed_ledger(conn: asyncpg.Connection, count: int, end: int, spread: int) -> None:
    """Book `count` paid settlements, sent over the `spread` seconds before `end`."""
    async with conn.transaction():
        await conn.execute(SETTLEMENTS, count, end, spread)
        await conn.execute(TRANSITIONS)
    await conn.execute("ANALYZE settlements; ANALYZE settlement_transitions")


def planted_breaks() -> set[tuple[str, str | None, str | None]]:
    """The breaks a run over the seeded books finds, as (type, settlement id, rail object id)."""
    return (
        {("missing_at_rail", settlement_id(n), None) for n in _MISSING}
        | {("amount_mismatch", settlement_id(n), f"tr_bench{n:016d}") for n in _AMOUNT}
        | {("duplicate_at_rail", settlement_id(n), f"tr_benchdup{n:013d}") for n in _DUPLICATE}
        | {("unknown_at_rail", None, f"tr_benchstray{n:011d}") for n in range(PLANTED)}
    )


def rail_chunks(count: int, end: int, spread: int, size: int) -> Iterator[dict[str, Any]]:
    """The simulator's seed bodies, `size` transfers each, oldest first."""
    chunk: list[dict[str, Any]] = []
    for n in range(count):
        if n in _MISSING:
            continue
        created = end - spread + (n * spread) // count
        chunk.append(_transfer(n, f"tr_bench{n:016d}", created, settlement_id(n)))
        if n in _AMOUNT:
            chunk[-1]["amount"] += 1
        if n in _DUPLICATE:
            chunk.append(_transfer(n, f"tr_benchdup{n:013d}", created, settlement_id(n)))
        if len(chunk) >= size:
            yield {"transfers": chunk}
            chunk = []
    # Strays name settlements the ledger never booked (unknown_at_rail); the foreign ones
    # carry no mark of settle's (another system's transfers: out of scope, no break).
    strays = [
        _transfer(n, f"tr_benchstray{n:011d}", end - 1, settlement_id(count + n))
        for n in range(PLANTED)
    ]
    foreign = [_transfer(n, f"tr_benchforeign{n:09d}", end - 1, None) for n in range(PLANTED)]
    yield {"transfers": chunk + strays + foreign}


def _transfer(n: int, object_id: str, created: int, named: str | None) -> dict[str, Any]:
    return {
        "id": object_id,
        "amount": 100 + n % 10000,
        "currency": "usd",
        "destination": f"acct_{n % 50}",
        "created": created,
        "metadata": {"settlement_id": named} if named else {},
    }

"""A throwaway ledger of paid settlements for the check's memory probe (memory.py), filled in
SQL: four transitions, a balanced entry and a transferred instruction each."""

from __future__ import annotations

import asyncpg

from services.domain.postings import expected_net
from services.domain.settlement import SettlementStatus as S
from services.platform.config import libpq_dsn

TENANT, AMOUNT, CURRENCY = "acme", 700, "EUR"
# The audit trail of each settlement, as (from, to) steps.
STEPS: list[tuple[S | None, S]] = [
    (None, S.ACCEPTED),
    (S.ACCEPTED, S.DISPATCHING),
    (S.DISPATCHING, S.SUBMITTED),
    (S.SUBMITTED, S.PAID),
]
# Each statement with the names of its parameters, in order.
FILL: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        """INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination,
                                amount, currency, rail, status, version, rail_reference,
                                created_at, updated_at)
        SELECT gen_random_uuid(), $2, 'ref-' || g, 'key-' || g, 'payee-7', 'acct_1Q2w3E',
               $3, $4, 'stripe', 'paid', 4, 'tr_' || g, now(), now()
          FROM generate_series(1, $1::int) AS g""",
        ("count", "tenant", "amount", "currency"),
    ),
    (
        """INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status,
                                           actor, occurred_at)
        SELECT s.id, t.sequence, t.from_status, t.to_status, 'fill', now()
          FROM settlements AS s CROSS JOIN unnest($1::int[], $2::text[], $3::text[])
               AS t(sequence, from_status, to_status)""",
        ("sequences", "sources", "statuses"),
    ),
    (
        """INSERT INTO accounts (id, tenant, kind, currency)
        SELECT a, $1, split_part(a, ':', 2), $2 FROM unnest($3::text[]) AS a""",
        ("tenant", "currency", "accounts"),
    ),
    (
        """INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
        SELECT gen_random_uuid(), tenant, id, 'paid', now() FROM settlements""",
        (),
    ),
    (
        """INSERT INTO postings (entry_id, account_id, amount, currency)
        SELECT e.id, p.account_id, p.amount, $1 FROM journal_entries AS e
         CROSS JOIN unnest($2::text[], $3::bigint[]) AS p(account_id, amount)""",
        ("currency", "accounts", "nets"),
    ),
    (
        """INSERT INTO account_balances (account_id, shard, balance)
        SELECT account_id, 0, sum(amount) FROM postings GROUP BY 1""",
        (),
    ),
    (
        """INSERT INTO rail_instructions (settlement_id, tenant, rail, method, idempotency_key,
                                      destination, amount, currency, status, rail_reference,
                                      created_at, updated_at)
        SELECT id, tenant, rail, 'transfer', encode(sha256(id::text::bytea), 'hex'),
               destination, amount, currency, 'transferred', rail_reference, now(), now()
          FROM settlements""",
        (),
    ),
)


async def fill(url: str, settlements: int) -> list[tuple[str, str]]:
    """`settlements` paid settlements with their trail, books and instruction; (id, reference)
    of each."""
    net = expected_net(AMOUNT, CURRENCY, TENANT, S.PAID)
    values: dict[str, object] = {
        "count": settlements,
        "tenant": TENANT,
        "amount": AMOUNT,
        "currency": CURRENCY,
        "sequences": list(range(1, len(STEPS) + 1)),
        "sources": [a and a.value for a, _ in STEPS],
        "statuses": [b.value for _, b in STEPS],
        "accounts": list(net),
        "nets": list(net.values()),
    }
    conn = await asyncpg.connect(libpq_dsn(url))
    try:
        async with conn.transaction():
            for statement, names in FILL:
                await conn.execute(statement, *(values[n] for n in names))
        rows = await conn.fetch("SELECT id::text, reference FROM settlements")
    finally:
        await conn.close()
    return [(r[0], r[1]) for r in rows]

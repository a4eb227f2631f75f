"""The funding check of pre-funded tenants, made in the booking transaction before it books.

A pre-funded tenant (`domain.tenant_limits`) pays out only what it has: its deposit in the
currency plus its funding account's balance, which every accepted settlement debits and every
failure or reversal credits back. A settlement that would take that below zero is answered
422 `insufficient_funds`, nothing of it stored, its idempotency key left unused.

Race-free: the check locks every balance shard of the batch's pre-funded funding accounts
(`FOR UPDATE`, in account id order, the order booking locks shards in), reads their sum and
books in the same transaction. A concurrent batch of the same tenant and currency waits for
the lock and then reads the balance this one left, so two requests each within the funds but
together over them are never both booked. Deadlock-free: a batch takes these locks before any
other balance row, and any other batch that needs one of them takes it first too.

Only requests whose key the booking would claim count against the funds: a retry of a booked
request is answered as a replay, never refused here. A request counted here may still go
unbooked (a reference booked under another key): the check errs only towards refusing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from services.domain.postings import AccountKind, account_id
from services.domain.tenant_limits import TenantLimits
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.platform.edge import error_body

FUNDING_BALANCES = """
WITH held AS (
    SELECT account_id, balance FROM account_balances
     WHERE account_id = ANY($1::text[])
     ORDER BY account_id COLLATE "C", shard
       FOR UPDATE
)
SELECT account_id, sum(balance) AS balance FROM held GROUP BY account_id
"""

# The keys BOOK_BATCH would claim, by its very condition ($3 now, $4 the forgetting cut-off).
CLAIMABLE_KEYS = """
SELECT u.t AS tenant, u.key
  FROM unnest($1::text[], $2::text[]) AS u(t, key)
  LEFT JOIN idempotency_keys k ON k.tenant = u.t AND k.key = u.key
 WHERE k.key IS NULL OR k.created_at <= $4 OR (k.state = 'in_flight' AND k.locked_until <= $3)
"""


def funding_account(request: SettlementRequest) -> str:
    """The funding account `request` would be paid from."""
    return account_id(request.tenant, AccountKind.FUNDING, request.currency)


def over_funds(requests: Sequence[SettlementRequest], available: dict[str, int]) -> set[int]:
    """Positions of `requests` the funds cannot cover, taking them in order, first come first
    served; `available` maps funding account to what is left and is spent as requests pass."""
    short: set[int] = set()
    for n, r in enumerate(requests):
        account = funding_account(r)
        if r.amount > available[account]:
            short.add(n)
        else:
            available[account] -= r.amount
    return short


async def refuse_unfunded(
    conn: asyncpg.Connection,
    batch: Sequence[SettlementRequest],
    limits: TenantLimits,
    now: datetime,
    forgotten_before: datetime,
) -> dict[int, AcceptResult]:
    """The 422 `insufficient_funds` answers of `batch`'s requests, by position, that a
    pre-funded tenant's funds cannot cover; holds the funding shards' locks until commit."""
    funded = [n for n, r in enumerate(batch) if limits.of(r.tenant).prefunded is not None]
    if not funded:
        return {}
    accounts = sorted({funding_account(batch[n]) for n in funded})
    rows = await conn.fetch(FUNDING_BALANCES, accounts)
    balances = {row["account_id"]: int(row["balance"]) for row in rows}
    claimable = await conn.fetch(
        CLAIMABLE_KEYS,
        [batch[n].tenant for n in funded],
        [batch[n].idempotency_key for n in funded],
        now,
        forgotten_before,
    )
    fresh = {(row["tenant"], row["key"]) for row in claimable}
    counted = [n for n in funded if (batch[n].tenant, batch[n].idempotency_key) in fresh]
    available: dict[str, int] = {}
    for n in counted:
        r = batch[n]
        deposit = (limits.of(r.tenant).prefunded or {}).get(r.currency, 0)
        available[funding_account(r)] = deposit + balances.get(funding_account(r), 0)
    short = over_funds([batch[n] for n in counted], available)
    return {counted[i]: insufficient_funds_result(batch[counted[i]]) for i in short}


def insufficient_funds_result(request: SettlementRequest) -> AcceptResult:
    """The 422 of a pre-funded tenant's request its funds do not cover; nothing was stored."""
    body = error_body(
        "insufficient_funds",
        f"the funds of this tenant in {request.currency} do not cover this amount",
        "amount",
    )
    return AcceptResult(Outcome.INSUFFICIENT_FUNDS, 422, body)

"""What callers may read back, from PostgreSQL: settlements with their history and postings,
account balances and entries, each scoped to the caller's tenant (the shapes are in views.py).

Pages are keyset-paginated under an opaque cursor (base64url of the last row's key), so a
page never skips or repeats a row however many rows arrive meanwhile. Driver errors that mean
"PostgreSQL cannot be reached" become StoreUnavailable at this edge (`unavailable_when_down`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.ledger.errors import InvalidRequest
from services.ledger.views import (
    MAX_PAGE,
    SETTLEMENT_STATUSES,
    AccountBalance,
    AccountEntry,
    EntryPage,
    Settlement,
    SettlementPage,
    SettlementPosting,
    SettlementSummary,
    Transition,
)

_SUMMARY = """
    SELECT s.id, s.reference, s.payee, s.destination, s.amount, s.currency, s.rail,
           s.metadata::text AS metadata, s.status, s.reason, s.version,
           ri.idempotency_key AS rail_idempotency_key,
           COALESCE(s.rail_reference, ri.rail_reference) AS rail_reference,
           s.created_at, s.updated_at
      FROM settlements s LEFT JOIN rail_instructions ri ON ri.settlement_id = s.id
"""
_ONE = _SUMMARY + " WHERE s.id = $1 AND s.tenant = $2"
_TRANSITIONS = """
    SELECT sequence, from_status, to_status, reason, actor, occurred_at
      FROM settlement_transitions WHERE settlement_id = $1 ORDER BY sequence
"""
_POSTINGS = """
    SELECT e.id AS entry_id, e.kind, p.account_id, p.amount, p.currency, e.occurred_at,
           coalesce(e.effective_at, e.occurred_at) AS effective_at
      FROM journal_entries e JOIN postings p ON p.entry_id = e.id
     WHERE e.settlement_id = $1 AND e.tenant = $2
     ORDER BY e.occurred_at, p.id
"""
_BALANCE = """
    SELECT a.currency,
           (SELECT COALESCE(sum(b.balance), 0) FROM account_balances b
             WHERE b.account_id = a.id) AS balance
      FROM accounts a WHERE a.id = $1 AND a.tenant = $2
"""
_ACCOUNT = "SELECT 1 FROM accounts WHERE id = $1 AND tenant = $2"
_ENTRIES = """
    SELECT p.id AS posting_id, p.entry_id, e.kind, e.settlement_id, p.amount, p.currency,
           e.occurred_at, coalesce(e.effective_at, e.occurred_at) AS effective_at
      FROM postings p JOIN journal_entries e ON e.id = p.entry_id
     WHERE p.account_id = $1 AND ($2::bigint IS NULL OR p.id < $2)
     ORDER BY p.id DESC LIMIT $3
"""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def _bad_cursor() -> InvalidRequest:
    return InvalidRequest(
        "cursor is not one this API returned", code="invalid_cursor", field="cursor"
    )


def _encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).rstrip(b"=").decode()


def _decode_cursor(cursor: str) -> str:
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError) as e:
        raise _bad_cursor() from e


def _settlement_key(cursor: str) -> tuple[datetime, uuid.UUID]:
    micros, _, settlement_id = _decode_cursor(cursor).partition("/")
    try:
        return _EPOCH + int(micros) * _MICRO, uuid.UUID(settlement_id)
    except (ValueError, OverflowError) as e:
        raise _bad_cursor() from e


def _posting_key(cursor: str) -> int:
    try:
        key = int(_decode_cursor(cursor))
    except ValueError as e:
        raise _bad_cursor() from e
    # Out of bigint range the driver would fail the query instead of refusing the cursor.
    if not 0 < key < 2**63:
        raise _bad_cursor()
    return key


def _check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be 1..{MAX_PAGE}", code="invalid_limit", field="limit")
    return limit


def _summary(row: Any) -> SettlementSummary:
    return SettlementSummary(
        object="settlement",
        id=str(row["id"]),
        reference=row["reference"],
        payee=row["payee"],
        destination=row["destination"],
        amount=row["amount"],
        currency=row["currency"],
        rail=row["rail"],
        metadata=json.loads(row["metadata"]),
        status=row["status"],
        reason=row["reason"],
        version=row["version"],
        rail_idempotency_key=row["rail_idempotency_key"],
        rail_reference=row["rail_reference"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _settlement(row: Any, transitions: Sequence[Any], postings: Sequence[Any]) -> Settlement:
    summary = _summary(row)
    fields = {name: getattr(summary, name) for name in SettlementSummary.__dataclass_fields__}
    return Settlement(
        **fields,
        transitions=[Transition(**dict(t)) for t in transitions],
        postings=[
            SettlementPosting(**{**dict(p), "entry_id": str(p["entry_id"])}) for p in postings
        ],
    )


def _entry(row: Any) -> AccountEntry:
    settlement_id = row["settlement_id"]
    return AccountEntry(
        **{
            **dict(row),
            "entry_id": str(row["entry_id"]),
            "settlement_id": None if settlement_id is None else str(settlement_id),
        }
    )


class SettlementReads:
    """Tenant-scoped reads over an asyncpg pool; StoreUnavailable when PostgreSQL is down."""

    def __init__(self, pool: asyncpg.Pool, *, timeout: float = 5.0) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds, e.g. 5.0")
        self._pool = pool
        self._timeout = timeout

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        with unavailable_when_down("PostgreSQL did not answer"):
            async with asyncio.timeout(self._timeout), self._pool.acquire() as conn:
                yield conn

    async def settlement(self, tenant: str, settlement_id: str) -> Settlement | None:
        """The settlement of `tenant` with id `settlement_id`, or None (malformed ids too)."""
        try:
            key = uuid.UUID(settlement_id)
        except ValueError:
            return None
        # One repeatable-read snapshot, so status, history and postings agree with each other.
        async with (
            self._connection() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            row = await conn.fetchrow(_ONE, key, tenant)
            if row is None:
                return None
            transitions = await conn.fetch(_TRANSITIONS, key)
            postings = await conn.fetch(_POSTINGS, key, tenant)
        return _settlement(row, transitions, postings)

    async def settlements(
        self,
        tenant: str,
        *,
        reference: str | None = None,
        status: str | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> SettlementPage:
        """A page of `tenant`'s settlements matching the filters, newest first."""
        if status is not None and status not in SETTLEMENT_STATUSES:
            known = ", ".join(sorted(SETTLEMENT_STATUSES))
            raise InvalidRequest(
                f"status must be one of {known}", code="invalid_status", field="status"
            )
        _check_limit(limit)
        # Only fixed fragments with numbered parameters go into the text, never caller input;
        # leaving absent filters out (rather than `$n IS NULL OR ...`) keeps plans index-friendly.
        params: list[object] = [tenant]
        where = ["s.tenant = $1"]
        if reference is not None:
            params.append(reference)
            where.append(f"s.reference = ${len(params)}")
        if status is not None:
            params.append(status)
            where.append(f"s.status = ${len(params)}")
        if cursor is not None:
            params.extend(_settlement_key(cursor))
            where.append(f"(s.created_at, s.id) < (${len(params) - 1}, ${len(params)})")
        params.append(limit + 1)
        sql = f"{_SUMMARY} WHERE {' AND '.join(where)} ORDER BY s.created_at DESC, s.id DESC"
        sql += f" LIMIT ${len(params)}"
        async with self._connection() as conn:
            rows = await conn.fetch(sql, *params)
        page = [_summary(r) for r in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            micros = (last["created_at"] - _EPOCH) // _MICRO
            next_cursor = _encode_cursor(f"{micros}/{last['id']}")
        return SettlementPage(object="list", data=page, next_cursor=next_cursor)

    async def balance(self, tenant: str, account: str) -> AccountBalance | None:
        """The balance of `account` (sum of its shards) if it is `tenant`'s, else None."""
        if not account.startswith(f"{tenant}:"):
            return None
        async with self._connection() as conn:
            row = await conn.fetchrow(_BALANCE, account, tenant)
        if row is None:
            return None
        # sum(bigint) is numeric: convert exactly, never through float.
        return AccountBalance(
            account=account, currency=row["currency"], balance=int(row["balance"])
        )

    async def entries(
        self, tenant: str, account: str, *, cursor: str | None = None, limit: int = 20
    ) -> EntryPage | None:
        """A page of `account`'s postings, newest first; None if not `tenant`'s account."""
        _check_limit(limit)
        after = None if cursor is None else _posting_key(cursor)
        if not account.startswith(f"{tenant}:"):
            return None
        async with self._connection() as conn:
            if await conn.fetchval(_ACCOUNT, account, tenant) is None:
                return None
            rows = await conn.fetch(_ENTRIES, account, after, limit + 1)
        page = [_entry(r) for r in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = _encode_cursor(str(rows[limit - 1]["posting_id"]))
        return EntryPage(object="list", data=page, next_cursor=next_cursor)

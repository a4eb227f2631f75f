"""Booking a batch of settlement requests: one PostgreSQL transaction, one round trip.

Everything a response contains is minted here once (settlement id, timestamps, rail key,
the 201 body, the Avro event) and stored with the idempotency record, so a replay
regenerates nothing. `sql.BOOK_BATCH` then books the whole batch in one statement, and
the per-settlement cost falls as batches grow. Requests whose key was already used are
answered from the stored record; requests whose reference was booked under another key
get 409, stored under their key too.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from services.contracts.topics import EVENTS
from services.domain.balance_shards import BALANCE_SHARDS
from services.domain.ids import uuid7_text
from services.domain.payout import PayoutMethod
from services.domain.postings import AccountKind, Posting, accept_postings, account_id
from services.domain.rail_key import rail_idempotency_key
from services.domain.settlement import SettlementStatus, event_type
from services.domain.tenant_limits import NO_LIMITS, TenantLimits
from services.ledger import sql
from services.ledger.answers import answer_for, duplicate_reference
from services.ledger.funding import refuse_unfunded
from services.ledger.idempotency import KeyState, StoredKey, decide
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.ledger.responses import canonical_json, settlement_body
from services.platform.clock import utc_now
from services.settlement.transition_rows import settlement_event
from services.settlement.transition_sql import OPEN_ACCOUNTS

log = logging.getLogger(__name__)
DEFAULT_RAIL = "sim"
# How long a same-key request in another transaction may hold us before we answer 409.
LOCK_WAIT = "2s"


@dataclass(frozen=True)
class Windows:
    """The idempotency windows: replay the first response, then answer 410, then forget."""

    replay: timedelta
    tombstone: timedelta


@asynccontextmanager
async def _transaction(conn: asyncpg.Connection) -> AsyncIterator[None]:
    # BEGIN and the lock bound travel in one round trip.
    await conn.execute(f"BEGIN; SET LOCAL lock_timeout = '{LOCK_WAIT}'")
    try:
        yield
    except BaseException:
        if not conn.is_closed():
            await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")


class Books:
    """Books batches of settlement requests on PostgreSQL; see the module docstring."""

    def __init__(
        self,
        windows: Windows,
        method: PayoutMethod = PayoutMethod.TRANSFER,
        shards: int = BALANCE_SHARDS,
        limits: TenantLimits = NO_LIMITS,
    ) -> None:
        self.windows = windows
        self.method = method
        self.shards = shards
        self.limits = limits  # for the funding check of pre-funded tenants
        # Each batch tries the next shard first, from a random start per process, so batches
        # of this process mostly find their first choice free; a held shard is skipped.
        start = random.randrange(shards)
        self._shard = itertools.cycle([*range(start, shards), *range(start)])
        self._accounts_known: set[tuple[str, str]] = set()

    async def book(
        self, conn: asyncpg.Connection, batch: Sequence[SettlementRequest]
    ) -> list[AcceptResult]:
        """Book `batch` (no two requests share a tenant and key) in one transaction; a
        pre-funded tenant's request its funds do not cover is refused, nothing of it stored."""
        now = utc_now()
        forgotten_before = now - self.windows.replay - self.windows.tombstone
        minted = [_mint(r, now) for r in batch]  # before BEGIN: no transaction waits on it
        pairs = {(r.tenant, r.currency) for r in batch} - self._accounts_known
        async with _transaction(conn):
            if pairs:
                await self._open_accounts(conn, pairs)
            results: dict[int, AcceptResult] = {}
            if self.limits.any_prefunded:
                results = await refuse_unfunded(conn, batch, self.limits, now, forgotten_before)
            rest = [n for n in range(len(batch)) if n not in results]
            if rest:
                booked = await self._book_new(
                    conn, [batch[n] for n in rest], [minted[n] for n in rest], now
                )
                results.update(zip(rest, booked, strict=True))
        # Only committed accounts may be skipped: another batch's postings need them to exist.
        self._accounts_known |= pairs
        return [results[n] for n in range(len(batch))]

    async def _book_new(
        self,
        conn: asyncpg.Connection,
        batch: Sequence[SettlementRequest],
        minted: list[_Minted],
        now: datetime,
    ) -> list[AcceptResult]:
        rows = await conn.fetch(sql.BOOK_BATCH, *self._columns(batch, minted, now))
        fate = {(row["tenant"], row["key"]): (row["claimed"], row["booked"]) for row in rows}
        results: list[AcceptResult | None] = []
        refused: list[int] = []
        for n, (r, m) in enumerate(zip(batch, minted, strict=True)):
            claimed, booked = fate[(r.tenant, r.idempotency_key)]
            if booked:
                results.append(
                    AcceptResult(Outcome.CREATED, 201, m.body, m.settlement_id, trace=r.trace)
                )
            elif claimed:
                results.append(duplicate_reference(r))
                refused.append(n)
            else:
                results.append(None)
        if refused:
            await conn.execute(
                sql.REFUSE_REFERENCES,
                [batch[n].tenant for n in refused],
                [batch[n].idempotency_key for n in refused],
                [_body(results[n]) for n in refused],
            )
        used = [n for n, result in enumerate(results) if result is None]
        if used:
            answers = await self._answer_used_keys(conn, [batch[n] for n in used], now)
            for n, answer in zip(used, answers, strict=True):
                results[n] = answer
        return [r for r in results if r is not None]

    def _columns(
        self, batch: Sequence[SettlementRequest], minted: list[_Minted], now: datetime
    ) -> list[object]:
        legs = [(m.entry_id, p) for m in minted for p in m.postings]
        return [
            [r.tenant for r in batch],
            [r.idempotency_key for r in batch],
            [r.fingerprint for r in batch],
            [m.settlement_id for m in minted],
            [r.reference for r in batch],
            [r.payee for r in batch],
            [r.destination for r in batch],
            [r.amount for r in batch],
            [r.currency for r in batch],
            [r.rail or DEFAULT_RAIL for r in batch],
            [canonical_json(r.metadata).decode() for r in batch],
            [m.rail_key for m in minted],
            [m.body for m in minted],
            [m.entry_id for m in minted],
            [m.event_id for m in minted],
            [m.event for m in minted],
            now,
            now - self.windows.replay - self.windows.tombstone,
            [entry for entry, _ in legs],
            [p.account_id for _, p in legs],
            [p.amount for _, p in legs],
            [p.currency for _, p in legs],
            next(self._shard),
            self.method,
            EVENTS,
            [r.trace.traceparent if r.trace else None for r in batch],
            [r.trace.tracestate if r.trace else None for r in batch],
        ]

    async def _answer_used_keys(
        self, conn: asyncpg.Connection, used: list[SettlementRequest], now: datetime
    ) -> list[AcceptResult]:
        rows = await conn.fetch(
            sql.READ_KEYS, [r.tenant for r in used], [r.idempotency_key for r in used]
        )
        stored = {(row["tenant"], row["key"]): row for row in rows}
        answers = []
        for r in used:
            row = stored[(r.tenant, r.idempotency_key)]
            key = StoredKey(
                row["fingerprint"], KeyState(row["state"]), row["created_at"], row["locked_until"]
            )
            decision = decide(key, r.fingerprint, now, self.windows.replay, self.windows.tombstone)
            answers.append(answer_for(decision, row))
        return answers

    async def _open_accounts(self, conn: asyncpg.Connection, pairs: set[tuple[str, str]]) -> None:
        ids, tenants, kinds, currencies = [], [], [], []
        for tenant, currency in sorted(pairs):
            for kind in AccountKind:
                ids.append(account_id(tenant, kind, currency))
                tenants.append(tenant)
                kinds.append(str(kind))
                currencies.append(currency)
        await conn.execute(OPEN_ACCOUNTS, ids, tenants, kinds, currencies, self.shards)


@dataclass(frozen=True, slots=True)
class _Minted:
    settlement_id: str
    rail_key: str
    body: bytes
    entry_id: str
    event_id: str
    event: bytes
    postings: list[Posting]


def _mint(r: SettlementRequest, now: datetime) -> _Minted:
    """Everything booking `r` would create, minted once, whether or not it is booked."""
    sid = uuid7_text()
    rail = r.rail or DEFAULT_RAIL
    key = rail_idempotency_key(r.tenant, sid, r.destination, r.amount, r.currency)
    body = settlement_body(
        settlement_id=sid,
        reference=r.reference,
        payee=r.payee,
        destination=r.destination,
        amount=r.amount,
        currency=r.currency,
        rail=rail,
        metadata=r.metadata,
        status="accepted",
        rail_idempotency_key=key,
        created_at=now,
    )
    event_id = uuid7_text()
    event = settlement_event(
        event_id,
        sid,
        r.tenant,
        r.reference,
        r.amount,
        r.currency,
        sequence=1,
        event_type=event_type(SettlementStatus.ACCEPTED),
        status=SettlementStatus.ACCEPTED,
        rail_reference=None,
        reason=None,
        occurred_at=now,
        rail=rail,
    )
    postings, _ = accept_postings(r.amount, r.currency, r.tenant)
    return _Minted(sid, key, body, uuid7_text(), event_id, event, postings)


def _body(result: AcceptResult | None) -> bytes:
    assert result is not None
    return result.body

"""Booking a batch of settlement requests: one PostgreSQL transaction, set-based statements.

Per batch, whatever its size, the transaction runs the same dozen statements: claim the
idempotency keys, read the records of keys already used, insert the settlements (a reference
already booked is left out), their first transition, journal entries and postings, one
balance update per account shard, rail instructions and outbox rows, then complete the
idempotency records with the response bytes minted here. Replays therefore regenerate
nothing, and the per-settlement cost falls as batches grow.
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from services.ledger import sql
from services.ledger.idempotency import Decision, KeyState, StoredKey, decide
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.ledger.responses import error_body, settlement_body
from services.shared import avro
from services.shared.domain.postings import AccountKind, accept_postings, account_id
from services.shared.domain.rail_key import rail_idempotency_key
from services.shared.ids import uuid7
from services.shared.topics import EVENTS

BALANCE_SHARDS = 8
DEFAULT_RAIL = "sim"
# How long a same-key request in another transaction may hold us before we answer 409.
LOCK_WAIT = "2s"
IN_USE_RETRY_AFTER = 1


@dataclass(frozen=True)
class Windows:
    """The idempotency windows: replay the first response, then answer 410, then forget."""

    replay: timedelta
    tombstone: timedelta


@dataclass
class _Booked:
    request: SettlementRequest
    settlement_id: uuid.UUID
    rail_key: str
    body: bytes


class Books:
    """Books batches of settlement requests on PostgreSQL; see the module docstring."""

    def __init__(self, windows: Windows, method: str = "transfer", shards: int = BALANCE_SHARDS):
        self.windows = windows
        self.method = method
        self.shards = shards
        self._accounts_known: set[tuple[str, str]] = set()

    async def book(
        self, conn: asyncpg.Connection, batch: Sequence[SettlementRequest]
    ) -> list[AcceptResult]:
        """Book `batch` (no two requests share a tenant and key) in one transaction."""
        async with conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
            now: datetime = await conn.fetchval("SELECT now()")
            claimed = await self._claim(conn, batch, now)
            results: dict[int, AcceptResult] = {}
            used = [i for i, r in enumerate(batch) if (r.tenant, r.idempotency_key) not in claimed]
            if used:
                results.update(await self._answer_used_keys(conn, batch, used, now))
            fresh = [r for r in batch if (r.tenant, r.idempotency_key) in claimed]
            booked = await self._insert_settlements(conn, fresh, now)
            opened = await self._record_books(conn, booked, now)
            completions: list[tuple[SettlementRequest, AcceptResult]] = []
            for r in fresh:
                done = booked.get((r.tenant, r.reference))
                if done is not None and done.request is r:
                    result = AcceptResult(Outcome.CREATED, 201, done.body, str(done.settlement_id))
                else:
                    result = _duplicate_reference(r)
                completions.append((r, result))
            await self._complete_keys(conn, completions, claimed, now)
        # Only committed accounts may be skipped: another batch's posting needs them to exist.
        self._accounts_known.update(opened)
        by_request = {id(r): res for r, res in completions}
        return [results.get(i) or by_request[id(r)] for i, r in enumerate(batch)]

    async def _claim(
        self, conn: asyncpg.Connection, batch: Sequence[SettlementRequest], now: datetime
    ) -> dict[tuple[str, str], int]:
        forget_before = now - self.windows.replay - self.windows.tombstone
        rows = await conn.fetch(
            sql.CLAIM_KEYS,
            [r.tenant for r in batch],
            [r.idempotency_key for r in batch],
            [r.fingerprint for r in batch],
            now,
            now + timedelta(seconds=30),
            forget_before,
        )
        return {(row["tenant"], row["key"]): row["fence"] for row in rows}

    async def _answer_used_keys(
        self,
        conn: asyncpg.Connection,
        batch: Sequence[SettlementRequest],
        used: list[int],
        now: datetime,
    ) -> dict[int, AcceptResult]:
        rows = await conn.fetch(
            sql.READ_KEYS,
            [batch[i].tenant for i in used],
            [batch[i].idempotency_key for i in used],
        )
        stored = {(row["tenant"], row["key"]): row for row in rows}
        answers: dict[int, AcceptResult] = {}
        for i in used:
            request = batch[i]
            row = stored[(request.tenant, request.idempotency_key)]
            key = StoredKey(row["fingerprint"], KeyState(row["state"]), row["created_at"],
                            row["locked_until"])  # fmt: skip
            decision = decide(key, request.fingerprint, now, self.windows.replay,
                              self.windows.tombstone)  # fmt: skip
            answers[i] = _answer(decision, row, now)
        return answers

    async def _insert_settlements(
        self, conn: asyncpg.Connection, fresh: list[SettlementRequest], now: datetime
    ) -> dict[tuple[str, str], _Booked]:
        if not fresh:
            return {}
        candidates: dict[tuple[str, str], _Booked] = {}
        for r in fresh:
            sid = uuid7()
            rail = r.rail or DEFAULT_RAIL
            key = rail_idempotency_key(r.tenant, str(sid), r.destination, r.amount, r.currency)
            body = settlement_body(
                settlement_id=str(sid), reference=r.reference, payee=r.payee,
                destination=r.destination, amount=r.amount, currency=r.currency, rail=rail,
                metadata=r.metadata, status="accepted", rail_idempotency_key=key, created_at=now,
            )  # fmt: skip
            # Two requests for one reference in one batch: the first books it.
            candidates.setdefault((r.tenant, r.reference), _Booked(r, sid, key, body))
        rows = list(candidates.values())
        inserted = await conn.fetch(
            sql.INSERT_SETTLEMENTS,
            [b.settlement_id for b in rows],
            [b.request.tenant for b in rows],
            [b.request.reference for b in rows],
            [b.request.idempotency_key for b in rows],
            [b.request.payee for b in rows],
            [b.request.destination for b in rows],
            [b.request.amount for b in rows],
            [b.request.currency for b in rows],
            [b.request.rail or DEFAULT_RAIL for b in rows],
            [_json(b.request.metadata) for b in rows],
            now,
        )
        ids = {row["id"] for row in inserted}
        return {k: b for k, b in candidates.items() if b.settlement_id in ids}

    async def _record_books(
        self, conn: asyncpg.Connection, booked: dict[tuple[str, str], _Booked], now: datetime
    ) -> set[tuple[str, str]]:
        if not booked:
            return set()
        rows = list(booked.values())
        ids = [b.settlement_id for b in rows]
        await conn.execute(sql.INSERT_FIRST_TRANSITIONS, ids, now)
        opened = await self._post_acceptance(conn, rows, now)
        await conn.execute(
            sql.INSERT_RAIL_INSTRUCTIONS,
            ids,
            [b.request.tenant for b in rows],
            [b.request.rail or DEFAULT_RAIL for b in rows],
            self.method,
            [b.rail_key for b in rows],
            [b.request.destination for b in rows],
            [b.request.amount for b in rows],
            [b.request.currency for b in rows],
            now,
        )
        events = [_created_event(b, now) for b in rows]
        await conn.execute(
            sql.INSERT_OUTBOX,
            [e[0] for e in events],
            ids,
            EVENTS,
            [str(b.settlement_id).encode() for b in rows],
            [e[1] for e in events],
        )
        return opened

    async def _post_acceptance(
        self, conn: asyncpg.Connection, rows: list[_Booked], now: datetime
    ) -> set[tuple[str, str]]:
        pairs = {(b.request.tenant, b.request.currency) for b in rows}
        opened = await self._open_accounts(conn, pairs)
        entries = [uuid7() for _ in rows]
        await conn.execute(
            sql.INSERT_ENTRIES,
            entries,
            [b.request.tenant for b in rows],
            [b.settlement_id for b in rows],
            "accepted",
            now,
        )
        entry_ids: list[uuid.UUID] = []
        accounts: list[str] = []
        amounts: list[int] = []
        currencies: list[str] = []
        deltas: dict[str, int] = defaultdict(int)
        for entry, b in zip(entries, rows, strict=True):
            postings, _ = accept_postings(b.request.amount, b.request.currency, b.request.tenant)
            for posting in postings:
                entry_ids.append(entry)
                accounts.append(posting.account_id)
                amounts.append(posting.amount)
                currencies.append(posting.currency)
                deltas[posting.account_id] += posting.amount
        await conn.execute(sql.INSERT_POSTINGS, entry_ids, accounts, amounts, currencies)
        # One update per account per batch, on one shard picked for the batch: concurrent
        # batches of one tenant mostly land on different shards and do not queue.
        shard = random.randrange(self.shards)
        ordered = sorted(deltas.items())
        await conn.execute(
            sql.ADD_TO_BALANCES, [a for a, _ in ordered], shard, [d for _, d in ordered]
        )
        return opened

    async def _open_accounts(
        self, conn: asyncpg.Connection, pairs: set[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        missing = sorted(pairs - self._accounts_known)
        if not missing:
            return set()
        ids, tenants, kinds, currencies = [], [], [], []
        for tenant, currency in missing:
            for kind in AccountKind:
                ids.append(account_id(tenant, kind, currency))
                tenants.append(tenant)
                kinds.append(str(kind))
                currencies.append(currency)
        await conn.execute(sql.OPEN_ACCOUNTS, ids, tenants, kinds, currencies, self.shards)
        return set(missing)

    async def _complete_keys(
        self,
        conn: asyncpg.Connection,
        completions: list[tuple[SettlementRequest, AcceptResult]],
        claimed: dict[tuple[str, str], int],
        now: datetime,
    ) -> None:
        if not completions:
            return
        status = await conn.execute(
            sql.COMPLETE_KEYS,
            [r.tenant for r, _ in completions],
            [r.idempotency_key for r, _ in completions],
            [claimed[(r.tenant, r.idempotency_key)] for r, _ in completions],
            [res.status for _, res in completions],
            [res.body for _, res in completions],
            [uuid.UUID(res.settlement_id) if res.settlement_id else None for _, res in completions],
            now,
        )
        if status != f"UPDATE {len(completions)}":
            # A fence moved under us: another holder owns a key now. Roll everything back.
            raise asyncpg.exceptions.SerializationError(f"idempotency fence lost: {status}")


def _json(value: dict[str, str]) -> str:
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _created_event(b: _Booked, now: datetime) -> tuple[uuid.UUID, bytes]:
    event_id = uuid7()
    r = b.request
    payload = avro.encode(
        "SettlementEvent",
        {
            "event_id": str(event_id), "settlement_id": str(b.settlement_id),
            "tenant": r.tenant, "reference": r.reference, "type": "created", "sequence": 1,
            "amount": r.amount, "currency": r.currency, "occurred_at": now,
            "rail_reference": None, "reason": None, "status": "accepted",
        },
    )  # fmt: skip
    return event_id, payload


def _duplicate_reference(r: SettlementRequest) -> AcceptResult:
    body = error_body(
        "duplicate_reference",
        f"reference {r.reference!r} is already booked under another idempotency key",
        "reference",
    )
    return AcceptResult(Outcome.DUPLICATE_REFERENCE, 409, body)


def _answer(decision: Decision, row: asyncpg.Record, now: datetime) -> AcceptResult:
    if decision is Decision.REPLAY:
        sid = row["settlement_id"]
        return AcceptResult(Outcome.REPLAYED, row["response_status"], row["response_body"],
                            str(sid) if sid else None)  # fmt: skip
    if decision is Decision.MISMATCH:
        body = error_body(
            "idempotency_key_reused",
            "this idempotency key was used with a different request",
            "Idempotency-Key",
        )
        return AcceptResult(Outcome.MISMATCH, 422, body)
    if decision is Decision.EXPIRED:
        body = error_body(
            "idempotency_key_expired",
            "this idempotency key is past its replay window; use a new key",
            "Idempotency-Key",
            original_request_at=row["created_at"].isoformat(),
        )
        return AcceptResult(Outcome.EXPIRED, 410, body)
    return in_use_result()


def in_use_result() -> AcceptResult:
    """The 409 a request gets while another request with its key is still in flight."""
    body = error_body(
        "idempotency_key_in_use",
        "a request with this idempotency key is still in flight; retry later",
        "Idempotency-Key",
    )
    return AcceptResult(Outcome.IN_USE, 409, body, retry_after=IN_USE_RETRY_AFTER)

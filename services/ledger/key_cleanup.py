"""Deleting idempotency records past their retention, in bounded batches, from the ledger.

Each statement walks at most `batch` records in (created_at, tenant, key) order from where the
previous one stopped, on the `created_at` index, and deletes those `key_retention.deletable`
lets go: the walk is bounded even when many old keys must stay (settlements not yet final),
and a sweep ends when a statement finds fewer than a batch. Every statement is a transaction
of its own, so a backlog (the first sweep over months of keys) goes in short steps that never
hold a lock for long, with a pause between them for the bookings.

A booking that takes a forgotten key over concurrently (`sql.BOOK_BATCH`) rewrites its
`created_at` to now; the delete checks age and state again on the row it locks, so a key
taken over in between stays. Replicas take turns: a statement runs only under a transaction
advisory lock, and a replica that finds it held leaves the sweep to the holder.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import asyncpg
from prometheus_client import CollectorRegistry, Counter

from services.ledger.key_retention import FINAL_STATUSES, KeyRetention, key_retention
from services.platform.clock import Clock, utc_now
from services.platform.tuning import IdempotencySection

log = logging.getLogger(__name__)

# The advisory lock's key, one 64-bit number all ledger replicas agree on.
CLEANUP_LOCK = int.from_bytes(b"settlkey", "big") & 0x7FFF_FFFF_FFFF_FFFF
# Between two statements of one sweep: bookings get the disk and the locks in between.
BATCH_PAUSE_SECONDS = 0.05

# A settlement_id whose settlement row is missing keeps its key (NULL = ANY is not true).
SWEEP_BATCH = """
WITH gate AS (
    SELECT pg_try_advisory_xact_lock($1) AS held
), examined AS (
    SELECT k.tenant, k.key, k.state, k.settlement_id, k.created_at
      FROM idempotency_keys k
     WHERE (SELECT held FROM gate)
       AND k.created_at <= $2
       AND k.created_at >= $3 AND (k.created_at, k.tenant, k.key) > ($3, $4, $5)
     ORDER BY k.created_at, k.tenant, k.key
     LIMIT $6
), forgotten AS (
    SELECT e.tenant, e.key FROM examined e
      LEFT JOIN settlements s ON s.id = e.settlement_id
     WHERE e.state = 'completed' AND (e.settlement_id IS NULL OR s.status = ANY($7::text[]))
), deleted AS (
    DELETE FROM idempotency_keys k USING forgotten f
     WHERE k.tenant = f.tenant AND k.key = f.key
       AND k.created_at <= $2 AND k.state = 'completed'
    RETURNING 1
), last AS (
    SELECT created_at, tenant, key FROM examined
     ORDER BY created_at DESC, tenant DESC, key DESC LIMIT 1
)
SELECT (SELECT held FROM gate) AS held, (SELECT count(*) FROM examined) AS examined,
       (SELECT count(*) FROM deleted) AS deleted, l.created_at, l.tenant, l.key
  FROM (SELECT 1) AS one LEFT JOIN last l ON true
"""


class Position(NamedTuple):
    """Where a sweep stands in (created_at, tenant, key) order; the next batch starts after."""

    created_at: datetime
    tenant: str
    key: str


# Before every record: no key is older, and '' sorts before any tenant or key.
START = Position(datetime(1, 1, 1, tzinfo=UTC), "", "")


def deleted_keys_counter(registry: CollectorRegistry) -> Counter:
    """settle_ledger_idempotency_keys_deleted_total, registered on `registry`."""
    return Counter(
        "settle_ledger_idempotency_keys_deleted_total",
        "Idempotency records deleted past their retention.",
        registry=registry,
    )


def retention_of(settings: IdempotencySection) -> KeyRetention:
    """The key retention the settings ask for."""
    return key_retention(
        replay=timedelta(seconds=settings.idempotency_replay_seconds),
        tombstone=timedelta(seconds=settings.idempotency_tombstone_seconds),
        retention=timedelta(hours=settings.idempotency_retention_hours),
        batch=settings.idempotency_cleanup_batch,
    )


class KeyCleanup:
    """Deletes the idempotency records `policy` lets go; see the module docstring."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        policy: KeyRetention,
        deleted: Counter,
        *,
        clock: Clock = utc_now,
        pause: float = BATCH_PAUSE_SECONDS,
    ) -> None:
        self._pool, self.policy, self._deleted = pool, policy, deleted
        self._clock, self._pause = clock, pause

    async def sweep(self) -> int:
        """Delete every record deletable now, batch by batch; the number deleted."""
        cutoff = self.policy.cutoff(self._clock())
        after, total = START, 0
        while True:
            row = await self._pool.fetchrow(
                SWEEP_BATCH, CLEANUP_LOCK, cutoff, *after, self.policy.batch, FINAL_STATUSES
            )
            if row is None or not row["held"]:
                log.debug("idempotency key cleanup: another replica is sweeping")
                return total
            deleted: int = row["deleted"]
            total += deleted
            self._deleted.inc(deleted)
            if row["examined"] < self.policy.batch:
                if total:
                    log.info("idempotency key cleanup: %d records past retention deleted", total)
                return total
            after = Position(row["created_at"], row["tenant"], row["key"])
            await asyncio.sleep(self._pause)

"""Pre-filling a bench database with a history of finished settlements, server-side.

`prefill` books `count` settlements of a tenant of their own, made by PostgreSQL from
`generate_series` in batches of `BATCH`, one transaction each (shared out among the
connections given, each on a balance shard of its own), in every table a settlement
touches in steady state: the settlement, its transitions, its journal entries and balanced
postings (each entry's legs in one statement, so the per-statement balance check of
migration 0009 passes them), the balance deltas, its rail instruction, and the rows that
are kept for a while only: idempotency keys of the last `KEYS_KEPT` (a third of them past
the ledger's 48 h retention, so key cleanup has work), and the applied webhooks; no outbox
row, since publishing an event deletes its row. Settlements
are spread evenly over `HISTORY`, the oldest first. Every row goes through the parent
tables by plain INSERT, so a table partitioned by month takes it as well as a plain one, and
through every trigger and foreign key. Then VACUUM ANALYZE, as a database that old would have
been, and a CHECKPOINT, so the fill is on disk before anything is measured.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import asyncpg

from services.adapters.postgres.history_months import open_months_since
from services.domain.balance_shards import BALANCE_SHARDS
from services.domain.postings import AccountKind, account_id
from services.ledger.booking import DEFAULT_RAIL
from services.settlement.transition_sql import OPEN_ACCOUNTS
from tools.bench.prefill_history import MIX_PER_100, REFUSED, history_steps

BATCH = 250_000  # settlements per transaction: about 3.5 million rows
HISTORY = timedelta(days=180)
KEYS_KEPT = timedelta(days=3)
CURRENCY = "USD"
WEBHOOK_RAIL = "stripe"  # the inbox's name of the rail (services/inbox/store.py)


def _uuid7(at: str, seed: str) -> str:
    """SQL for a version-7 uuid of instant `at` (random part from md5 of `seed`), as
    `services.domain.ids.uuid7` mints them: ids in time order, so history's index entries
    land in order, as the service's own do."""
    digest = f"md5({seed})"
    return (
        f"(lpad(to_hex((extract(epoch FROM {at}) * 1000)::bigint), 12, '0') || '7' || "
        f"substr({digest}, 1, 3) || '8' || substr({digest}, 4, 15))::uuid"
    )


def _status_case() -> str:
    """SQL giving the final status of settlement `n`, as `prefill_history.final_status`."""
    arms, upto = [], 0
    for status, share in MIX_PER_100.items():
        upto += share
        arms.append(f"WHEN n % 100 < {upto} THEN '{status.value}'")
    return f"CASE {' '.join(arms)} END"


ENTRY_ID = _uuid7("s.at", "$1 || ':entry:' || s.n || ':' || s.entry_kind")
# The batch's settlements, made once per transaction and read by every statement after it:
# $1..$6 are the first and last n of the batch, the tenant, settlements in all, the end of
# the history and its length in seconds.
BATCH_TABLE = """
CREATE TEMP TABLE prefill_batch (n bigint, id uuid, reference text, status text, amount bigint,
    transfer text, created_at timestamptz) ON COMMIT DELETE ROWS
"""
BATCH_ROWS = f"""
INSERT INTO prefill_batch
SELECT n, {_uuid7("created_at", "$3::text || ':settlement:' || n")} AS id,
       $3 || '-' || n AS reference, {_status_case()} AS status,
       (1000 + n * 7919 % 500000)::bigint AS amount,
       'tr_' || left(md5($3 || ':transfer:' || n), 24) AS transfer, created_at
  FROM generate_series($1::bigint, $2::bigint) AS n,
       LATERAL (SELECT $5::timestamptz - make_interval(secs => ($4 - n) * $6::float8 / $4)
                AS created_at) AS t
"""
# $1 the tenant and $2 the end of the history in every statement. `h` is one row per
# settlement of the batch, `s` one per step.
_HISTORY = """
WITH h AS (SELECT b.*, $1::text AS tenant FROM prefill_batch b), s AS (
    SELECT h.*, st.*, least(h.created_at + make_interval(secs => st.after_s), $2::timestamptz)
           AS at
      FROM h JOIN prefill_steps st ON st.final = h.status
)"""
STEPS_TABLE = """
CREATE TEMP TABLE prefill_steps (final text, sequence int, source text, target text,
    actor text, reason text, entry_kind text, credit text, debit text, after_s float8,
    webhook text)
"""
SETTLEMENTS = f"""{_HISTORY}
INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination, amount,
                         currency, rail, status, version, reason, rail_reference,
                         amount_reversed, created_at, updated_at)
SELECT h.id, $1, h.reference, 'key-' || h.n, 'payee-' || h.n % 5000, 'acct_' || h.n % 50,
       h.amount, $3, $4, h.status, l.version, l.reason,
       CASE WHEN h.status <> 'failed' THEN h.transfer END,
       CASE WHEN h.status = 'reversed' THEN h.amount ELSE 0 END,
       h.created_at, least(h.created_at + make_interval(secs => l.after_s), $2)
  FROM h JOIN (SELECT final, max(sequence) AS version, max(after_s) AS after_s,
                      max(reason) AS reason
                 FROM prefill_steps GROUP BY final) l ON l.final = h.status
 ORDER BY h.n
"""
TRANSITIONS = f"""{_HISTORY}
INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status, reason,
                                    actor, occurred_at)
SELECT id, sequence, source, target, reason, actor, at FROM s ORDER BY n, sequence
"""
# Entries, their legs, and the legs' sum per account on balance shard $4, in one statement.
BOOKS = f"""{_HISTORY}, entries AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
    SELECT {ENTRY_ID}, $1, id, entry_kind, at
      FROM s WHERE entry_kind IS NOT NULL ORDER BY n, sequence
), legs AS (
    SELECT {ENTRY_ID} AS entry_id, l.account_id, l.amount, s.at
      FROM s CROSS JOIN LATERAL (VALUES (s.credit, -s.amount), (s.debit, s.amount))
                                AS l(account_id, amount)
     WHERE s.entry_kind IS NOT NULL
), posted AS (
    INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
    SELECT entry_id, account_id, amount, $3, at FROM legs
)
UPDATE account_balances AS b SET balance = b.balance + d.delta
  FROM (SELECT account_id, sum(amount) AS delta FROM legs GROUP BY account_id) AS d
 WHERE b.account_id = d.account_id AND b.shard = $4
"""
INSTRUCTIONS = f"""{_HISTORY}
INSERT INTO rail_instructions (settlement_id, tenant, rail, method, idempotency_key,
                               destination, amount, currency, status, fence, attempts,
                               first_sent_at, last_error, error_class, rail_reference,
                               created_at, updated_at)
SELECT id, $1, $4, 'transfer', encode(sha256(convert_to(id::text, 'UTF8')), 'hex'),
       'acct_' || n % 50, amount, $3, CASE WHEN failed THEN 'failed' ELSE 'transferred' END,
       1, 1, created_at + interval '50 ms', CASE WHEN failed THEN $5 END,
       CASE WHEN failed THEN 'refused' END, CASE WHEN NOT failed THEN transfer END,
       created_at, created_at + interval '300 ms'
  FROM (SELECT h.*, h.status = 'failed' AS failed FROM h) AS i ORDER BY n
"""
KEYS = f"""{_HISTORY}
INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, state, fence,
                              settlement_id, response_status, response_body, created_at,
                              completed_at)
SELECT $1, 'key-' || n, sha256(convert_to(reference, 'UTF8')), 'POST', '/v1/settlements',
       'completed', 1, id, 201,
       convert_to(json_build_object('id', id, 'reference', reference, 'amount', amount,
                                    'status', 'accepted')::text, 'UTF8'),
       created_at, created_at
  FROM h WHERE created_at > $2 - make_interval(secs => $3) ORDER BY n
"""
WEBHOOKS = f"""{_HISTORY}
INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, change_key,
                          settlement_id, payload, status, attempts, received_at,
                          received_month, applied_at, amount_reversed)
SELECT $3, 'evt_' || left(md5($1 || ':webhook:' || n || ':' || sequence), 24), webhook,
       transfer,
       transfer || ':' || webhook || CASE WHEN target = 'reversed' THEN ':' || amount ELSE '' END,
       id,
       convert_to(json_build_object('type', webhook, 'object', transfer)::text, 'UTF8'),
       'applied', 1, at, date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
       at + interval '20 ms',
       CASE WHEN target = 'reversed' THEN amount END
  FROM s WHERE webhook IS NOT NULL ORDER BY n, sequence
"""


class Filled(NamedTuple):
    """What a pre-fill did."""

    settlements: int  # settlements of history booked
    seconds: float  # how long the fill took, VACUUM ANALYZE included
    database_bytes: int  # pg_database_size afterwards


Progress = Callable[[int, int, float], None]  # settlements done, in all, seconds so far


def _per_table(number: int) -> list[tuple[str, tuple[object, ...]]]:
    """Each statement of batch `number` with its arguments beyond the two shared ones."""
    return [
        (SETTLEMENTS, (CURRENCY, DEFAULT_RAIL)),
        (TRANSITIONS, ()),
        (BOOKS, (CURRENCY, number % BALANCE_SHARDS)),
        (INSTRUCTIONS, (CURRENCY, DEFAULT_RAIL, REFUSED)),
        (KEYS, (KEYS_KEPT.total_seconds(),)),
        (WEBHOOKS, (WEBHOOK_RAIL,)),
    ]


async def open_accounts(conn: asyncpg.Connection, tenant: str) -> None:
    """Open `tenant`'s accounts in `CURRENCY` with their balance shards, as the ledger does."""
    kinds = list(AccountKind)
    ids = [account_id(tenant, kind, CURRENCY) for kind in kinds]
    await conn.execute(
        OPEN_ACCOUNTS,
        ids,
        [tenant] * len(ids),
        [k.value for k in kinds],
        [CURRENCY] * len(ids),
        BALANCE_SHARDS,
    )


async def _prepare(conn: asyncpg.Connection, tenant: str) -> None:
    # A crash loses a bench database, not money: no need to wait for each commit's flush.
    # Memory enough to sort a batch's steps and vacuum without spilling to disk.
    await conn.execute(
        "SET synchronous_commit = off; SET work_mem = '256MB'; SET maintenance_work_mem = '256MB'"
    )
    await conn.execute(STEPS_TABLE)
    await conn.execute(BATCH_TABLE)
    await conn.copy_records_to_table("prefill_steps", records=history_steps(tenant, CURRENCY))


async def prefill(
    conns: Sequence[asyncpg.Connection],
    tenant: str,
    count: int,
    *,
    batch: int = BATCH,
    history: timedelta = HISTORY,
    progress: Progress | None = None,
) -> Filled:
    """Book `count` finished settlements of `tenant` spread over `history` up to a minute ago
    (see the module), batches shared out among `conns`, then vacuum and analyze the database;
    what it took."""
    started = time.monotonic()
    await open_accounts(conns[0], tenant)
    for conn in conns:
        await _prepare(conn, tenant)
    end = datetime.now(UTC) - timedelta(minutes=1)
    # The history's monthly partitions exist from about now on; the past needs its months.
    await open_months_since(conns[0], (end - history).replace(tzinfo=None))
    # One iterator for every connection: each takes the next batch when it is free. Batches
    # taken at once have consecutive numbers, so their balance shards differ: none waits.
    batches = enumerate(range(0, count, batch))
    done = 0

    async def book(conn: asyncpg.Connection) -> None:
        nonlocal done
        for number, lo in batches:
            hi = min(lo + batch, count) - 1
            async with conn.transaction():
                await conn.execute(BATCH_ROWS, lo, hi, tenant, count, end, history.total_seconds())
                for statement, extra in _per_table(number):
                    await conn.execute(statement, tenant, end, *extra)
            done += hi - lo + 1
            if progress is not None:
                progress(done, count, time.monotonic() - started)

    async with asyncio.TaskGroup() as group:
        for conn in conns:
            group.create_task(book(conn))
    for conn in conns:
        await conn.execute("DROP TABLE prefill_steps, prefill_batch")
    await conns[0].execute("VACUUM ANALYZE")
    # The fill's pages written out now, not by the first checkpoint of the measured run, whose
    # flush of tens of gigabytes would stall every commit behind it.
    await conns[0].execute("CHECKPOINT")
    size = await conns[0].fetchval("SELECT pg_database_size(current_database())")
    return Filled(count, time.monotonic() - started, int(size))

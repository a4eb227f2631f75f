"""The schema on the real PostgreSQL: migrations run to head and back, and the database
itself rejects rows that would corrupt money or break dedupe."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from click.testing import CliRunner

from services.adapters.postgres.migrate import (
    UnknownRevision,
    current_revision,
    downgrade,
    head_revision,
    known_revisions,
    migrate_to,
    step_down,
    upgrade,
)
from services.adapters.postgres.migration_run import is_lock_timeout
from services.adapters.postgres.schema_version import require_schema
from services.apps.ledger import serve
from services.commands.migrate import migrate
from services.domain.errors import ConfigError
from services.platform.service_settings import LedgerSettings
from services.platform.settings import load_settings
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers

pytestmark = pytest.mark.integration

ENTRY = "INSERT INTO journal_entries (id, tenant, kind, occurred_at) VALUES ($1, $2, 'e', now())"
POSTING = "INSERT INTO postings (entry_id, account_id, amount, currency) VALUES ($1, $2, $3, 'USD')"


@pytest.fixture
async def fresh_db(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_mig_", migrated=False) as url:
        yield url


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    yield conn
    await conn.close()


async def tables(url: str) -> set[str]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {r["tablename"] for r in rows}
    finally:
        await conn.close()


async def test_upgrade_to_head_downgrade_to_base_and_up_again(fresh_db: str) -> None:
    model = {
        "settlements",
        "settlement_transitions",
        "idempotency_keys",
        "accounts",
        "account_balances",
        "journal_entries",
        "postings",
        "outbox",
        "rail_instructions",
        "inbox_events",
        "operator_actions",
        "reconciliation_runs",
        "reconciliation_sources",
        "reconciliation_breaks",
        "reconciliation_balances",
    }
    await asyncio.to_thread(upgrade, fresh_db)
    assert model <= await tables(fresh_db)
    await asyncio.to_thread(downgrade, fresh_db, "base")
    assert await tables(fresh_db) == {"alembic_version"}
    await asyncio.to_thread(upgrade, fresh_db)
    assert model <= await tables(fresh_db)


async def test_concurrent_migrators_take_turns(fresh_db: str) -> None:
    # Replicas starting together each run `settle migrate`; the advisory lock serialises them.
    script = (
        "import sys; from services.adapters.postgres.migrate import upgrade; upgrade(sys.argv[1])"
    )
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", script, fresh_db)
        for _ in range(3)
    ]
    assert [await p.wait() for p in procs] == [0, 0, 0]
    conn = await asyncpg.connect(asyncpg_dsn(fresh_db))
    try:
        assert await conn.fetchval("SELECT version_num FROM alembic_version") == head_revision()
    finally:
        await conn.close()


async def test_migrate_to_a_revision_up_or_down_and_one_step_down(fresh_db: str) -> None:
    head, previous = known_revisions()[-1], known_revisions()[-2]
    assert await asyncio.to_thread(migrate_to, fresh_db, "0020") == (None, "0020")
    assert await asyncio.to_thread(migrate_to, fresh_db, "head") == ("0020", head)
    assert await asyncio.to_thread(step_down, fresh_db) == (head, previous)
    assert await asyncio.to_thread(migrate_to, fresh_db, "0024") == (previous, "0024")
    assert await asyncio.to_thread(migrate_to, fresh_db, "0024") == ("0024", "0024")
    with pytest.raises(UnknownRevision, match="'0999' is not a revision this settle knows"):
        await asyncio.to_thread(migrate_to, fresh_db, "0999")
    assert await asyncio.to_thread(current_revision, fresh_db) == "0024"
    assert await asyncio.to_thread(migrate_to, fresh_db, "base") == ("0024", None)
    with pytest.raises(UnknownRevision, match="no revision: nothing to downgrade"):
        await asyncio.to_thread(step_down, fresh_db)


async def test_the_command_moves_the_schema_and_names_an_unknown_revision(fresh_db: str) -> None:
    env = {"SETTLE_DATABASE_URL": fresh_db}

    def settle_migrate(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(migrate, list(args), env=env)
        return result.exit_code, result.output

    code, out = await asyncio.to_thread(settle_migrate, "--to", "0021")
    assert (code, out.split(" (")[0]) == (0, "database migrated to 0021"), out
    code, out = await asyncio.to_thread(settle_migrate, "--downgrade")
    assert (code, out.split(" (")[0]) == (0, "database migrated to 0020"), out
    code, out = await asyncio.to_thread(settle_migrate, "--to", "nope")
    assert code == 1
    assert "revision 'nope' is not a revision this settle knows" in out
    code, out = await asyncio.to_thread(settle_migrate, "--to", "0021", "--downgrade")
    assert code == 2
    assert "give --to or --downgrade, not both" in out
    assert await asyncio.to_thread(current_revision, fresh_db) == "0020"


async def hold_entries(url: str, seconds: float | None, held: asyncio.Event) -> None:
    """Read journal_entries in a transaction left open for `seconds` (None: until cancelled):
    a long report, in the way of 0023's ALTER TABLE."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        async with conn.transaction():
            await conn.fetchval("SELECT count(*) FROM journal_entries")
            held.set()
            await asyncio.sleep(3600 if seconds is None else seconds)
    finally:
        await conn.close()


async def test_a_migration_behind_a_long_transaction_is_tried_again(fresh_db: str) -> None:
    await asyncio.to_thread(upgrade, fresh_db, "0022")
    held = asyncio.Event()
    reader = asyncio.create_task(hold_entries(fresh_db, 0.5, held))
    await held.wait()
    started = time.monotonic()
    # Each try gives up after 200 ms rather than queueing the table's writers behind it.
    await asyncio.to_thread(upgrade, fresh_db, "0023", lock_timeout_ms=200)
    assert time.monotonic() - started >= 0.4
    await reader
    assert await asyncio.to_thread(current_revision, fresh_db) == "0023"


async def test_a_lock_never_free_fails_the_migration_and_keeps_the_ones_before(
    fresh_db: str,
) -> None:
    await asyncio.to_thread(upgrade, fresh_db, "0021")
    held = asyncio.Event()
    reader = asyncio.create_task(hold_entries(fresh_db, None, held))
    await held.wait()
    try:
        with pytest.raises(Exception, match="lock timeout") as failed:
            await asyncio.to_thread(upgrade, fresh_db, "0023", lock_timeout_ms=100)
    finally:
        reader.cancel()
    assert is_lock_timeout(failed.value)
    # 0022 committed on its own; 0023 was rolled back after its last try.
    assert await asyncio.to_thread(current_revision, fresh_db) == "0022"


async def test_a_service_refuses_a_schema_one_step_behind(fresh_db: str, infra: Servers) -> None:
    await asyncio.to_thread(upgrade, fresh_db)
    await asyncio.to_thread(step_down, fresh_db)
    head, previous = known_revisions()[-1], known_revisions()[-2]
    settings = load_settings(
        {"SETTLE_DATABASE_URL": fresh_db, "SETTLE_KAFKA_BOOTSTRAP": infra.kafka_bootstrap},
        kind=LedgerSettings,
    )
    with pytest.raises(ConfigError) as refused:
        await serve(settings, "127.0.0.1", 0, 0, consume=False)
    assert refused.value.variable == "SETTLE_DATABASE_URL"
    assert refused.value.problem == (
        f"schema at {previous}, this settle needs {head}: run settle migrate"
    )


async def test_a_schema_ahead_of_the_code_serves_it(fresh_db: str) -> None:
    await asyncio.to_thread(upgrade, fresh_db)
    pool = await asyncpg.create_pool(asyncpg_dsn(fresh_db), min_size=0)
    try:
        await require_schema(pool)  # at head
        ahead = f"{int(head_revision()) + 1:04d}"  # a later release's expanded schema
        await pool.execute("UPDATE alembic_version SET version_num = $1", ahead)
        await require_schema(pool)
        # A rolled-back release's `settle migrate` leaves the schema ahead of it as it is.
        assert await asyncio.to_thread(migrate_to, fresh_db, "head") == (ahead, ahead)
        with pytest.raises(UnknownRevision, match=f"the database's revision '{ahead}'"):
            await asyncio.to_thread(migrate_to, fresh_db, "0020")
    finally:
        await pool.close()


async def insert_settlement(
    db: asyncpg.Connection,
    tenant: str,
    reference: str,
    amount: object = 1000,
    currency: str = "USD",
    status: str = "accepted",
    reason: str | None = None,
) -> uuid.UUID:
    sid = uuid.uuid4()
    await db.execute(
        """INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination,
               amount, currency, rail, status, reason, created_at, updated_at)
           VALUES ($1, $2, $3, $4, 'payee-1', 'acct_1', $5, $6, 'sim', $7, $8, now(), now())""",
        sid,
        tenant,
        reference,
        unique("key-"),
        amount,
        currency,
        status,
        reason,
    )
    return sid


@pytest.mark.parametrize(
    ("amount", "currency", "status"),
    [
        (0, "USD", "accepted"),
        (-5, "USD", "accepted"),
        (10, "usd", "accepted"),
        (10, "US", "accepted"),
        (10, "USD", "lost"),
    ],
)
async def test_settlement_rejects_bad_money_and_unknown_status(
    db: asyncpg.Connection, amount: int, currency: str, status: str
) -> None:
    with pytest.raises(asyncpg.CheckViolationError):
        await insert_settlement(db, unique(), unique(), amount, currency, status)


async def test_amount_is_bigint_minor_units(db: asyncpg.Connection) -> None:
    sid = await insert_settlement(db, unique(), unique(), 2**63 - 1)
    assert await db.fetchval("SELECT amount FROM settlements WHERE id = $1", sid) == 2**63 - 1
    with pytest.raises((asyncpg.DataError, OverflowError)):
        await insert_settlement(db, unique(), unique(), 2**63)
    # Neither asyncpg nor PostgreSQL refuses 10.5 for a bigint (they truncate or round), so a
    # fractional amount must be stopped at the edge; here we only pin the column types.
    types = await db.fetch(
        """SELECT table_name, data_type FROM information_schema.columns
           WHERE table_schema = 'public' AND column_name IN ('amount', 'balance')
             AND table_name NOT IN (SELECT inhrelid::regclass::text FROM pg_inherits)"""
    )
    assert {r["data_type"] for r in types} == {"bigint"}
    money_tables = {
        "settlements",
        "postings",
        "account_balances",
        "rail_instructions",
        "reconciliation_balances",
    }
    money_tables.add("reconciliation_rail_staging")  # the rail's amounts, staged for a run
    money_tables.add("rail_charges")  # what the rails charged settle
    assert {r["table_name"] for r in types} == money_tables


async def test_needs_review_requires_a_reason(db: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.CheckViolationError):
        await insert_settlement(db, unique(), unique(), status="needs_review")
    await insert_settlement(db, unique(), unique(), status="needs_review", reason="rail unclear")


async def test_reference_unique_per_tenant(db: asyncpg.Connection) -> None:
    tenant, reference = unique(), unique()
    await insert_settlement(db, tenant, reference)
    await insert_settlement(db, unique(), reference)  # another tenant may reuse it
    with pytest.raises(asyncpg.UniqueViolationError):
        await insert_settlement(db, tenant, reference)


async def insert_idempotency_key(db: asyncpg.Connection, tenant: str, key: str) -> None:
    await db.execute(
        """INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, state,
               locked_until, created_at)
           VALUES ($1, $2, $3, 'POST', '/v1/settlements', 'in_flight', now(), now())""",
        tenant,
        key,
        bytes(32),
    )


async def test_idempotency_key_unique_per_tenant(db: asyncpg.Connection) -> None:
    tenant, key = unique(), unique()
    await insert_idempotency_key(db, tenant, key)
    await insert_idempotency_key(db, unique(), key)
    with pytest.raises(asyncpg.UniqueViolationError):
        await insert_idempotency_key(db, tenant, key)


async def test_completed_idempotency_record_carries_its_response(db: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.CheckViolationError):
        await db.execute(
            """INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, state,
                   created_at)
               VALUES ($1, $2, $3, 'POST', '/v1/settlements', 'completed', now())""",
            unique(),
            unique(),
            bytes(32),
        )


async def insert_inbox_event(
    db: asyncpg.Connection, event_id: str | None, change_key: str, status: str = "received"
) -> None:
    await db.execute(
        """INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, change_key,
               payload, status, reason)
           VALUES ('stripe', $1, 'payout.paid', 'po_1', $2, '{}', $3, $4)""",
        event_id,
        change_key,
        status,
        None if status == "received" else "why",
    )


async def test_rail_event_stored_once(db: asyncpg.Connection) -> None:
    event_id = unique("evt_")
    await insert_inbox_event(db, event_id, unique())
    with pytest.raises(asyncpg.UniqueViolationError):
        await insert_inbox_event(db, event_id, unique())
    inserted = await db.execute(
        """INSERT INTO inbox_events (rail, rail_event_id, change_key, payload, status)
           VALUES ('stripe', $1, $2, '{}', 'received') ON CONFLICT DO NOTHING""",
        event_id,
        unique(),
    )
    assert inserted == "INSERT 0 0"


async def test_two_event_ids_for_one_change_collide(db: asyncpg.Connection) -> None:
    change = unique("po_1:payout.paid:")
    await insert_inbox_event(db, unique("evt_"), change)
    with pytest.raises(asyncpg.UniqueViolationError):
        await insert_inbox_event(db, unique("evt_"), change)


async def test_rejected_webhook_needs_a_reason_but_no_event_id(db: asyncpg.Connection) -> None:
    await insert_inbox_event(db, None, unique(), status="rejected")
    with pytest.raises(asyncpg.CheckViolationError):
        await insert_inbox_event(db, None, unique(), status="received")


async def open_accounts(db: asyncpg.Connection, tenant: str) -> tuple[str, str]:
    funding, payable = f"{tenant}:funding:USD", f"{tenant}:payable:USD"
    await db.executemany(
        "INSERT INTO accounts (id, tenant, kind, currency) VALUES ($1, $2, $3, 'USD')",
        [(funding, tenant, "funding"), (payable, tenant, "payable")],
    )
    return funding, payable


async def post_entry(db: asyncpg.Connection, tenant: str, legs: list[tuple[str, int]]) -> uuid.UUID:
    entry = uuid.uuid4()
    async with db.transaction():
        await db.execute(
            ENTRY,
            entry,
            tenant,
        )
        await db.executemany(
            POSTING,
            [(entry, account, amount) for account, amount in legs],
        )
    return entry


async def test_balanced_entry_commits(db: asyncpg.Connection) -> None:
    tenant = unique()
    funding, payable = await open_accounts(db, tenant)
    entry = await post_entry(db, tenant, [(funding, 700), (payable, -700)])
    total = await db.fetchval("SELECT sum(amount) FROM postings WHERE entry_id = $1", entry)
    assert total == 0


async def test_unbalanced_entry_is_rejected_at_commit(db: asyncpg.Connection) -> None:
    tenant = unique()
    funding, payable = await open_accounts(db, tenant)
    with pytest.raises(asyncpg.CheckViolationError, match="does not balance"):
        await post_entry(db, tenant, [(funding, 700), (payable, -699)])
    assert await db.fetchval("SELECT count(*) FROM journal_entries WHERE tenant = $1", tenant) == 0


async def test_posting_currency_must_match_its_account(db: asyncpg.Connection) -> None:
    tenant = unique()
    funding, _ = await open_accounts(db, tenant)
    entry = uuid.uuid4()
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        async with db.transaction():
            await db.execute(
                ENTRY,
                entry,
                tenant,
            )
            await db.execute(
                POSTING.replace("$3, 'USD'", "5, 'EUR'"),
                entry,
                funding,
            )


async def test_postings_are_append_only(db: asyncpg.Connection) -> None:
    tenant = unique()
    funding, payable = await open_accounts(db, tenant)
    entry = await post_entry(db, tenant, [(funding, 10), (payable, -10)])
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await db.execute("UPDATE postings SET amount = 11 WHERE entry_id = $1", entry)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await db.execute("DELETE FROM postings WHERE entry_id = $1", entry)


async def test_rail_instruction_key_is_a_sha256_and_unique(db: asyncpg.Connection) -> None:
    async def instruct(settlement: uuid.UUID, key: str) -> None:
        await db.execute(
            """INSERT INTO rail_instructions (settlement_id, tenant, rail, method, idempotency_key,
                   destination, amount, currency, status, created_at, updated_at)
               VALUES ($1, 't', 'sim', 'transfer', $2, 'acct_1', 10, 'USD', 'pending',
                       now(), now())""",
            settlement,
            key,
        )

    key = uuid.uuid4().hex * 2
    await instruct(await insert_settlement(db, unique(), unique()), key)
    with pytest.raises(asyncpg.UniqueViolationError):
        await instruct(await insert_settlement(db, unique(), unique()), key)
    with pytest.raises(asyncpg.CheckViolationError):
        await instruct(await insert_settlement(db, unique(), unique()), "not-a-key")


async def test_operator_actions_are_append_only(db: asyncpg.Connection) -> None:
    target = unique("stl_")
    await db.execute(
        """INSERT INTO operator_actions (actor, action, target, before, after)
           VALUES ('ops', 'review.resolve', $1, $2, '{"status": "paid"}')""",
        target,
        '{"status": "needs_review"}',
    )
    # A writer that predates before/after still writes.
    await db.execute(
        "INSERT INTO operator_actions (actor, action, target) VALUES ('ops', 'inbox.replay', $1)",
        target,
    )
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await db.execute("UPDATE operator_actions SET actor = 'someone' WHERE target = $1", target)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await db.execute("DELETE FROM operator_actions WHERE target = $1", target)
    assert await db.fetchval("SELECT count(*) FROM operator_actions WHERE target = $1", target) == 2

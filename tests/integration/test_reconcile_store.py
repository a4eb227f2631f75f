"""Reconciliation's records on the real PostgreSQL: a break is one row across runs, a closed
break stays closed, and a run is completed only when every source it read answered."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from services.domain.breaks import (
    BreakNotHealable,
    BreakStatus,
    BreakType,
    IllegalBreakTransition,
)
from services.domain.reconciliation import Break, RunKind, RunStatus
from services.domain.settlement import ReasonRequired
from services.reconcile.closing import close_break
from services.reconcile.errors import BreakNotFound, RunNotRunning
from services.reconcile.store import (
    EMPTY_ANSWER,
    break_statuses,
    finish_run,
    last_completed,
    open_breaks,
    record_source,
    start_run,
    stored_key,
    upsert_breaks,
)
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers

pytestmark = pytest.mark.integration
T0 = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.fixture(scope="module")
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    # A database of its own: paging reads every open break there is.
    async with scratch_database(infra.database_url, "settle_recon_store_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=2)
        yield pool
        await pool.close()


async def run(pool: asyncpg.Pool, at: datetime = T0) -> int:
    return await start_run(pool, RunKind.INTRADAY, at - HOUR, at, at)


def amount_break(amount: int, settlement: str | None = None) -> Break:
    sid = settlement or str(uuid.uuid4())
    return Break(
        BreakType.AMOUNT_MISMATCH, sid, unique("tr_"), "amount", 1000, amount, amount - 1000, "USD"
    )


async def stored(pool: asyncpg.Pool, item: Break) -> asyncpg.Record:
    rows = await pool.fetch(
        "SELECT * FROM reconciliation_breaks WHERE break_key = $1", stored_key(item)
    )
    assert len(rows) == 1
    return rows[0]


async def test_a_break_seen_again_is_one_row_with_last_seen_moved(pool: asyncpg.Pool) -> None:
    first, second = await run(pool), await run(pool, T0 + HOUR)
    found = amount_break(900)
    assert await upsert_breaks(pool, first, [found], T0) == (1, 0)
    # Seen again, by a later run, with the rail now saying another amount.
    again = found._replace(actual=800, difference=-200)
    assert await upsert_breaks(pool, second, [again], T0 + HOUR) == (0, 1)
    row = await stored(pool, found)
    assert (row["first_seen"], row["last_seen"]) == (T0, T0 + HOUR)
    assert (row["first_run_id"], row["last_run_id"]) == (first, second)
    assert (row["status"], row["actual"], row["reason"]) == ("open", "800", "amount:-200")
    # A late page of the first run moves neither back.
    assert await upsert_breaks(pool, first, [found], T0) == (0, 1)
    row = await stored(pool, found)
    assert (row["last_seen"], row["last_run_id"]) == (T0 + HOUR, second)


async def test_a_page_naming_one_break_twice_stores_it_once(pool: asyncpg.Pool) -> None:
    found = amount_break(900)
    assert await upsert_breaks(pool, await run(pool), [found, found], T0) == (1, 0)
    await stored(pool, found)


async def close(pool: asyncpg.Pool, item: Break, status: BreakStatus) -> None:
    await pool.execute(
        """UPDATE reconciliation_breaks SET status = $2, resolved_at = $3, resolved_by = 'ops',
               resolution_reason = 'rail confirmed' WHERE break_key = $1 AND status = 'open'""",
        stored_key(item),
        status.value,
        T0,
    )


async def versions(pool: asyncpg.Pool, item: Break) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT * FROM reconciliation_breaks WHERE break_key = $1 ORDER BY id",
            stored_key(item),
        )
    )


@pytest.mark.parametrize("closed", [BreakStatus.HEALED, BreakStatus.RESOLVED])
async def test_a_new_value_after_a_closed_break_is_a_new_open_break_naming_it(
    pool: asyncpg.Pool, closed: BreakStatus
) -> None:
    found = amount_break(900)
    await upsert_breaks(pool, await run(pool), [found], T0)
    await close(pool, found, closed)
    later = await run(pool, T0 + HOUR)
    assert await upsert_breaks(pool, later, [found._replace(actual=1)], T0 + HOUR) == (1, 0)
    before, now = await versions(pool, found)
    assert (before["status"], before["actual"]) == (closed.value, "900")  # never reopened
    assert (now["status"], now["actual"], now["previous_id"]) == ("open", "1", before["id"])
    assert (await break_statuses(pool, [stored_key(found)]))[stored_key(found)] is BreakStatus.OPEN
    assert stored_key(found) in {b.break_key for b in await all_open(pool)}


async def test_the_discrepancy_an_operator_resolved_stays_resolved_seen_the_same(
    pool: asyncpg.Pool,
) -> None:
    found = amount_break(900)
    await upsert_breaks(pool, await run(pool), [found], T0)
    await close(pool, found, BreakStatus.RESOLVED)
    later = await run(pool, T0 + HOUR)
    assert await upsert_breaks(pool, later, [found], T0 + HOUR) == (0, 1)
    (row,) = await versions(pool, found)
    assert (row["status"], row["last_run_id"]) == ("resolved", later)


async def test_a_healed_discrepancy_that_comes_back_is_open_again_as_a_new_break(
    pool: asyncpg.Pool,
) -> None:
    found = amount_break(900)
    await upsert_breaks(pool, await run(pool), [found], T0)
    await close(pool, found, BreakStatus.HEALED)
    assert await upsert_breaks(pool, await run(pool, T0 + HOUR), [found], T0 + HOUR) == (1, 0)
    assert [r["status"] for r in await versions(pool, found)] == ["healed", "open"]


async def all_open(pool: asyncpg.Pool, break_type: BreakType | None = None) -> list[object]:
    found, cursor = [], 0
    while page := await open_breaks(pool, cursor, 2, break_type):
        found.extend(page)
        cursor = page[-1].id
    return found


async def test_open_breaks_page_by_id_and_by_type(pool: asyncpg.Pool) -> None:
    sid = str(uuid.uuid4())
    drift = Break(BreakType.STATUS_DRIFT, sid, "tr_x", "status", "submitted", "paid", None, None)
    balance = Break(BreakType.BALANCE_MISMATCH, None, None, "in_transit", 5, 7, 2, "EUR")
    page = [amount_break(n) for n in (1, 2, 3)] + [drift, balance]
    await upsert_breaks(pool, await run(pool), page, T0)
    listed = await all_open(pool)
    ids = [b.id for b in listed]
    assert ids == sorted(set(ids))
    assert {stored_key(b) for b in page} <= {b.break_key for b in listed}
    drifts = await all_open(pool, BreakType.STATUS_DRIFT)
    assert {b.break_type for b in drifts} == {BreakType.STATUS_DRIFT}
    mine = next(b for b in drifts if b.settlement_id == sid)
    assert (mine.expected, mine.actual, mine.reason) == ("submitted", "paid", "status")
    assert next(b for b in listed if b.break_key == stored_key(balance)).actual == 7


async def test_exact_amounts_survive_the_round_trip(pool: asyncpg.Pool) -> None:
    huge = 2**63 - 1
    found = amount_break(huge)
    await upsert_breaks(pool, await run(pool), [found], T0)
    back = [b for b in await all_open(pool) if b.break_key == stored_key(found)]
    assert back[0].actual == huge and isinstance(back[0].actual, int)


async def test_a_run_whose_sources_answered_completes_and_its_record_is_final(
    pool: asyncpg.Pool,
) -> None:
    kind = RunKind.END_OF_DAY
    run_id = await start_run(pool, kind, T0 - 24 * HOUR, T0 + 99 * HOUR, T0)
    assert (
        await record_source(pool, run_id, "ledger", read_at=T0, rows=3, data_expected=True) is None
    )
    assert (
        await record_source(pool, run_id, "rail", read_at=T0, rows=0, data_expected=False) is None
    )
    assert await finish_run(pool, run_id, T0 + HOUR) is RunStatus.COMPLETED
    assert await last_completed(pool, kind) == T0 + 99 * HOUR
    with pytest.raises(RunNotRunning):
        await record_source(pool, run_id, "balance", read_at=T0, rows=1, data_expected=True)
    with pytest.raises(RunNotRunning):
        await finish_run(pool, run_id, T0 + HOUR, "again")
    for statement in (
        "UPDATE reconciliation_sources SET rows_returned = 9 WHERE run_id = $1",
        "DELETE FROM reconciliation_sources WHERE run_id = $1",
        "UPDATE reconciliation_runs SET status = 'failed', error = 'x' WHERE id = $1",
        "DELETE FROM reconciliation_runs WHERE id = $1",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await pool.execute(statement, run_id)


async def test_an_empty_answer_where_data_was_expected_fails_the_run(pool: asyncpg.Pool) -> None:
    run_id = await run(pool)
    await record_source(pool, run_id, "ledger", read_at=T0, rows=5, data_expected=True)
    error = await record_source(pool, run_id, "rail", read_at=T0, rows=0, data_expected=True)
    assert error == EMPTY_ANSWER
    assert await finish_run(pool, run_id, T0) is RunStatus.FAILED
    failed = await pool.fetchval("SELECT error FROM reconciliation_runs WHERE id = $1", run_id)
    assert failed == f"rail: {EMPTY_ANSWER}"


async def test_a_run_that_read_nothing_or_crashed_is_never_completed(pool: asyncpg.Pool) -> None:
    assert await finish_run(pool, await run(pool), T0) is RunStatus.FAILED
    crashed = await run(pool)
    await record_source(pool, crashed, "ledger", read_at=T0, rows=5, data_expected=True)
    assert await finish_run(pool, crashed, T0, "rail unreachable") is RunStatus.FAILED
    # Even written by hand, a completed run must have read every source cleanly.
    complete = "UPDATE reconciliation_runs SET status = 'completed', finished_at = $2 WHERE id = $1"
    with pytest.raises(asyncpg.CheckViolationError, match="cannot be completed"):
        await pool.execute(complete, await run(pool), T0)
    failing = await run(pool)
    await record_source(
        pool, failing, "rail", read_at=T0, rows=0, data_expected=False, error="timeout"
    )
    with pytest.raises(asyncpg.CheckViolationError, match="cannot be completed"):
        await pool.execute(complete, failing, T0)


async def insert_break(pool: asyncpg.Pool, break_type: str, status: str = "open") -> None:
    run_id = await pool.fetchval(
        """INSERT INTO reconciliation_runs (kind, window_start, window_end, started_at, status)
           VALUES ('intraday', now() - interval '1 hour', now(), now(), 'running') RETURNING id"""
    )
    await pool.execute(
        """INSERT INTO reconciliation_breaks (break_key, break_type, field, expected, actual,
               reason, status, first_seen, last_seen, first_run_id, last_run_id)
           VALUES ($1, $2, 'amount', '1', '2', 'amount:+1', $3, now(), now(), $4, $4)""",
        unique("key-"),
        break_type,
        status,
        run_id,
    )


async def test_break_types_and_statuses_are_a_closed_set(pool: asyncpg.Pool) -> None:
    for break_type in BreakType:
        await insert_break(pool, break_type.value)
    with pytest.raises(asyncpg.CheckViolationError):
        await insert_break(pool, "amount_mismatched")
    with pytest.raises(asyncpg.CheckViolationError):
        await insert_break(pool, "amount_mismatch", status="ignored")
    # Closing a break records when (and, when resolved, who and why).
    with pytest.raises(asyncpg.CheckViolationError):
        await insert_break(pool, "amount_mismatch", status="healed")


async def break_id(pool: asyncpg.Pool, item: Break) -> int:
    await upsert_breaks(pool, await run(pool), [item], T0)
    return int((await stored(pool, item))["id"])


async def audit(pool: asyncpg.Pool, item_id: int) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT actor, action, detail, before, after FROM operator_actions WHERE target = $1",
        f"break:{item_id}",
    )


async def test_an_operator_resolves_an_open_break_with_a_reason_audited(
    pool: asyncpg.Pool,
) -> None:
    # A currency the rail paid in is never changed by the rail: only an operator closes it.
    found = amount_break(900)._replace(
        break_type=BreakType.CURRENCY_MISMATCH, field="currency", expected="USD", actual="EUR"
    )
    item_id = await break_id(pool, found)
    async with pool.acquire() as conn:
        with pytest.raises(ReasonRequired):
            await close_break(conn, item_id, BreakStatus.RESOLVED, actor="ops", reason=" ", now=T0)
        assert await audit(pool, item_id) == []
        with pytest.raises(BreakNotHealable):
            await close_break(
                conn, item_id, BreakStatus.HEALED, actor="reconciler", reason=None, now=T0
            )
        closed = await close_break(
            conn, item_id, BreakStatus.RESOLVED, actor="ops", reason="fee agreed", now=T0
        )
        assert closed.status is BreakStatus.RESOLVED
        with pytest.raises(IllegalBreakTransition):
            await close_break(
                conn, item_id, BreakStatus.RESOLVED, actor="ops", reason="again", now=T0
            )
        with pytest.raises(BreakNotFound):
            await close_break(conn, 2**62, BreakStatus.RESOLVED, actor="ops", reason="x", now=T0)
    row = await stored(pool, found)
    assert (row["resolved_by"], row["resolution_reason"], row["resolved_at"]) == (
        "ops",
        "fee agreed",
        T0,
    )
    [action] = await audit(pool, item_id)
    assert (action["actor"], action["action"]) == ("ops", "break.resolve")
    assert json.loads(action["before"]) == {"status": "open"}
    assert json.loads(action["after"]) == {"status": "resolved", "resolution_reason": "fee agreed"}
    assert json.loads(action["detail"])["break_key"] == stored_key(found)


async def test_a_status_drift_is_healed_audited(pool: asyncpg.Pool) -> None:
    drift = Break(
        BreakType.STATUS_DRIFT,
        str(uuid.uuid4()),
        unique("tr_"),
        "status",
        "submitted",
        "paid",
        None,
        None,
    )
    item_id = await break_id(pool, drift)
    async with pool.acquire() as conn:
        healed = await close_break(
            conn, item_id, BreakStatus.HEALED, actor="reconciler", reason=None, now=T0
        )
    assert (healed.status, healed.id) == (BreakStatus.HEALED, item_id)
    [action] = await audit(pool, item_id)
    assert (action["actor"], action["action"]) == ("reconciler", "break.heal")
    assert json.loads(action["after"])["status"] == "healed"

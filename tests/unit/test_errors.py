"""One error vocabulary: which failures are retried and which give up, wherever they are sorted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg
import pytest

from services.adapters.postgres.store_errors import (
    is_retriable,
    retry_contended,
    unavailable_when_down,
)
from services.adapters.stripe.rail import RailLookupFailed, RailLookupIncomplete
from services.domain.errors import SchemaError, SettleError, StoreUnavailable
from services.domain.rail_event import InboxStatus
from services.domain.settlement import ReasonRequired
from services.inbox.errors import ClaimedEventChanged
from services.inbox.store import Recorded, StoredEvent, record_many
from services.platform.running import every
from services.relay.triggers import DISPATCH_CHUNK, dispatch_created
from services.settlement.transitions import TransitionConflict
from tools.run.supervisor import SupervisorError

RETRIED = [
    StoreUnavailable("down"),
    RailLookupFailed("s", "timeout"),
    ConnectionRefusedError(),
    TimeoutError(),
    asyncpg.CannotConnectNowError("the database system is starting up"),
    asyncpg.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.DeadlockDetectedError("deadlock detected"),
    asyncpg.SerializationError("could not serialize access"),
    asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout"),
    asyncpg.LockNotAvailableError("could not obtain lock"),
    asyncpg.InterfaceError("connection is closed"),
    asyncpg.exceptions.InternalClientError("unexpected connection loss"),
]
GIVEN_UP = [
    TransitionConflict("settlement changed under its row lock"),
    ClaimedEventChanged("inbox event 1 changed while claimed"),
    RailLookupIncomplete("s", "no match in 20 pages"),
    ReasonRequired("needs a reason"),
    SchemaError("bad payload"),
    SupervisorError("deaf: not healthy"),
    asyncpg.DataError("invalid byte sequence"),
    asyncpg.UniqueViolationError("duplicate key"),
    asyncpg.exceptions.UndefinedColumnError("column does not exist"),
    ValueError("a bug"),
]


@pytest.mark.parametrize("error", RETRIED, ids=lambda e: type(e).__name__)
def test_failures_that_may_pass_are_retriable(error: Exception) -> None:
    assert is_retriable(error)


@pytest.mark.parametrize("error", GIVEN_UP, ids=lambda e: type(e).__name__)
def test_failures_no_retry_can_mend_are_not(error: Exception) -> None:
    assert not is_retriable(error)


def test_the_supervisor_and_the_inbox_claim_raise_settle_errors() -> None:
    assert issubclass(SupervisorError, SettleError)
    assert issubclass(ClaimedEventChanged, SettleError)
    assert issubclass(StoreUnavailable, SettleError)


def test_the_database_down_becomes_store_unavailable_caused_by_the_driver_error() -> None:
    cause = asyncpg.CannotConnectNowError("the database system is starting up")
    with (
        pytest.raises(StoreUnavailable, match="CannotConnectNowError") as raised,
        unavailable_when_down("PostgreSQL did not answer"),
    ):
        raise cause
    assert raised.value.__cause__ is cause
    assert raised.value.retriable and raised.value.status == 503


def test_other_database_errors_pass_through_unchanged() -> None:
    with pytest.raises(asyncpg.DataError), unavailable_when_down("PostgreSQL did not answer"):
        raise asyncpg.DataError("invalid byte sequence")


async def test_a_contended_transaction_runs_again_up_to_its_attempts() -> None:
    runs = 0

    async def deadlocks_twice() -> str:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise asyncpg.DeadlockDetectedError("deadlock detected")
        return "booked"

    assert await retry_contended(deadlocks_twice) == "booked"
    runs = 0
    with pytest.raises(asyncpg.DeadlockDetectedError):
        await retry_contended(deadlocks_twice, attempts=2)
    assert runs == 2


class Dispatcher:
    """Pass 1 whose chunks fail with a given error."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.chunks: list[Sequence[str]] = []

    async def dispatch_many(self, settlement_ids: Sequence[str]) -> None:
        self.chunks.append(settlement_ids)
        if self.error is not None:
            raise self.error


async def test_the_relay_leaves_a_retriable_dispatch_failure_to_pass_2(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatcher = Dispatcher(asyncpg.PostgresConnectionError("connection lost"))
    ids = [f"s{n}" for n in range(DISPATCH_CHUNK + 1)]
    with caplog.at_level(logging.WARNING):
        await dispatch_created(dispatcher, ids)
    assert [len(c) for c in dispatcher.chunks] == [DISPATCH_CHUNK, 1]
    assert "pass 2 will retry" in caplog.text


async def test_the_relay_does_not_treat_a_transition_conflict_as_transient() -> None:
    conflict = TransitionConflict("settlement s1 changed under its row lock")
    with pytest.raises(TransitionConflict):
        await dispatch_created(Dispatcher(conflict), ["s1"])


async def test_a_periodic_job_outlives_retriable_failures_and_stops_on_any_other() -> None:
    failures: list[Exception] = [StoreUnavailable("down"), TransitionConflict("changed")]

    async def job() -> None:
        raise failures.pop(0)

    with pytest.raises(TransitionConflict):
        await asyncio.wait_for(every(0.01, job, "test job", is_retriable), 5)
    assert failures == []


class Connection:
    """Answers every statement with a fixed command tag."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    async def execute(self, *_: object) -> str:
        return self.tag


async def test_an_inbox_row_changed_while_claimed_is_an_inbox_error_not_an_assertion() -> None:
    now = datetime(2026, 11, 26, tzinfo=UTC)
    event = StoredEvent(1, "evt_1", "payout.paid", "po_1", None, 0, InboxStatus.RECEIVED, now)
    recorded = [Recorded(event, InboxStatus.APPLIED, None, None, None)]
    with pytest.raises(ClaimedEventChanged, match="changed while claimed"):
        await record_many(Connection("UPDATE 0"), recorded, now)  # type: ignore[arg-type]
    await record_many(Connection("UPDATE 1"), recorded, now)  # type: ignore[arg-type]

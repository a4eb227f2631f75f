"""The schema a service starts on: at or past the code's head, never older; and how the
migrations' runner tells a lock wait past its timeout, and spaces its retries."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.exc import OperationalError

from services.adapters.postgres.migrate import head_revision, known_revisions
from services.adapters.postgres.migration_run import is_lock_timeout, pauses
from services.adapters.postgres.schema_version import schema_problem

KNOWN = ("0001", "0002", "0025", "0026", "0027")


def test_the_head_itself_serves() -> None:
    assert schema_problem("0027", "0027", KNOWN) is None


def test_an_older_schema_is_refused_naming_both_revisions() -> None:
    assert schema_problem("0025", "0027", KNOWN) == (
        "schema at 0025, this settle needs 0027: run settle migrate"
    )


def test_a_newer_schema_serves_a_rolled_back_binary() -> None:
    # Expand/contract: the release before keeps working on the schema ahead of it.
    assert schema_problem("0028", "0027", KNOWN) is None
    assert schema_problem("0031", "0027", KNOWN) is None


def test_a_database_never_migrated_is_refused() -> None:
    assert schema_problem(None, "0027", KNOWN) == (
        "schema has no revision, this settle needs 0027: run settle migrate"
    )


@pytest.mark.parametrize("found", ["0000", "abc123", "0026x"])
def test_a_revision_not_settles_is_refused(found: str) -> None:
    problem = schema_problem(found, "0027", KNOWN)
    assert problem == f"schema at {found}, unknown to this settle (it needs 0027)"


def test_the_head_is_the_newest_known_revision() -> None:
    known = known_revisions()
    assert head_revision() == known[-1]
    assert list(known) == sorted(known)  # numbered in order, so "newer" is a comparison
    assert all(r.isdigit() and len(r) == 4 for r in known)


def test_a_lock_wait_past_the_timeout_is_told_through_sqlalchemys_wrapping() -> None:
    driver = asyncpg.LockNotAvailableError("canceling statement due to lock timeout")
    assert driver.sqlstate == "55P03"
    wrapped = OperationalError("ALTER TABLE t ADD COLUMN c int", {}, driver)
    assert is_lock_timeout(wrapped)
    try:
        raise RuntimeError("migration failed") from wrapped
    except RuntimeError as chained:
        assert is_lock_timeout(chained)
    assert not is_lock_timeout(asyncpg.QueryCanceledError("statement timeout"))
    assert not is_lock_timeout(ValueError("anything else"))


def test_retries_pause_longer_each_time_from_a_tenth_of_the_timeout() -> None:
    waits = list(pauses(5_000, attempts=5))
    assert len(waits) == 4
    for retry, wait in enumerate(waits):
        base = 0.5 * 2**retry
        assert base <= wait <= base * 1.25

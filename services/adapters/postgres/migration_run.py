"""How the migrations run on one connection: one migrator at a time, each migration in a
transaction of its own, bounded lock waits, and a migration whose lock wait timed out tried
again in a fresh transaction.

A session-level advisory lock (`MIGRATION_LOCK_ID`) makes concurrent migrators take turns
(replicas starting together, parallel test sessions): it is taken before the lock wait is
bounded, so a migrator waits for the one ahead of it (up to the statement timeout), and
released at the end.
Then `lock_timeout` bounds every wait for a table's lock: a migration stuck behind a long
transaction gives up after it instead of queueing every writer of the table behind its own
request, and is tried again after a pause (`pauses`). `statement_timeout` bounds one
statement's work (a backfill batch, an index build), never the whole run.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator

from sqlalchemy import text
from sqlalchemy.engine import Connection

log = logging.getLogger(__name__)

MIGRATION_LOCK_ID = 0x5E771E
LOCK_TIMEOUT_MS = 5_000  # a table's lock waited for, per statement, before a retry
STATEMENT_TIMEOUT_MS = 30 * 60_000  # one statement's work: DDL, a backfill's batch
ATTEMPTS = 5  # tries of a migration whose lock wait timed out, the first included
LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock wait past lock_timeout


def is_lock_timeout(error: BaseException) -> bool:
    """Whether `error` (SQLAlchemy's, the driver's, or one raised from either) is a lock wait
    past `lock_timeout`."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if getattr(found, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            return True
        orig = getattr(found, "orig", None)
        found = orig if isinstance(orig, BaseException) else found.__cause__
    return False


def pauses(lock_timeout_ms: int, attempts: int = ATTEMPTS) -> Iterator[float]:
    """Seconds to wait before each retry: a tenth of the lock timeout, doubling, with up to
    a quarter more at random so migrators retrying together spread out."""
    base = lock_timeout_ms / 10_000
    for retry in range(attempts - 1):
        pause = base * 2**retry
        yield pause + random.uniform(0, pause / 4)


def with_retries(
    attempt: Callable[[], None], lock_timeout_ms: int, rollback: Callable[[], None]
) -> None:
    """Run `attempt`; after a lock wait past the timeout, `rollback` and run it again after
    each of `pauses`, raising the last timeout once they are spent."""
    waits = pauses(lock_timeout_ms)
    while True:
        try:
            attempt()
            return
        except Exception as error:
            rollback()
            pause = next(waits, None)
            if not is_lock_timeout(error) or pause is None:
                raise
            log.warning("migration lock wait timed out: trying again in %.1f s", pause)
            time.sleep(pause)


def _set(connection: Connection, name: str, value: int) -> None:
    connection.execute(text("SELECT set_config(:n, :v, false)"), {"n": name, "v": str(value)})


def set_bounds(connection: Connection, lock_timeout_ms: int, statement_timeout_ms: int) -> None:
    """Take the migrators' lock (waiting for the migrator ahead, up to the statement timeout,
    whatever the role's defaults), then bound the session's lock waits; committed, so the
    bounds hold across the migrations' transactions."""
    _set(connection, "statement_timeout", statement_timeout_ms)
    _set(connection, "lock_timeout", 0)
    connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": MIGRATION_LOCK_ID})
    _set(connection, "lock_timeout", lock_timeout_ms)
    connection.commit()


def release(connection: Connection) -> None:
    """End whatever transaction is open and let the next migrator in."""
    connection.rollback()
    connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": MIGRATION_LOCK_ID})
    connection.commit()

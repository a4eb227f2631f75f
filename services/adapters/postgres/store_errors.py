"""PostgreSQL driver errors sorted once: the store is down, contended, or refused the data.

    UNREACHABLE     PostgreSQL is down, restarting, refusing connections or ended our session;
                    nothing was stored. Raised on as StoreUnavailable (`unavailable_when_down`).
    CONTENDED       another transaction got in the way (deadlock, serialization failure); the
                    same transaction may succeed if run again (`retry_contended`).
    REFUSED         the database refuses the data itself (bad value, constraint, a value past
                    a limit such as an index entry's size); running the same statement again
                    is refused again.

`is_retriable` is the one answer to "may doing the same thing again succeed?" for any error a
service loop sees: a SettleError says so with `retriable`; of the driver's errors, everything
but refused data and our own SQL mistakes may pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import asyncpg

from services.domain.errors import SettleError, StoreUnavailable

T = TypeVar("T")

UNREACHABLE: tuple[type[Exception], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    # A session PostgreSQL ended mid-statement (a stalled replica) surfaces as this.
    asyncpg.exceptions.InternalClientError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
)
CONTENDED: tuple[type[Exception], ...] = (
    asyncpg.DeadlockDetectedError,
    asyncpg.SerializationError,
)
REFUSED: tuple[type[Exception], ...] = (
    asyncpg.DataError,
    asyncpg.IntegrityConstraintViolationError,
    asyncpg.ProgramLimitExceededError,  # e.g. a value too large for its index's entry
)
# A statement of ours PostgreSQL cannot parse or we may not run: a bug, never passing.
_OUR_MISTAKE = (asyncpg.exceptions.SyntaxOrAccessError,)
CONTENDED_ATTEMPTS = 3


def is_retriable(error: BaseException) -> bool:
    """Whether doing the same thing again may succeed; see the module docstring."""
    if isinstance(error, SettleError):
        return error.retriable
    if isinstance(error, (*REFUSED, *_OUR_MISTAKE)):
        return False
    # Lock and statement timeouts, an idle transaction ended, a full disk: all may pass.
    return isinstance(error, (*UNREACHABLE, asyncpg.PostgresError))


@contextmanager
def unavailable_when_down(what: str) -> Iterator[None]:
    """Raise StoreUnavailable (from the driver's error) when PostgreSQL cannot be reached."""
    try:
        yield
    except UNREACHABLE as e:
        raise StoreUnavailable(f"{what}: {type(e).__name__}") from e


async def retry_contended(
    transaction: Callable[[], Awaitable[T]], attempts: int = CONTENDED_ATTEMPTS
) -> T:
    """Run `transaction`, again while another transaction got in its way, `attempts` in all."""
    for _ in range(attempts - 1):
        try:
            return await transaction()
        except CONTENDED:
            await asyncio.sleep(0)  # let the transaction that won finish first
    return await transaction()

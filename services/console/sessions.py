"""Console sign-in sessions in PostgreSQL (`console_sessions`, migration 0015).

The cookie holds a random session id; the table holds only its SHA-256, so reading the
table signs nobody in. A session also keeps the digest of the operator token it was opened
with (`edge.token_digest`, never the token; migration 0025), for the gate to end it once that
token is no longer one its operator holds. A session ends after `idle` without a request,
after `lifetime` in any case, or at logout (its row deleted). The form token that guards each
POST (CSRF) is derived from the session id, so it is never stored and differs for every
session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.console.errors import CSRF_INVALID, CSRF_MISSING, CsrfRefused
from services.platform.clock import Clock

IDLE = timedelta(hours=8)
LIFETIME = timedelta(hours=24)
SESSION_BYTES = 32

OPEN = """
INSERT INTO console_sessions (id_hash, operator, token_digest, created_at, last_seen_at)
VALUES ($1, $2, $3, $4, $4)
"""
# Expired sessions are cleared whenever someone signs in: the table holds live ones only.
CLEAR_EXPIRED = "DELETE FROM console_sessions WHERE last_seen_at < $1 OR created_at < $2"
TOUCH = """
UPDATE console_sessions SET last_seen_at = $2
 WHERE id_hash = $1 AND last_seen_at >= $3 AND created_at >= $4
RETURNING operator, token_digest
"""
CLOSE = "DELETE FROM console_sessions WHERE id_hash = $1"


def _hash(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()


def csrf_token(session_id: str) -> str:
    """The form token of a session: a one-way function of its id, so a page shows it without
    showing the id."""
    return hashlib.sha256(b"settle-console-csrf\0" + session_id.encode()).hexdigest()


def check_csrf(session_id: str, given: str | None) -> None:
    """Refuse (CsrfRefused, `csrf_missing` or `csrf_invalid`) a form token that is not the
    session's; compared in constant time."""
    check_same(csrf_token(session_id), given)


def check_same(expected: str, given: str | None) -> None:
    """Refuse (CsrfRefused) a form token that is missing or not `expected`, in constant time."""
    if not given:
        raise CsrfRefused(
            "this form came without its form token; reload the page", code=CSRF_MISSING
        )
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise CsrfRefused(
            "this form's token is not the one it was given; reload the page", code=CSRF_INVALID
        )


class Session(NamedTuple):
    """A live session: whose it is, and the digest of the token it was opened with."""

    operator: str
    token_digest: bytes | None  # None for a session opened before digests were kept


class SessionStore:
    """Opens, finds and closes sessions, telling time by `clock`."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        clock: Clock,
        *,
        idle: timedelta = IDLE,
        lifetime: timedelta = LIFETIME,
    ) -> None:
        self._pool, self._clock, self._idle, self._lifetime = pool, clock, idle, lifetime

    async def open(self, operator: str, token_digest: bytes) -> str:
        """A new session for `operator`, opened with the token of `token_digest`; its id, for
        the cookie only."""
        session_id = secrets.token_urlsafe(SESSION_BYTES)
        now = self._clock()
        with unavailable_when_down("PostgreSQL is unreachable; nobody was signed in"):
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(CLEAR_EXPIRED, now - self._idle, now - self._lifetime)
                await conn.execute(OPEN, _hash(session_id), operator, token_digest, now)
        return session_id

    async def session_of(self, session_id: str) -> Session | None:
        """A live session, which counts as used now; None when it has ended."""
        now = self._clock()
        with unavailable_when_down("PostgreSQL is unreachable; the session could not be read"):
            found = await self._pool.fetchrow(
                TOUCH, _hash(session_id), now, now - self._idle, now - self._lifetime
            )
        return None if found is None else Session(found["operator"], found["token_digest"])

    async def close(self, session_id: str) -> None:
        """End the session (logout): its row is deleted."""
        with unavailable_when_down("PostgreSQL is unreachable; the session is still open"):
            await self._pool.execute(CLOSE, _hash(session_id))

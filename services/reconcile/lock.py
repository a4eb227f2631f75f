"""One reconciler at a time: a PostgreSQL session-level advisory lock, held on a connection of
its own for as long as this replica is the reconciler.

A second replica polls for the lock and waits (healthy, serving /healthz and /metrics). A
session-level lock lives as long as its session: if PostgreSQL ends it (a restart, a network
cut), the lock is gone and another replica may take it, so the holder checks its session
before every round and waits for the lock again when it was lost. Two replicas overlapping
for a moment around such a loss would still store each break once (breaks are keyed).

A holder cut off the network (its host gone, a partition) sends no FIN: PostgreSQL would keep
its idle session, and the lock, until the kernel's defaults gave up (two hours of keepalive
silence). The lock's session therefore sets the server's TCP settings for its own socket
(SESSION_SETTINGS): keepalive probes after KEEPALIVE_IDLE_S of silence, and the connection
dropped once they go unanswered for TCP_USER_TIMEOUT_MS, so the server ends the session and
frees the lock within LOCK_FREED_WITHIN_S of the cut. The holder itself learns of the loss
at its next check, which gives up after HEARTBEAT_TIMEOUT_S. The lock session connects
directly: a transaction pooler cannot hold a session lock (SETTLE_DATABASE_POOLED is refused).
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from services.adapters.postgres.store_errors import UNREACHABLE

log = logging.getLogger(__name__)

# The lock's key, one 64-bit number all replicas agree on: "settle reconciler" in ASCII.
RECONCILER_LOCK = int.from_bytes(b"settlrec", "big") & 0x7FFF_FFFF_FFFF_FFFF
POLL_SECONDS = 2.0
KEEPALIVE_IDLE_S = 5
KEEPALIVE_INTERVAL_S = 2
KEEPALIVE_COUNT = 3
TCP_USER_TIMEOUT_MS = 10_000
# Idle time, then probes until the user timeout (counted from the last word heard) runs out.
LOCK_FREED_WITHIN_S = KEEPALIVE_IDLE_S + TCP_USER_TIMEOUT_MS / 1000 + KEEPALIVE_INTERVAL_S
HEARTBEAT_TIMEOUT_S = 5.0
# The server's side of the lock session's socket (ignored on a Unix socket).
SESSION_SETTINGS = {
    "tcp_keepalives_idle": str(KEEPALIVE_IDLE_S),
    "tcp_keepalives_interval": str(KEEPALIVE_INTERVAL_S),
    "tcp_keepalives_count": str(KEEPALIVE_COUNT),
    "tcp_user_timeout": str(TCP_USER_TIMEOUT_MS),
    "application_name": "settle-reconciler-lock",
}


class ReconcilerLock:
    """The advisory lock that makes this replica the reconciler; `hold` before each round."""

    def __init__(self, dsn: str, *, key: int = RECONCILER_LOCK, poll: float = POLL_SECONDS):
        self._dsn, self._key, self._poll = dsn, key, poll
        self._conn: asyncpg.Connection | None = None

    @property
    def held(self) -> bool:
        """True while this replica holds the lock (as of the last check)."""
        return self._conn is not None

    async def hold(self) -> None:
        """Return once this replica holds the lock: at once if its session is alive, else
        after waiting for whoever holds it, and for PostgreSQL while it is away."""
        if self._conn is not None:
            try:
                await self._conn.fetchval("SELECT 1", timeout=HEARTBEAT_TIMEOUT_S)
                return
            except (*UNREACHABLE, asyncpg.PostgresError) as e:
                log.warning("reconciler lock lost with its session: %s", e)
                await self.release()
        while True:
            if await self._try():
                return
            await asyncio.sleep(self._poll)

    async def release(self) -> None:
        """Give the lock up (closing its session releases it)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def _try(self) -> bool:
        conn: asyncpg.Connection | None = None
        try:
            conn = await asyncpg.connect(self._dsn, timeout=10, server_settings=SESSION_SETTINGS)
            got = bool(await conn.fetchval("SELECT pg_try_advisory_lock($1)", self._key))
        except (*UNREACHABLE, asyncpg.PostgresError) as e:
            log.warning("reconciler lock: PostgreSQL unreachable, waiting: %s", e)
            got = False
        if got:
            self._conn = conn
        elif conn is not None:
            conn.terminate()
        return got

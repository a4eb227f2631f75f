"""How many ledger replicas are live, learnt from `service_replicas` on a heartbeat.

Each replica stamps its own row every `heartbeat` seconds, and in the same statement counts
the rows of its service stamped within the last `LIVE_HEARTBEATS` heartbeats, its own
included: that many replicas share every tenant's rate (`Admission.share_among`). Stamps are
the database's clock, so the replicas' clocks need not agree. A write per heartbeat, none per
request.

A heartbeat that fails (PostgreSQL out of reach) changes nothing: the replica keeps its last
share. A replica that stops cleanly deletes its row (`leave`); one that crashed drops out of
the count after `LIVE_HEARTBEATS` heartbeats, and its row is deleted by another's heartbeat
once older than `FORGOTTEN_AFTER`.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Callable
from datetime import timedelta

import asyncpg

log = logging.getLogger(__name__)

SERVICE = "ledger"
HEARTBEAT_SECONDS = 5.0
LIVE_HEARTBEATS = 3  # a replica not seen for this many heartbeats is no longer counted
FORGOTTEN_AFTER = timedelta(hours=1)  # a crashed replica's row is deleted past this age

# The other rows are read as they were before this statement (one snapshot): the count is
# of the others, plus this replica. Its own row is never among those deleted here.
HEARTBEAT = """
WITH forgotten AS (
    DELETE FROM service_replicas
     WHERE service = $1 AND replica_id <> $2 AND seen_at < now() - $4::interval
), stamped AS (
    INSERT INTO service_replicas (service, replica_id, seen_at) VALUES ($1, $2, now())
    ON CONFLICT (service, replica_id) DO UPDATE SET seen_at = excluded.seen_at
)
SELECT 1 + count(*) FROM service_replicas
 WHERE service = $1 AND replica_id <> $2 AND seen_at >= now() - $3::interval
"""
LEAVE = "DELETE FROM service_replicas WHERE service = $1 AND replica_id = $2"


def replica_name() -> str:
    """A name no other replica has: the host, the process and a random part (a restarted
    process on the same host is another replica)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class ReplicaRegistry:
    """This replica's row of `service_replicas`; see the module docstring. `on_count` is told
    the number of live replicas after each heartbeat."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        on_count: Callable[[int], None],
        *,
        replica_id: str | None = None,
        service: str = SERVICE,
        heartbeat: float = HEARTBEAT_SECONDS,
    ) -> None:
        if heartbeat <= 0:
            raise ValueError("heartbeat: pass a number of seconds > 0")
        self._pool, self._on_count = pool, on_count
        self.replica_id = replica_id or replica_name()
        self.service = service
        self.heartbeat = heartbeat
        self.live = 1  # until the first heartbeat says otherwise, this replica alone

    @property
    def live_within(self) -> timedelta:
        """How recently a replica must have stamped its row to be counted."""
        return timedelta(seconds=self.heartbeat * LIVE_HEARTBEATS)

    async def beat(self) -> int:
        """Stamp this replica's row and count the live replicas (itself included); tell
        `on_count` the number and return it."""
        live: int = await self._pool.fetchval(
            HEARTBEAT, self.service, self.replica_id, self.live_within, FORGOTTEN_AFTER
        )
        if live != self.live:
            log.info("%d %s replicas live: each takes 1/%d of every rate", live, self.service, live)
        self.live = live
        self._on_count(live)
        return live

    async def leave(self) -> None:
        """Delete this replica's row: the others count it out at their next heartbeat."""
        await self._pool.execute(LEAVE, self.service, self.replica_id)

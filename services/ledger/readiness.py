"""Whether the ledger's stores answer: the probe behind /readyz."""

from __future__ import annotations

import asyncio
from typing import Protocol

import asyncpg

from services.adapters.postgres.store_errors import UNREACHABLE


class ReadinessProbe(Protocol):
    """Whether the service's dependencies answer; /readyz reports it."""

    async def check(self) -> dict[str, bool]:
        """Component name to whether it answered in time."""
        ...


class Readiness:
    """PostgreSQL answers `SELECT 1` and a Kafka bootstrap server accepts a TCP connection."""

    def __init__(self, pool: asyncpg.Pool, kafka_bootstrap: str, *, timeout: float = 1.0) -> None:
        self._pool = pool
        self._servers = [_host_port(s) for s in kafka_bootstrap.split(",") if s.strip()]
        if not self._servers:
            raise ValueError("kafka_bootstrap: give host:port[,host:port...]")
        self._timeout = timeout

    async def check(self) -> dict[str, bool]:
        """{"postgres": ..., "kafka": ...}, each True when it answered within the timeout."""
        postgres, kafka = await asyncio.gather(self._postgres(), self._kafka())
        return {"postgres": postgres, "kafka": kafka}

    async def _postgres(self) -> bool:
        try:
            async with asyncio.timeout(self._timeout):
                return bool(await self._pool.fetchval("SELECT 1") == 1)
        except (*UNREACHABLE, asyncpg.PostgresError):
            return False

    async def _kafka(self) -> bool:
        # A TCP accept is enough to tell a dead broker from a live one, and costs no metadata
        # round trip; the producer and consumer find the rest out for themselves.
        for host, port in self._servers:
            try:
                async with asyncio.timeout(self._timeout / len(self._servers)):
                    _, writer = await asyncio.open_connection(host, port)
            except (OSError, TimeoutError):
                continue
            writer.close()
            return True
        return False


def _host_port(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]"), int(port)

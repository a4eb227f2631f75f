"""The reconciler's lock when its holder is cut off the network: PostgreSQL drops the silent
session within LOCK_FREED_WITHIN_S (the keepalive and user-timeout settings the lock session
gives its server side), and another replica takes the lock; the holder learns at its next
check that it lost it.

The cut is real: an iptables rule drops every packet the holder's socket sends to the server
(so the server's keepalive probes go unanswered), and only those; the rule is deleted on the
way out. iptables is Debian's, installed with apt-get when missing and root (as the servers
and promtool are), and needs CAP_NET_ADMIN: root on the CI machine. Without them the test
fails saying so. It changes the machine's packet filter, so it runs alone."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from services.reconcile.lock import (
    HEARTBEAT_TIMEOUT_S,
    LOCK_FREED_WITHIN_S,
    POLL_SECONDS,
    SESSION_SETTINGS,
    ReconcilerLock,
)
from tests.conftest import asyncpg_dsn
from tests.harness import Servers
from tools.infra.procs import tool

pytestmark = pytest.mark.integration

WHY = "the reconciler lock's network cut is an iptables rule"

HOLDER = """
SELECT a.client_port FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
   AND l.classid::bigint = $1 AND l.objid::bigint = $2
"""


@contextmanager
def cut(client_port: int, server_port: int) -> Iterator[None]:
    """Every packet from `client_port` to `server_port` on loopback dropped until the end."""
    iptables = tool("iptables", "iptables", WHY)
    rule = ["OUTPUT", "-o", "lo", "-p", "tcp", "--sport", str(client_port)]
    rule += ["--dport", str(server_port), "-m", "comment", "--comment", "settle-test-cut"]
    rule += ["-j", "DROP"]
    added = subprocess.run([iptables, "-A", *rule], capture_output=True, text=True, check=False)
    if added.returncode != 0:
        pytest.fail(f"iptables could not add the cut (needs root, CAP_NET_ADMIN): {added.stderr}")
    try:
        yield
    finally:
        subprocess.run([iptables, "-D", *rule], capture_output=True, check=False)


def lock_key(name: str) -> int:
    return int.from_bytes(name.encode()[:8].ljust(8, b"_"), "big") & 0x7FFF_FFFF_FFFF_FFFF


async def holder_port(dsn: str, key: int) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        port = await conn.fetchval(HOLDER, key >> 32, key & 0xFFFF_FFFF)
    finally:
        await conn.close()
    assert port is not None, "nobody holds the lock over TCP"
    return int(port)


async def test_the_lock_session_sets_the_servers_tcp_timeouts(infra: Servers) -> None:
    # What the lock session asks for is what PostgreSQL applies to its socket (TCP only).
    dsn = asyncpg_dsn(infra.database_url)
    conn = await asyncpg.connect(dsn, server_settings=SESSION_SETTINGS)
    try:
        for name in ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_user_timeout"):
            shown = await conn.fetchval(f"SELECT setting FROM pg_settings WHERE name = '{name}'")
            assert shown == SESSION_SETTINGS[name], name
    finally:
        await conn.close()


@pytest.mark.alone
async def test_a_holder_cut_off_loses_the_lock_to_another_replica_within_the_bound(
    infra: Servers,
) -> None:
    dsn = asyncpg_dsn(infra.database_url)
    key = lock_key(f"cut{time.time_ns() % 10**5}")
    holder, standby = ReconcilerLock(dsn, key=key), ReconcilerLock(dsn, key=key, poll=0.2)
    await holder.hold()
    try:
        with cut(await holder_port(dsn, key), make_url(infra.database_url).port or 5432):
            started = time.monotonic()
            await asyncio.wait_for(standby.hold(), LOCK_FREED_WITHIN_S + POLL_SECONDS)
            freed_after = time.monotonic() - started
            assert standby.held
            # The holder's next check gives up on its silent session and waits again.
            check = asyncio.create_task(holder.hold())
            await asyncio.sleep(HEARTBEAT_TIMEOUT_S + 1)
            assert not holder.held and not check.done()
            check.cancel()
        assert freed_after <= LOCK_FREED_WITHIN_S, freed_after
    finally:
        await holder.release()
        await standby.release()

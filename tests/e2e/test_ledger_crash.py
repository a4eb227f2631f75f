"""SIGKILL the ledger while it consumes a stream of commands, restart it, and find exactly one
settlement per distinct command and books that balance."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import admin_client, idempotent_producer, log_reader
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.topics import COMMANDS
from services.ledger.commands import CONSUMER_GROUP
from tests.conftest import asyncpg_dsn, unique
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e
SETTLE = str(Path(sys.executable).with_name("settle"))
DISTINCT = 3_000


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    yield conn
    await conn.close()


def start_ledger(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    port = free_ports(2)
    with log.open("ab") as out:
        return subprocess.Popen(
            [SETTLE, "ledger", "--port", str(port), "--admin-port", str(port + 1)],
            env=env,
            stdout=out,
            stderr=out,
        )


async def booked(db: asyncpg.Connection, tenant: str) -> int:
    return int(await db.fetchval("SELECT count(*) FROM settlements WHERE tenant = $1", tenant))


async def booked_at_least(db: asyncpg.Connection, tenant: str, count: int, within: float) -> int:
    """Wait until `count` settlements of `tenant` are booked; how many are."""

    async def enough() -> int:
        booked_now = await booked(db, tenant)
        return booked_now if booked_now >= count else 0

    return await eventually(enough, within, f"{count} settlements booked", 0.05)


async def committed_behind_end(
    admin: AIOKafkaAdminClient, reader: AIOKafkaConsumer, group: str, topic: str
) -> int:
    """How many messages of `topic` the consumer group `group` has not committed yet."""
    described = await admin.describe_topics([topic])
    partitions = [TopicPartition(topic, p["partition"]) for p in described[0]["partitions"]]
    committed = await admin.list_consumer_group_offsets(group, partitions=partitions)
    done = {tp: meta.offset for tp, meta in committed.items() if meta.offset >= 0}
    end = await reader.end_offsets(partitions)
    return sum(end[tp] - done.get(tp, 0) for tp in partitions)


async def wait_committed_to_end(bootstrap: str, group: str, topic: str, seconds: float) -> None:
    """Return once `group` has committed every partition of `topic` up to its end offset."""
    admin = admin_client(KafkaAccess(bootstrap), "test-admin")
    reader = log_reader(KafkaAccess(bootstrap), "test-reader")
    await admin.start()
    await reader.start()
    try:

        async def caught_up() -> bool:
            return await committed_behind_end(admin, reader, group, topic) == 0

        await eventually(caught_up, seconds, f"{group} committed to the end of {topic}", 0.2)
    finally:
        await reader.stop()
        await admin.close()


async def test_sigkill_mid_stream_books_each_command_once(
    db: asyncpg.Connection, database_url: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix, tenant = unique("t") + ".", unique("crash")
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    commands = [
        avro.encode(
            "SettlementCommand",
            {
                "tenant": tenant,
                "idempotency_key": f"key-{n}",
                "reference": f"ref-{n}",
                "payee": "payee",
                "destination": "acct_1",
                "amount": 1 + n,
                "currency": "USD",
                "rail": None,
                "metadata": {},
            },
        )
        for n in range(DISTINCT)
    ]
    producer = idempotent_producer(KafkaAccess(kafka_bootstrap), "crash-upstream", linger_ms=20)
    await producer.start()
    try:
        # Every command, then the first third again, as an upstream retrying after a timeout.
        sends = [
            await producer.send(f"{prefix}{COMMANDS}", value, key=str(n).encode())
            for n, value in enumerate(commands + commands[: DISTINCT // 3])
        ]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()

    # The ledger books commands only for tenants it knows.
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": database_url,
        "SETTLE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "SETTLE_TOPIC_PREFIX": prefix,
        "SETTLE_API_TOKENS": f"{tenant}:crash-token",
    }
    log = tmp_path / "ledger.log"
    killed_at: list[tuple[int | None, int]] = []  # (exit status, settlements booked by then)
    for threshold in (DISTINCT // 5, DISTINCT // 2):
        ledger = start_ledger(env, log)
        try:
            await booked_at_least(db, tenant, threshold, 90)
            assert ledger.poll() is None, "the ledger exited before it was killed"
        finally:
            ledger.send_signal(signal.SIGKILL)
            ledger.wait()
        killed_at.append((ledger.returncode, await booked(db, tenant)))
    ledger = start_ledger(env, log)
    try:
        assert await booked_at_least(db, tenant, DISTINCT, 120) == DISTINCT
        # Every command, the redelivered duplicates included, is consumed and committed.
        await wait_committed_to_end(
            kafka_bootstrap, f"{prefix}{CONSUMER_GROUP}", f"{prefix}{COMMANDS}", 60
        )
    finally:
        ledger.terminate()
        ledger.wait(timeout=30)

    # Both kills landed on a running ledger, mid-stream: it died of SIGKILL with work left.
    assert [status for status, _ in killed_at] == [-signal.SIGKILL, -signal.SIGKILL]
    assert all(count < DISTINCT for _, count in killed_at), killed_at
    assert await booked(db, tenant) == DISTINCT
    distinct_refs = await db.fetchval(
        "SELECT count(DISTINCT reference) FROM settlements WHERE tenant = $1", tenant
    )
    assert distinct_refs == DISTINCT
    outbox = await db.fetchval(
        "SELECT count(*) FROM outbox o JOIN settlements s ON s.id = o.settlement_id "
        "WHERE s.tenant = $1",
        tenant,
    )
    assert outbox == DISTINCT
    accounts = await db.fetch(
        """SELECT a.id,
                  (SELECT sum(balance) FROM account_balances b WHERE b.account_id = a.id) AS held,
                  (SELECT coalesce(sum(amount), 0) FROM postings p WHERE p.account_id = a.id)
                  AS posted
             FROM accounts a WHERE a.tenant = $1""",
        tenant,
    )
    assert accounts and all(a["held"] == a["posted"] for a in accounts)
    total = sum(1 + n for n in range(DISTINCT))
    assert {a["id"]: a["held"] for a in accounts if a["held"]} == {
        f"{tenant}:funding:USD": -total,
        f"{tenant}:payable:USD": total,
    }

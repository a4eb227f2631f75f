"""The real local stack: `up` twice, status, topics; left running for the rest of the session."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import admin_client
from services.adapters.kafka.topics import ensure_topics
from services.contracts.topics import TOPICS
from tools.infra import stack
from tools.infra.model import Outcome, State

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        bool(os.environ.get("SETTLE_DATABASE_URL")),
        reason="SETTLE_DATABASE_URL points at an external server; the local stack is not ours",
    ),
]


@pytest.mark.timeout(900)  # a cold machine resolves the broker jars from Maven Central first
def test_up_is_idempotent_and_the_second_call_is_a_fast_no_op() -> None:
    first = stack.up()
    assert first.postgres.outcome in (Outcome.STARTED, Outcome.ALREADY_RUNNING)
    began = time.monotonic()
    second = stack.up()
    elapsed = time.monotonic() - began
    assert second.started == ()
    assert second.postgres.outcome is Outcome.ALREADY_RUNNING
    assert second.kafka.outcome in (Outcome.ALREADY_RUNNING, Outcome.EXTERNAL)
    assert second.topics_created == ()
    assert elapsed < 10, f"second up took {elapsed:.1f} s"
    assert second.postgres.pid == first.postgres.pid
    assert second.kafka.pid == first.kafka.pid


def test_status_says_running() -> None:
    by_name = {c.name: c for c in stack.status()}
    assert by_name["postgres"].state is State.UP
    assert by_name["postgres"].pid
    assert by_name["kafka"].state in (State.UP, State.EXTERNAL)


@pytest.mark.timeout(300)
async def test_topics_exist_with_their_partition_counts() -> None:
    # From inside a running loop, up() must still work (it runs aiokafka on its own thread).
    await asyncio.to_thread(stack.up)
    prefix = os.environ.get("SETTLE_TOPIC_PREFIX", "")
    bootstrap = stack.kafka_bootstrap()
    assert await ensure_topics(KafkaAccess(bootstrap), prefix) == []
    admin = admin_client(KafkaAccess(bootstrap), "test-admin")
    await admin.start()
    try:
        described = await admin.describe_topics([f"{prefix}{t.name}" for t in TOPICS])
    finally:
        await admin.close()
    partitions = {d["topic"]: len(d["partitions"]) for d in described if d["error_code"] == 0}
    assert partitions == {f"{prefix}{t.name}": t.partitions for t in TOPICS}

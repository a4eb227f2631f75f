"""Creating the topics settle uses (services/contracts/topics.py) where they are missing, and
waiting until each partition has a leader."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiokafka.admin import NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError, for_code

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import admin_client
from services.contracts.topics import TOPICS
from services.domain.errors import InfrastructureError

READY_TIMEOUT_S = 30.0


def _partitions_led(described: list[dict[str, Any]]) -> dict[str, int]:
    # Metadata lists a new topic before its partitions have leaders; producers need leaders.
    counts: dict[str, int] = {}
    for topic in described:
        if topic.get("error_code", 0) == 0:
            led = [p for p in topic.get("partitions", []) if p.get("leader", -1) >= 0]
            counts[str(topic["topic"])] = len(led)
    return counts


async def _wait_led(admin: Any, wanted: dict[str, int], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        counts = _partitions_led(await admin.describe_topics(list(wanted)))
        if all(counts.get(name, 0) >= n for name, n in wanted.items()):
            return
        if time.monotonic() > deadline:
            raise InfrastructureError(f"topics have no leaders after {timeout_s:.0f} s: {counts}")
        await asyncio.sleep(0.2)


async def ensure_topics(
    access: KafkaAccess, prefix: str = "", replication_factor: int = 1
) -> list[str]:
    """Create whichever of TOPICS (named prefix+name) are missing; the names this call created."""
    admin = admin_client(access, "settle-topics")
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        missing = [t for t in TOPICS if f"{prefix}{t.name}" not in existing]
        if not missing:
            return []
        new = [
            NewTopic(f"{prefix}{t.name}", t.partitions, replication_factor, topic_configs=t.configs)
            for t in missing
        ]
        response = await admin.create_topics(new, timeout_ms=30_000)
        created: list[str] = []
        for entry in response.topic_errors:
            name, code = str(entry[0]), int(entry[1])
            if code == 0:
                created.append(name)
            elif code != TopicAlreadyExistsError.errno:
                reason = entry[2] if len(entry) > 2 and entry[2] else for_code(code).__name__
                raise InfrastructureError(f"could not create topic {name}: {reason}")
        await _wait_led(
            admin, {f"{prefix}{t.name}": t.partitions for t in missing}, READY_TIMEOUT_S
        )
        return sorted(created)
    finally:
        with contextlib.suppress(KafkaError, OSError):
            await admin.close()

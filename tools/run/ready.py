"""Whether the relays have their share of the events topic before a batch is offered.

A relay answers its health check before its Kafka consumer has joined the group; the second
replica's join then rebalances the group under a batch already flowing, and a commit that
races the rebalance restarts the consumer and rebalances once more: seconds in which pass 1
waits. `settle run` offers its demo batch once the group is stable with every relay in it.
"""

from __future__ import annotations

import asyncio
import time

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import admin_client

STABLE = "Stable"
POLL_SECONDS = 0.25


async def group_members(admin: AIOKafkaAdminClient, group: str) -> int:
    """Members of consumer group `group` if it is stable, else 0."""
    responses = await admin.describe_consumer_groups([group])
    for response in responses:
        for described in response.groups:
            # (error_code, group_id, state, protocol_type, protocol, members, ...)
            if described[1] == group and described[2] == STABLE:
                return len(described[5])
    return 0


async def wait_for_group(kafka: KafkaAccess, group: str, members: int, timeout_s: float) -> bool:
    """Wait until consumer group `group` is stable with at least `members` members; whether it
    got there within `timeout_s` (a broker error counts as not yet)."""
    admin = admin_client(kafka, "settle-demo-ready")
    deadline = time.monotonic() + timeout_s
    try:
        await admin.start()
        while time.monotonic() < deadline:
            try:
                if await group_members(admin, group) >= members:
                    return True
            except KafkaError:
                pass  # the coordinator is still being elected: asked again below
            await asyncio.sleep(POLL_SECONDS)
        return False
    finally:
        await admin.close()

"""`settle check` finding webhooks lost or set aside without a reason in PostgreSQL, and events
of settlements it does not know or that it cannot decode on the events topic: each planted for
real, named by its ids, and making `settle check` exit 1."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer
from services.contracts import avro
from tests.conftest import unique
from tests.events import settlement_event
from tests.integration.check_support import TENANT, World, broken_only, finding, template, world

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]

STORE_WEBHOOK = """
INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, payload, status, reason,
                          received_at, received_month)
SELECT 'stripe', $1, 'transfer.paid', 'tr_lost', '\\x7b7d', $2, $3, at,
       date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
  FROM (SELECT now() - make_interval(secs => $4) AS at) AS arrival
"""


async def store_webhook(world: World, status: str, reason: str | None, age_s: float) -> str:
    """A stored webhook in `status`, received `age_s` seconds ago; its rail event id."""
    rail_event_id = unique("evt_")
    await world.pool.execute(STORE_WEBHOOK, rail_event_id, status, reason, age_s)
    return rail_event_id


async def plant_unapplied(world: World) -> list[str]:
    """Webhooks received ten minutes ago and never applied; beside them, ones that are not
    lost: just received, or waiting for a retry with the reason it failed."""
    await store_webhook(world, "received", None, 1)
    await store_webhook(world, "received", "ledger unavailable; retrying", 600)
    return sorted([await store_webhook(world, "received", reason, 600) for reason in (None, " ")])


async def plant_set_aside_without_reason(world: World) -> list[str]:
    """A parked and a dead webhook whose reason is blank, beside one parked with a reason."""
    await store_webhook(world, "parked", "settlement not known yet", 0)
    return sorted(
        [await store_webhook(world, "parked", "  ", 0), await store_webhook(world, "dead", "", 0)]
    )


async def store_mismatch(world: World, reason: str) -> str:
    """A webhook kept as `mismatch` with both sides and `reason`; its rail event id."""
    rail_event_id = await store_webhook(world, "parked", "settlement not known yet", 0)
    await world.pool.execute(
        "UPDATE inbox_events SET status = 'mismatch', reason = $2, mismatch = $3::jsonb "
        "WHERE rail_event_id = $1",
        rail_event_id,
        reason,
        '[{"field": "amount", "expected": 700, "received": 1}]',
    )
    return rail_event_id


async def send_to_events(world: World, *values: bytes | None) -> list[str]:
    """Each value sent to the world's events topic; "partition:offset" of each, in order."""
    producer = idempotent_producer(KafkaAccess(world.bootstrap), unique("check-stray-"))
    await producer.start()
    try:
        sent = [await producer.send_and_wait(world.topic, v, key=b"stray") for v in values]
    finally:
        await producer.stop()
    return [f"{m.partition}:{m.offset}" for m in sent]


async def plant_unknown_settlement(world: World) -> str:
    """A well-formed event of a settlement the database has never held; its id."""
    stray = str(uuid.uuid4())
    event = settlement_event(
        "paid", settlement_id=stray, tenant=TENANT, amount=700, occurred_at=datetime.now(UTC)
    )
    await send_to_events(world, avro.encode("SettlementEvent", event))
    return stray


async def plant_undecodable(world: World) -> list[str]:
    """A message that is not Avro, a tombstone (no value) and an event of no settlement (its
    settlement_id not a UUID); where they are."""
    event = settlement_event(
        settlement_id="settlement-42", tenant=TENANT, amount=700, occurred_at=datetime.now(UTC)
    )
    poison = avro.encode("SettlementEvent", event)
    return await send_to_events(world, b"not an Avro message", None, poison)


async def test_a_webhook_left_unapplied_beyond_the_bound_is_caught(world: World) -> None:
    lost = await plant_unapplied(world)
    result = broken_only(await world.check(), "nothing_lost")
    assert finding(result, "webhooks_unapplied_beyond_bound") == (2, tuple(lost))
    assert result.offenders == tuple(lost)
    # Within the bound they are still in flight, not lost.
    assert (await world.check(inbox_bound_s=3600)).ok


async def test_a_webhook_set_aside_without_a_reason_is_caught(world: World) -> None:
    silent = await plant_set_aside_without_reason(world)
    result = broken_only(await world.check(), "nothing_lost")
    assert finding(result, "webhooks_set_aside_without_reason") == (2, tuple(silent))
    assert result.offenders == tuple(silent)


async def test_a_mismatch_with_its_reason_is_accounted_for_and_a_blank_one_is_caught(
    world: World,
) -> None:
    """A mismatch is never applied and never comes due: with its reason and both sides it is
    set aside, not lost, for reconciliation and an operator."""
    await store_mismatch(world, "does not match what was sent: amount 1 (sent 700)")
    assert (await world.check(inbox_bound_s=0)).ok
    silent = await store_mismatch(world, " ")
    result = broken_only(await world.check(), "nothing_lost")
    assert finding(result, "webhooks_set_aside_without_reason") == (1, (silent,))


async def test_an_event_of_a_settlement_the_books_do_not_hold_is_caught(world: World) -> None:
    stray = await plant_unknown_settlement(world)
    result = broken_only(await world.check(), "events_complete")
    assert finding(result, "events_of_unknown_settlements") == (1, (stray,))
    assert result.offenders == (stray,)


async def test_a_message_that_is_no_settlement_event_is_caught(world: World) -> None:
    where = await plant_undecodable(world)
    result = broken_only(await world.check(), "events_complete")
    assert finding(result, "undecodable_messages") == (3, tuple(sorted(where)))
    assert result.offenders == tuple(sorted(where))


async def test_settle_check_exits_1_naming_every_planted_finding(world: World) -> None:
    planted = {
        ("nothing_lost", "webhooks_unapplied_beyond_bound"): await plant_unapplied(world),
        ("nothing_lost", "webhooks_set_aside_without_reason"): await plant_set_aside_without_reason(
            world
        ),
        ("events_complete", "events_of_unknown_settlements"): [
            await plant_unknown_settlement(world)
        ],
        ("events_complete", "undecodable_messages"): sorted(await plant_undecodable(world)),
    }

    status, body = await world.settle_check()

    assert status == 1 and body["ok"] is False
    broken = {
        name
        for name, verdict in body.items()
        if isinstance(verdict, dict) and verdict.get("ok") is False
    }
    assert broken == {"nothing_lost", "events_complete"}
    for (name, what), ids in planted.items():
        assert body[name]["detail"][what] == {"count": len(ids), "first": ids}, what
    assert body["nothing_lost"]["count"] == 4 and body["events_complete"]["count"] == 4

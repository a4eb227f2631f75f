"""Pass 2's take-over of a lease that ran out, on the real PostgreSQL: where the new holder
will look at the rail before sending, a row whose holder may have been mid-call is held back
until the rail is done with anything that holder could still have written; a retry that was
scheduled, or a rail that honours keys, is taken over at once."""

from __future__ import annotations

import asyncpg
import pytest

from services.relay.dispatch import Dispatcher
from services.relay.metrics import create_metrics
from services.relay.policy import DispatchPolicy
from tests.conftest import unique
from tests.integration.test_relay_dispatch import ScriptedRail, accept, pool, state

pytestmark = [pytest.mark.integration, pytest.mark.money]
__all__ = ["pool"]  # a database of its own: the sweep takes over any instruction it can see
PAUSE = 20.0
POLICY = DispatchPolicy(
    backoff_base=0.0, stale_pending_seconds=3_600.0, ambiguous_pause_seconds=PAUSE
)
# The holder claimed, its lease ran out `$2` seconds ago; `$3` says whether it had scheduled
# a retry (it recorded its call's end) and `$4` how long ago it first sent.
HELD_BY_A_LOST_WORKER = """
UPDATE rail_instructions
   SET status = 'processing', fence = fence + 1, attempts = 1,
       lease_until = now() - make_interval(secs => $2),
       next_attempt_at = CASE WHEN $3 THEN now() - make_interval(secs => $2) END,
       first_sent_at = now() - make_interval(secs => $4)
 WHERE settlement_id = $1::uuid
RETURNING idempotency_key
"""


async def lost_claim(
    pool: asyncpg.Pool,
    rail: ScriptedRail,
    ran_out: float,
    retry_scheduled: bool = False,
    sent_ago: float = 60.0,
) -> str:
    """A settlement whose holder's lease ran out `ran_out` s ago, its call having paid."""
    sid = await accept(pool)
    key = await pool.fetchval(HELD_BY_A_LOST_WORKER, sid, ran_out, retry_scheduled, sent_ago)
    rail.by_key[key] = f"tr_holder_{sid[:8]}"
    rail.effects[sid] += 1
    return sid


async def past_the_pause(pool: asyncpg.Pool, sid: str) -> None:
    """Move the lost holder's lease's end back past the take-over's pause."""
    await pool.execute(
        "UPDATE rail_instructions SET lease_until = now() - make_interval(secs => $2) "
        "WHERE settlement_id = $1::uuid",
        sid,
        PAUSE + 1,
    )


def dispatcher(pool: asyncpg.Pool, rail: ScriptedRail, idempotent: bool) -> Dispatcher:
    return Dispatcher(pool, rail, create_metrics(), unique("w"), idempotent, POLICY)


async def test_a_lookup_waits_until_the_lost_holders_call_has_ended_at_the_rail(
    pool: asyncpg.Pool,
) -> None:
    rail = ScriptedRail([], honours_keys=False)
    sid = await lost_claim(pool, rail, ran_out=1.0)
    assert await dispatcher(pool, rail, idempotent=False).sweep() == 0  # held back
    await past_the_pause(pool, sid)
    assert await dispatcher(pool, rail, idempotent=False).sweep() == 1
    assert (await state(pool, sid))[1] == "transferred"
    assert rail.sends == 0 and rail.effects[sid] == 1  # found and adopted, never sent again


async def test_a_retry_the_holder_scheduled_is_taken_over_when_due(pool: asyncpg.Pool) -> None:
    rail = ScriptedRail([], honours_keys=False)
    sid = await lost_claim(pool, rail, ran_out=1.0, retry_scheduled=True)
    assert await dispatcher(pool, rail, idempotent=False).sweep() == 1
    assert (await state(pool, sid))[1] == "transferred" and rail.effects[sid] == 1


async def test_a_rail_that_honours_keys_is_asked_again_at_once(pool: asyncpg.Pool) -> None:
    rail = ScriptedRail([], honours_keys=True)
    sid = await lost_claim(pool, rail, ran_out=1.0)
    assert await dispatcher(pool, rail, idempotent=True).sweep() == 1
    # The same key again: the rail answers with the holder's transfer.
    assert (await state(pool, sid))[1] == "transferred"
    assert rail.sends == 1 and rail.effects[sid] == 1


async def test_a_key_past_the_rails_window_is_held_back_like_no_key(pool: asyncpg.Pool) -> None:
    rail = ScriptedRail([], honours_keys=True)
    old = POLICY.rail_key_window_seconds + 60
    sid = await lost_claim(pool, rail, ran_out=1.0, sent_ago=old)
    assert await dispatcher(pool, rail, idempotent=True).sweep() == 0
    await past_the_pause(pool, sid)
    assert await dispatcher(pool, rail, idempotent=True).sweep() == 1
    assert rail.sends == 0 and rail.effects[sid] == 1  # looked up and adopted


async def test_a_claim_taken_over_once_then_lost_mid_call_is_held_back_too(
    pool: asyncpg.Pool,
) -> None:
    rail = ScriptedRail([], honours_keys=False)
    sid = await lost_claim(pool, rail, ran_out=1.0)
    # Its retry had come due and was taken over; that holder was lost mid-call in turn.
    await pool.execute(
        "UPDATE rail_instructions SET next_attempt_at = lease_until - interval '30 s' "
        "WHERE settlement_id = $1::uuid",
        sid,
    )
    assert await dispatcher(pool, rail, idempotent=False).sweep() == 0
    await past_the_pause(pool, sid)
    assert await dispatcher(pool, rail, idempotent=False).sweep() == 1
    assert rail.sends == 0 and rail.effects[sid] == 1


async def test_an_instruction_an_operator_re_armed_is_looked_up_only_after_the_pause(
    pool: asyncpg.Pool,
) -> None:
    rail = ScriptedRail([], honours_keys=False)
    sid = await lost_claim(pool, rail, ran_out=60.0)
    # Sent, referred to review, and re-armed a second ago: pending again, long since created.
    await pool.execute(
        "UPDATE rail_instructions SET status = 'pending', lease_until = NULL, "
        "next_attempt_at = NULL, updated_at = now() - interval '1 s', "
        "created_at = now() - interval '2 h' WHERE settlement_id = $1::uuid",
        sid,
    )
    relay = dispatcher(pool, rail, idempotent=False)
    await relay.dispatch(sid)  # pass 1 claims only what was never sent
    assert await relay.sweep() == 0  # pass 2 gives the last call its time first
    assert (
        await pool.fetchval(
            "SELECT status FROM rail_instructions WHERE settlement_id = $1::uuid", sid
        )
        == "pending"
    )
    await pool.execute(
        "UPDATE rail_instructions SET updated_at = now() - make_interval(secs => $2) "
        "WHERE settlement_id = $1::uuid",
        sid,
        PAUSE + 1,
    )
    assert await relay.sweep() == 1
    assert (await state(pool, sid))[1] == "transferred"
    assert rail.sends == 0 and rail.effects[sid] == 1  # found and adopted

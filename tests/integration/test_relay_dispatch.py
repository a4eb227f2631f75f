"""The rail dispatcher on the real PostgreSQL, against a scripted in-process rail: one effect
per settlement through refusals, ambiguous answers, retries, budgets and stale workers."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from services.adapters.stripe.rail import RailLookupIncomplete
from services.contracts import avro
from services.domain.rail import RailInstruction, RailOutcome, RailResult
from services.domain.settlement import SettlementStatus
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.relay.breaker import BreakerPolicy, CircuitBreaker
from services.relay.dispatch import Dispatcher
from services.relay.lease import LeaseClock
from services.relay.metrics import create_metrics
from services.relay.policy import DispatchPolicy
from services.settlement.transitions import apply_transition
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS, request

pytestmark = [pytest.mark.integration, pytest.mark.money]
FAST = DispatchPolicy(backoff_base=0.0, max_attempts=3, stale_pending_seconds=0.0)


class ScriptedRail:
    """A rail that answers from a script and counts its effects, like the simulator does."""

    def __init__(self, script: list[RailOutcome], honours_keys: bool = True) -> None:
        self.script = script
        self.honours_keys = honours_keys
        self.effects: Counter[str] = Counter()
        self.by_key: dict[str, str] = {}
        self.sends = 0

    async def send(self, instruction: RailInstruction) -> RailResult:
        self.sends += 1
        outcome = self.script.pop(0) if self.script else RailOutcome.ACCEPTED
        if outcome is RailOutcome.REFUSED:
            return RailResult(outcome, detail="account_closed", status=400)
        if outcome is RailOutcome.RETRYABLE:
            return RailResult(outcome, detail="rate_limit", status=429)
        # ACCEPTED and AMBIGUOUS both act at the rail; AMBIGUOUS loses the answer (504).
        if self.honours_keys and instruction.idempotency_key in self.by_key:
            reference = self.by_key[instruction.idempotency_key]
        else:
            reference = f"tr_{instruction.settlement_id[:8]}_{self.sends}"
            self.by_key[instruction.idempotency_key] = reference
            self.effects[instruction.settlement_id] += 1
        if outcome is RailOutcome.AMBIGUOUS:
            return RailResult(outcome, detail="gateway_timeout", status=504)
        return RailResult(RailOutcome.ACCEPTED, reference, status=200)

    async def find(self, instruction: RailInstruction) -> str | None:
        return self.by_key.get(instruction.idempotency_key)


@pytest.fixture(scope="module")
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    # A database of its own: the sweep takes over any forgotten instruction it can see.
    async with scratch_database(infra.database_url, "settle_dispatch_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=6)
        yield pool
        await pool.close()


async def accept(pool: asyncpg.Pool) -> str:
    result = await Ledger(pool, Books(WINDOWS)).accept_many([request(unique("t"), amount=700)])
    return str(json.loads(result[0].body)["id"])


def dispatcher(pool: asyncpg.Pool, rail: ScriptedRail, idempotent: bool = True) -> Dispatcher:
    return Dispatcher(pool, rail, create_metrics(), unique("w"), idempotent, FAST)


async def state(pool: asyncpg.Pool, sid: str) -> tuple[str, str, str | None]:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT s.status, r.status AS rail_status, r.rail_reference
                 FROM settlements s JOIN rail_instructions r ON r.settlement_id = s.id
                WHERE s.id = $1""",
            sid,
        )
    return row["status"], row["rail_status"], row["rail_reference"]


async def expire_leases(pool: asyncpg.Pool, sid: str) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE rail_instructions SET lease_until = now() - interval '1 s' "
            "WHERE settlement_id = $1 AND status = 'processing'",
            sid,
        )


async def net(pool: asyncpg.Pool, sid: str) -> dict[str, int]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT split_part(p.account_id, ':', 2) AS kind, sum(p.amount) AS n FROM postings p
               JOIN journal_entries e ON e.id = p.entry_id WHERE e.settlement_id = $1
               GROUP BY 1""",
            sid,
        )
    return {r["kind"]: r["n"] for r in rows if r["n"]}


async def test_accepted_by_the_rail_is_submitted_with_its_reference(pool: asyncpg.Pool) -> None:
    sid, rail = await accept(pool), ScriptedRail([RailOutcome.ACCEPTED])
    await dispatcher(pool, rail).dispatch(sid)
    status, rail_status, reference = await state(pool, sid)
    assert (status, rail_status) == ("submitted", "transferred")
    assert reference is not None and rail.effects[sid] == 1
    assert await net(pool, sid) == {"funding": -700, "in_transit": 700}


async def test_refused_fails_and_reverses_the_books(pool: asyncpg.Pool) -> None:
    sid, rail = await accept(pool), ScriptedRail([RailOutcome.REFUSED])
    await dispatcher(pool, rail).dispatch(sid)
    assert await state(pool, sid) == ("failed", "failed", None)
    assert await net(pool, sid) == {}


async def test_ambiguous_then_reissued_under_the_same_key_makes_one_effect(
    pool: asyncpg.Pool,
) -> None:
    sid, rail = await accept(pool), ScriptedRail([RailOutcome.AMBIGUOUS, RailOutcome.ACCEPTED])
    d = dispatcher(pool, rail)
    await d.dispatch(sid)
    assert (await state(pool, sid))[:2] == ("dispatching", "processing")
    await expire_leases(pool, sid)
    assert await d.sweep() >= 1
    assert (await state(pool, sid))[:2] == ("submitted", "transferred")
    assert rail.sends == 2 and rail.effects[sid] == 1


async def test_rail_ignoring_keys_is_searched_and_the_transfer_adopted(
    pool: asyncpg.Pool,
) -> None:
    sid = await accept(pool)
    rail = ScriptedRail([RailOutcome.AMBIGUOUS], honours_keys=False)
    d = dispatcher(pool, rail, idempotent=False)
    await d.dispatch(sid)
    await expire_leases(pool, sid)
    await d.sweep()
    assert (await state(pool, sid))[:2] == ("submitted", "transferred")
    assert rail.sends == 1 and rail.effects[sid] == 1  # found at the rail, not sent again
    assert d.metrics.registry.get_sample_value(
        "settle_relay_lookups_total", {"rail": "sim", "found": "true"}
    )


async def test_budget_spent_on_refusals_to_act_fails_the_settlement(pool: asyncpg.Pool) -> None:
    sid, rail = await accept(pool), ScriptedRail([RailOutcome.RETRYABLE] * 5)
    d = dispatcher(pool, rail)
    await d.dispatch(sid)
    for _ in range(3):
        await expire_leases(pool, sid)
        await d.sweep()
    assert (await state(pool, sid))[:2] == ("failed", "failed")
    assert rail.sends == 3 and await net(pool, sid) == {}
    async with pool.acquire() as conn:
        reason = await conn.fetchval("SELECT reason FROM settlements WHERE id = $1", sid)
    assert reason == "retry_budget_exhausted"


async def test_budget_spent_after_an_ambiguous_answer_needs_review(pool: asyncpg.Pool) -> None:
    script = [RailOutcome.AMBIGUOUS, RailOutcome.RETRYABLE, RailOutcome.RETRYABLE]
    sid, rail = await accept(pool), ScriptedRail(script)
    d = dispatcher(pool, rail)
    await d.dispatch(sid)
    for _ in range(3):
        await expire_leases(pool, sid)
        await d.sweep()
    assert (await state(pool, sid))[:2] == ("needs_review", "needs_review")
    assert await net(pool, sid) == {"funding": -700, "payable": 700}  # money stays put


async def test_a_stale_worker_is_fenced_off_and_sends_nothing(pool: asyncpg.Pool) -> None:
    sid = await accept(pool)
    rail = ScriptedRail([])
    stale, fresh = dispatcher(pool, rail), dispatcher(pool, rail)
    async with pool.acquire() as conn:  # the stale worker claimed, then paused
        claimed = await conn.fetchrow(
            "UPDATE rail_instructions SET status = 'processing', fence = fence + 1, "
            "lease_until = now() - interval '1 s', attempts = 1, first_sent_at = now() "
            "WHERE settlement_id = $1 RETURNING *, false AS sent_before, 0::float8 AS sent_age, "
            "NULL::text AS traceparent, NULL::text AS tracestate",
            sid,
        )
    await fresh.sweep()  # takes over with fence + 1 and completes
    assert (await state(pool, sid))[1] == "transferred" and rail.sends == 1
    moments = iter([0.0, 31.0])  # its lease began at the claim; it wakes 31 s later
    lease = LeaseClock(30.0, 10.0, clock=lambda: next(moments))
    await stale._attempt(claimed, lease)  # wakes up with its old fence
    assert rail.sends == 1 and rail.effects[sid] == 1
    assert (
        stale.metrics.registry.get_sample_value(
            "settle_relay_fence_rejections_total", {"rail": "sim"}
        )
        == 1
    )


async def test_forgotten_pending_instruction_is_picked_up_by_the_sweep(
    pool: asyncpg.Pool,
) -> None:
    sid, rail = await accept(pool), ScriptedRail([])
    await dispatcher(pool, rail).sweep()  # no Kafka event ever arrived for it
    assert (await state(pool, sid))[:2] == ("submitted", "transferred")


class UnsearchableRail(ScriptedRail):
    """A rail whose search runs out of pages before it can rule a transfer out."""

    async def find(self, instruction: RailInstruction) -> str | None:
        raise RailLookupIncomplete(instruction.settlement_id, "20 pages, not exhausted")


async def test_a_lookup_that_cannot_rule_a_transfer_out_goes_to_review(
    pool: asyncpg.Pool,
) -> None:
    sid = await accept(pool)
    rail = UnsearchableRail([RailOutcome.AMBIGUOUS], honours_keys=False)
    d = dispatcher(pool, rail, idempotent=False)
    await d.dispatch(sid)
    await expire_leases(pool, sid)
    await d.sweep()
    assert (await state(pool, sid))[:2] == ("needs_review", "needs_review")
    assert rail.sends == 1  # never sent again blind
    async with pool.acquire() as conn:
        reason = await conn.fetchval("SELECT reason FROM settlements WHERE id = $1", sid)
    assert "lookup incomplete" in reason


async def test_a_batch_is_claimed_sent_and_recorded_together(pool: asyncpg.Pool) -> None:
    sids = [await accept(pool) for _ in range(6)]
    script = [
        RailOutcome.ACCEPTED,
        RailOutcome.REFUSED,
        RailOutcome.ACCEPTED,
        RailOutcome.AMBIGUOUS,
        RailOutcome.ACCEPTED,
        RailOutcome.ACCEPTED,
    ]
    rail = ScriptedRail(script)
    d = dispatcher(pool, rail)
    await d.dispatch_many(sids)
    states = [await state(pool, sid) for sid in sids]
    assert sorted(s[:2] for s in states) == sorted(
        [("submitted", "transferred")] * 4 + [("failed", "failed"), ("dispatching", "processing")]
    )
    assert all(s[2] is not None for s in states if s[0] == "submitted")
    await d.dispatch_many(sids)  # a second trigger for the same settlements claims nothing
    assert rail.sends == 6
    assert all(n == 1 for n in rail.effects.values())
    for sid, (status, _, _) in zip(sids, states, strict=True):
        if status == "submitted":
            assert await net(pool, sid) == {"funding": -700, "in_transit": 700}


async def test_a_batch_write_refused_by_the_fence_records_nothing_for_that_row(
    pool: asyncpg.Pool,
) -> None:
    sid, rail = await accept(pool), ScriptedRail([])
    d = dispatcher(pool, rail)

    class TakenOver(ScriptedRail):
        async def send(self, instruction: RailInstruction) -> RailResult:
            # Another worker takes the claim over while this call is out.
            async with pool.acquire() as conn:
                await conn.execute(
                    "UPDATE rail_instructions SET fence = fence + 1 WHERE settlement_id = $1",
                    instruction.settlement_id,
                )
            return await rail.send(instruction)

    d.rail = TakenOver([])
    await d.dispatch_many([sid])
    assert (await state(pool, sid))[:2] == ("dispatching", "processing")
    assert (
        d.metrics.registry.get_sample_value("settle_relay_fence_rejections_total", {"rail": "sim"})
        == 1
    )


async def test_a_holder_lost_mid_attempt_makes_the_budget_end_in_review(
    pool: asyncpg.Pool,
) -> None:
    # The first holder died after claiming (it may have reached the rail); every later
    # attempt finds the rail unreachable. Failing the settlement could hide a payment.
    sid, rail = await accept(pool), ScriptedRail([RailOutcome.RETRYABLE] * 5)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE rail_instructions SET status = 'processing', fence = fence + 1, "
            "lease_until = now() - interval '1 s', attempts = 1, first_sent_at = now() "
            "WHERE settlement_id = $1",
            sid,
        )
    d = dispatcher(pool, rail)
    for _ in range(3):
        await d.sweep()
        await expire_leases(pool, sid)
    assert (await state(pool, sid))[:2] == ("needs_review", "needs_review")
    assert await net(pool, sid) == {"funding": -700, "payable": 700}


async def test_the_rail_answer_recorded_after_a_webhook_moved_on_keeps_the_status(
    pool: asyncpg.Pool,
) -> None:
    sid, rail = await accept(pool), ScriptedRail([])

    class WebhookFirst(ScriptedRail):
        async def send(self, instruction: RailInstruction) -> RailResult:
            result = await rail.send(instruction)
            # The rail's webhook is applied before its API answer is recorded, without
            # telling the rail's reference.
            async with pool.acquire() as conn, conn.transaction():
                await apply_transition(
                    conn,
                    instruction.settlement_id,
                    SettlementStatus.PAID,
                    actor="inbox",
                    now=datetime.now(UTC),
                )
            return result

    await dispatcher(pool, WebhookFirst([])).dispatch(sid)
    status, rail_status, reference = await state(pool, sid)
    assert (status, rail_status) == ("paid", "transferred") and reference is not None
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT version, rail_reference FROM settlements WHERE id = $1", sid
        )
        trail = await conn.fetch(
            "SELECT sequence, from_status, to_status FROM settlement_transitions "
            "WHERE settlement_id = $1 ORDER BY sequence",
            sid,
        )
        payloads = await conn.fetch(
            "SELECT payload FROM outbox WHERE settlement_id = $1 ORDER BY sequence", sid
        )
    assert (row["version"], row["rail_reference"]) == (4, reference)
    assert [tuple(t) for t in trail][2:] == [(3, "dispatching", "paid"), (4, "paid", "paid")]
    last = avro.decode(payloads[-1]["payload"], "SettlementEvent")
    assert (last["sequence"], last["type"], last["status"], last["rail_reference"]) == (
        4,
        "rail_reference_recorded",
        "paid",
        reference,
    )
    assert await net(pool, sid) == {"funding": -700, "paid_out": 700}


async def test_a_rail_that_stops_answering_holds_back_its_own_claims_and_no_others(
    pool: asyncpg.Pool,
) -> None:
    metrics = create_metrics()
    down = ScriptedRail([RailOutcome.RETRYABLE, RailOutcome.AMBIGUOUS, RailOutcome.RETRYABLE])
    breaker = CircuitBreaker(BreakerPolicy(threshold=3, cooldown=60.0))
    held = Dispatcher(pool, down, metrics, unique("w"), True, FAST, breaker=breaker)
    sids = [await accept(pool) for _ in range(5)]
    await held.dispatch_many(sids[:3])  # three calls the rail did not answer for itself
    assert breaker.is_open
    await held.dispatch(sids[3])
    assert await held.sweep() == 0
    assert down.sends == 3  # nothing claimed while open: no lease burnt, no budget spent
    assert (await state(pool, sids[3]))[:2] == ("accepted", "pending")
    gauge = metrics.registry.get_sample_value
    assert gauge("settle_relay_breaker_open", {"rail": "sim"}) == 1
    # Another dispatcher has a breaker of its own, closed: it goes on paying.
    answering = ScriptedRail([])
    await dispatcher(pool, answering).dispatch(sids[4])
    assert (await state(pool, sids[4]))[:2] == ("submitted", "transferred")

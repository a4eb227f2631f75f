"""What one rail call came to, recorded under the fence of the claim that made it: transferred
(the settlement submitted with the rail's reference), refused (failed), tried again later
(after a backoff, and after the ambiguous pause where the next attempt looks at the rail
first), or, past the retry budget, failed or referred to an operator. A write whose fence
moved on changes nothing: another worker holds the instruction, and its record stands."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

import asyncpg

from services.domain.instruction import SETTLEMENT_AFTER, end_of_budget, target_of
from services.domain.instruction import InstructionEvent as E
from services.domain.rail import RailInstruction, RailOutcome, RailResult
from services.platform.backoff import backoff
from services.platform.clock import utc_now
from services.relay import dispatch_sql as sql
from services.relay.metrics import RailMetrics
from services.relay.policy import DispatchPolicy
from services.settlement.transitions import TransitionBatch, apply_transition


class OutcomeRecords:
    """The fenced writes of a dispatcher's rail calls; see the module docstring."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        metrics: RailMetrics,
        worker: str,
        policy: DispatchPolicy,
        rail_idempotent: bool,
    ) -> None:
        self.pool = pool
        self.metrics = metrics
        self.worker = worker
        self.policy = policy
        self.rail_idempotent = rail_idempotent
        self._rng = random.Random()

    async def transferred(
        self, accepted: Sequence[tuple[uuid.UUID | str, int, RailResult]]
    ) -> None:
        """Record transfers the rail accepted, each under its fence, and move the settlements
        to `submitted` with the rail's reference, in one transaction."""
        sids = [uuid.UUID(str(sid)) for sid, _, _ in accepted]
        references = [result.rail_reference for _, _, result in accepted]
        async with self.pool.acquire() as conn, conn.transaction():
            recorded = await conn.fetch(
                sql.RECORD_TRANSFERRED_MANY, sids, [fence for _, fence, _ in accepted], references
            )
            batch = await TransitionBatch.lock(conn, (r["settlement_id"] for r in recorded))
            submitted = SETTLEMENT_AFTER[E.ACCEPT]
            for r in recorded:
                sid, ref = r["settlement_id"], r["ref"]
                if batch.move(sid, submitted, actor=self.worker, rail_reference=ref) is None:
                    # The inbox moved it on first (the webhook beat this record): it keeps
                    # its status but learns its reference, if it has none yet.
                    batch.record_rail_reference(sid, ref, actor=self.worker)
            await batch.write(conn, utc_now())
        # Another worker holds the rest now; its record stands.
        self.metrics.fence_rejections.inc(len(accepted) - len(recorded))

    async def record(
        self,
        instruction: RailInstruction,
        fence: int,
        attempts: int,
        result: RailResult,
        sent_age: float = 0.0,
    ) -> None:
        """Record what the rail said; `sent_age`: seconds since the instruction first went out."""
        if result.outcome is RailOutcome.ACCEPTED:
            await self.transferred([(instruction.settlement_id, fence, result)])
        elif result.outcome is RailOutcome.REFUSED:
            await self.refused(instruction, fence, result)
        else:
            await self.retry_later(instruction, fence, attempts, result, sent_age)

    async def refused(self, instruction: RailInstruction, fence: int, result: RailResult) -> None:
        sid = instruction.settlement_id
        async with self.pool.acquire() as conn, conn.transaction():
            done = await conn.execute(
                sql.RECORD_FINAL,
                sid,
                fence,
                target_of(E.REFUSE),
                result.detail,
                str(result.outcome),
            )
            if done != "UPDATE 1":
                self.metrics.fence_rejections.inc()
                return  # another worker holds it now; its record stands
            await apply_transition(
                conn,
                sid,
                SETTLEMENT_AFTER[E.REFUSE],
                actor=self.worker,
                now=utc_now(),
                reason=result.detail or "refused by the rail",
            )

    async def retry_later(
        self,
        instruction: RailInstruction,
        fence: int,
        attempts: int,
        result: RailResult,
        sent_age: float = 0.0,
    ) -> None:
        sid = instruction.settlement_id
        if attempts >= self.policy.max_attempts:
            await self.give_up(instruction, fence, result)
            return
        p = self.policy
        delay = backoff(attempts, p.backoff_base, p.backoff_cap, self._rng)
        # The next attempt looks at the rail first where keys are ignored or this one will be
        # past its window by then: after an ambiguous answer, the rail is given time first.
        will_look = sent_age + p.lease_seconds + delay >= p.rail_key_window_seconds
        if result.outcome is RailOutcome.AMBIGUOUS and (will_look or not self.rail_idempotent):
            delay = max(delay, p.ambiguous_pause_seconds)
        async with self.pool.acquire() as conn:
            marked = await conn.fetchval(
                sql.SCHEDULE_RETRY, sid, fence, delay, result.detail, str(result.outcome)
            )
        if marked is None:
            self.metrics.fence_rejections.inc()

    async def give_up(self, instruction: RailInstruction, fence: int, result: RailResult) -> None:
        # Past the budget: failed if the rail surely did nothing, else an operator decides.
        sid = instruction.settlement_id
        async with self.pool.acquire() as conn, conn.transaction():
            ambiguous = await conn.fetchval(sql.WAS_AMBIGUOUS, sid)
            event = end_of_budget(ambiguous or result.outcome is RailOutcome.AMBIGUOUS)
            reason = (
                f"rail outcome unknown, an operator must check the rail: {result.detail}"
                if event is E.REFER
                else "retry_budget_exhausted"
            )
            done = await conn.execute(
                sql.RECORD_FINAL, sid, fence, target_of(event), reason, str(result.outcome)
            )
            if done != "UPDATE 1":
                self.metrics.fence_rejections.inc()
                return
            await apply_transition(
                conn,
                sid,
                SETTLEMENT_AFTER[event],
                actor=self.worker,
                now=utc_now(),
                reason=reason,
            )

"""The rail dispatcher: the two-pass pattern, so no crash or pause ever pays twice.

Pass 1 (`dispatch`, triggered by a settlement's `created` event) claims a pending instruction
with a new fence and a lease, calls the rail under the instruction's deterministic key and
records the outcome with a write that checks the fence. Pass 2 (`sweep`, on a timer) takes
over instructions whose lease ran out (a crashed or paused worker, or a retry that is due)
and pending ones nobody claimed, with the fence moved on, and issues them again under the same
key; a rail that honours keys collapses the attempts into one transfer. For a rail that does
not (`rail_idempotent=False`), and for any re-issue past the rail's key window, the rail is
searched for our settlement first and a transfer found there is adopted.

Two rules keep a paused worker from paying what its successor pays again. The holder reads
its lease from its own clock (`LeaseClock`, which runs on through a pause) at the last moment,
inside the transport with no await before the write (services/platform/send_gate.py): a call
that could outlive the lease is never written. And a take-over that will look at the rail
first, of a lease that ran out mid-call, waits until the holder's last possible write
(`call_seconds` before its lease's end) has ended at the rail, giving the rail
`ambiguous_pause_seconds` past that end (RECLAIM_DUE holds such rows back). Only a stall
between the last check and the write itself that outlasts `call_seconds` plus that pause,
less the rail's own processing time, escapes both.

A dispatcher drives one rail (`rail_name`) and picks only that rail's instructions, with its
own concurrency, retry budget (its policy) and circuit breaker (relay/breaker.py): a rail
that stops answering makes its own instructions wait, and no other rail's.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence

import asyncpg

from services.domain.errors import SettleError
from services.domain.instruction import SETTLEMENT_AFTER
from services.domain.instruction import InstructionEvent as E
from services.domain.instruction import InstructionStatus as I
from services.domain.payout import PayoutMethod
from services.domain.rail import Rail, RailInstruction, RailOutcome, RailResult
from services.domain.trace_context import carried
from services.platform.clock import utc_now
from services.platform.failpoints import failpoint
from services.relay import dispatch_sql as sql
from services.relay.breaker import CircuitBreaker
from services.relay.lease import LeaseClock
from services.relay.metrics import RelayMetrics
from services.relay.policy import DispatchPolicy
from services.relay.rail import call_rail
from services.relay.records import OutcomeRecords
from services.settlement.transitions import (
    Move,
    apply_transitions,
)

log = logging.getLogger(__name__)


class Dispatcher:
    """Moves rail instructions from pending to transferred or failed; see the module docstring."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        rail: Rail,
        metrics: RelayMetrics,
        worker: str,
        rail_idempotent: bool = True,
        policy: DispatchPolicy | None = None,
        rail_name: str = "sim",
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.pool = pool
        self.rail = rail
        self.rail_name = rail_name  # the instructions of this rail only are this dispatcher's
        self.metrics = metrics
        self.counts = metrics.of_rail(rail_name)
        self.worker = worker
        self.rail_idempotent = rail_idempotent
        self.policy = policy or DispatchPolicy()
        self._calls = asyncio.Semaphore(self.policy.concurrent_calls)
        self.breaker = breaker or CircuitBreaker()
        self.records = OutcomeRecords(pool, self.counts, worker, self.policy, rail_idempotent)

    async def dispatch(self, settlement_id: str) -> None:
        """Pass 1 for one settlement: claim its pending instruction, if any, and send it."""
        await self.dispatch_many([settlement_id])

    async def dispatch_many(self, settlement_ids: Sequence[str]) -> None:
        """Pass 1: claim the settlements' pending instructions (one transaction), send them
        side by side while the lease leaves time for a call, and record the accepted ones
        together; what the rail did not accept is handled one by one. Instructions already
        claimed, done, or not pending are skipped."""
        if self.breaker.is_open:
            return  # the rail is not answering: the instructions wait, pending, for pass 2
        ids = [uuid.UUID(sid) for sid in settlement_ids]
        lease = LeaseClock(self.policy.lease_seconds, self.policy.call_seconds)
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                sql.CLAIM_PENDING, ids, self.policy.lease_seconds, self.worker, self.rail_name
            )
            if not rows:
                return
            moves = [Move(r["settlement_id"], SETTLEMENT_AFTER[E.CLAIM]) for r in rows]
            await apply_transitions(conn, moves, actor=self.worker, now=utc_now())
        failpoint("dispatch.after_claim")  # claimed, nothing sent yet
        answers = await asyncio.gather(*(self._send(instruction_of(r), lease) for r in rows))
        sent = [(row, result) for row, result in zip(rows, answers, strict=True) if result]
        self.counts.fence_rejections.inc(len(rows) - len(sent))
        accepted = [(row, result) for row, result in sent if result.outcome is RailOutcome.ACCEPTED]
        for _ in accepted:
            failpoint("dispatch.after_accept")  # the rail paid; nothing of it is recorded
        if accepted:
            await self.records.transferred(
                [(row["settlement_id"], int(row["fence"]), result) for row, result in accepted]
            )
        await asyncio.gather(
            *(
                self.records.record(instruction_of(row), int(row["fence"]), row["attempts"], result)
                for row, result in sent
                if result.outcome is not RailOutcome.ACCEPTED
            )
        )

    async def _send(self, instruction: RailInstruction, lease: LeaseClock) -> RailResult | None:
        """The rail's answer (`call_rail`: traced, logged); None, having written nothing, if
        `lease` leaves no time for the call when it would start or at the moment of writing."""
        async with self._calls:
            if not lease.time_for_a_call():
                return None  # pass 2 takes it over once the lease ran out
            failpoint("dispatch.before_call")
            started, generation = time.monotonic(), self.breaker.generation
            failpoint("dispatch.during_call")  # with kill-in:S, lands while the call is out
            result = await call_rail(self.rail, instruction, lease.time_for_a_call)
            if result is None:
                return None  # the lease ran out on the way to the rail; nothing went out
        self.counts.rail_seconds.observe(time.monotonic() - started)
        self.counts.called(result.outcome)
        self.breaker.record(result.outcome, generation)
        return result

    async def sweep(self) -> int:
        """Pass 2: take over due and forgotten instructions and send them again."""
        p = self.policy
        async with self.pool.acquire() as conn:
            await conn.fetchval(sql.END_STALLED_RELAY_SESSIONS, p.lease_seconds)
        self.counts.breaker_open.set(int(self.breaker.is_open))
        if self.breaker.is_open:
            return 0
        lease = LeaseClock(p.lease_seconds, p.call_seconds)
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                sql.RECLAIM_DUE,
                p.lease_seconds,
                self.worker,
                p.stale_pending_seconds,
                p.sweep_batch,
                not self.rail_idempotent,
                p.rail_key_window_seconds,
                p.ambiguous_pause_seconds,
                self.rail_name,
            )
            moves = [
                Move(r["settlement_id"], SETTLEMENT_AFTER[E.RECLAIM])
                for r in rows
                if r["was"] == I.PENDING
            ]
            await apply_transitions(conn, moves, actor=self.worker, now=utc_now())
        self.counts.reclaims.inc(sum(1 for r in rows if r["was"] == I.PROCESSING))
        # Taken-over instructions are sent side by side: a slow rail must not serialise them.
        await asyncio.gather(*(self._attempt(row, lease) for row in rows))
        async with self.pool.acquire() as conn:
            gauges = await conn.fetchrow(sql.GAUGES, self.rail_name)
        self.counts.in_flight.set(gauges["in_flight"])
        self.counts.stuck.set(gauges["stuck"])
        return len(rows)

    async def _attempt(self, row: asyncpg.Record, lease: LeaseClock) -> None:
        instruction = instruction_of(row)
        fence = int(row["fence"])
        must_look = row["sent_before"] and (
            not self.rail_idempotent or row["sent_age"] >= self.policy.rail_key_window_seconds
        )
        if must_look:
            try:
                found = await self.rail.find(instruction)
            except SettleError as e:
                self.counts.looked(found=False)
                if not e.retriable:
                    # The rail cannot rule a transfer out (the search ran past its pages):
                    # sending again could pay twice, so an operator decides.
                    await self.records.give_up(
                        instruction,
                        fence,
                        RailResult(RailOutcome.AMBIGUOUS, detail=f"lookup incomplete: {e}"),
                    )
                    return
                await self.records.retry_later(
                    instruction,
                    fence,
                    row["attempts"],
                    RailResult(RailOutcome.RETRYABLE, detail=f"lookup failed: {e}"),
                )
                return
            self.counts.looked(found=found is not None)
            if found is not None:
                await self.records.record(
                    instruction,
                    fence,
                    row["attempts"],
                    RailResult(RailOutcome.ACCEPTED, found, "adopted"),
                )
                return
            failpoint("dispatch.after_lookup")  # the rail holds nothing yet; about to send
        result = await self._send(instruction, lease)
        if result is None:  # the lease ran out before the write: nothing was sent
            self.counts.fence_rejections.inc()
            return
        if result.outcome is RailOutcome.ACCEPTED:
            failpoint("dispatch.after_accept")  # the rail paid; nothing of it is recorded
        await self.records.record(instruction, fence, row["attempts"], result, row["sent_age"])


def instruction_of(row: asyncpg.Record) -> RailInstruction:
    """The rail instruction a claimed row describes (with its settlement's trace, if read)."""
    return RailInstruction(
        settlement_id=str(row["settlement_id"]),
        tenant=row["tenant"],
        idempotency_key=row["idempotency_key"],
        destination=row["destination"],
        amount=row["amount"],
        currency=row["currency"],
        method=PayoutMethod(row["method"]),
        trace=carried(row.get("traceparent"), row.get("tracestate")),
    )

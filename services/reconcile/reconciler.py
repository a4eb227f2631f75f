"""The reconciler's rounds: the engine run on a schedule, one replica at a time.

    a round    hold the lock (wait while another replica has it)
               the history's monthly partitions ensured ahead (at start, then once a day)
               intraday run since the last completed one
               the end-of-day run of a closed day not yet completed (once per day)
               a re-check of the items that crossed a re-check age, if any did
               the metrics read back from the store
    then       sleep the interval; after a failed round, a backoff (capped at the interval)

A rail or PostgreSQL outage fails the run (the engine records it `failed`) and the round
stops there: the heartbeat (the latest completed run) does not move, the service keeps
running and tries again after its backoff. An error that doing again cannot mend is raised.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

import asyncpg

from services.adapters.postgres import history_months
from services.adapters.postgres.store_errors import is_retriable
from services.adapters.stripe.source import RailSource
from services.domain.errors import StoreUnavailable
from services.domain.reconciliation import RunKind, RunStatus
from services.platform.backoff import backoff
from services.platform.clock import Clock, utc_now
from services.reconcile import rechecks, schedule, standing, store, windows
from services.reconcile.engine import reconcile
from services.reconcile.lock import ReconcilerLock
from services.reconcile.metrics import ReconcileMetrics
from services.reconcile.outcome import ById, Outcome
from services.reconcile.schedule import Schedule
from services.reconcile.windows import Window

log = logging.getLogger(__name__)

RETRY_BASE_SECONDS = 1.0


class Reconciler:
    """Runs reconciliation on `schedule` while holding `lock`; `run` until cancelled."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        rail: RailSource,
        lock: ReconcilerLock,
        metrics: ReconcileMetrics,
        plan: Schedule,
        *,
        rng: random.Random,
        clock: Clock = utc_now,
    ) -> None:
        self._pool, self._rail, self._lock = pool, rail, lock
        self._metrics, self._plan, self._rng, self._clock = metrics, plan, rng, clock
        self._stopping = asyncio.Event()
        self._upkeep = history_months.MonthlyUpkeep()

    def stop(self) -> None:
        """Ask `run` to return once the round under way (if any) has finished."""
        self._stopping.set()

    async def run(self) -> None:
        """Round after round until stopped or cancelled; the lock is given up on the way out."""
        failures = 0
        try:
            while not self._stopping.is_set():
                self._metrics.lock_held.set(0)
                if not await self._unless_stopped(self._lock.hold()):
                    return
                self._metrics.lock_held.set(1)
                failures = 0 if await self.round() else failures + 1
                await self._unless_stopped(asyncio.sleep(self._pause(failures)))
        finally:
            self._metrics.lock_held.set(0)
            await self._lock.release()

    async def _unless_stopped(self, step: Coroutine[Any, Any, None]) -> bool:
        """Await `step` unless `stop` is asked first (`step` is then cancelled); True if it
        finished. A standby replica waiting for the lock, or a pause, ends at once."""
        task = asyncio.create_task(step)
        stopped = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait((task, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, stopped):
                pending.cancel()
            await asyncio.gather(task, stopped, return_exceptions=True)
        if task.cancelled():
            return False
        task.result()  # raises what the step raised
        return True

    async def round(self) -> bool:
        """One round (intraday, end of day due, re-checks due); True if every run completed.
        Retriable failures (a source unreadable, PostgreSQL away) are logged and give False."""
        await self.ensure_history_months()
        try:
            ok = await self._intraday() and await self._end_of_day() and await self._recheck()
        except Exception as e:
            if not is_retriable(e):
                raise
            log.warning("reconciliation round failed, backing off: %s", e)
            ok = False
        try:
            await self.refresh()
        except StoreUnavailable as e:
            log.warning("reconciliation metrics not refreshed: %s", e)
        return ok

    async def ensure_history_months(self) -> None:
        """Create the history's coming monthly partitions when due (at start, then daily); a
        retriable failure is logged and tried again next round, a year of months ahead."""
        now = self._clock()
        if not self._upkeep.due(now):
            return
        try:
            created = await history_months.ensure_months(self._pool)
        except Exception as e:
            if not is_retriable(e):
                raise
            log.warning("history partitions not ensured, trying again next round: %s", e)
            return
        self._upkeep.done(now)
        if created:
            log.info("created %d monthly history partitions", created)

    async def refresh(self) -> None:
        """Set the gauges from the store: open breaks by type, the oldest, the heartbeat, the
        oldest `submitted` settlement of each rail and method."""
        found = await standing.standing(self._pool)
        for break_type, count in found.open_by_type.items():
            self._metrics.breaks_open.labels(type=break_type.value).set(count)
        now = self._clock()
        oldest = 0.0 if found.oldest_open is None else (now - found.oldest_open).total_seconds()
        self._metrics.oldest_open.set(max(oldest, 0.0))
        ages = {key: (now - since).total_seconds() for key, since in found.oldest_submitted.items()}
        self._metrics.set_oldest_submitted(ages)
        if found.last_success is not None:
            self._metrics.last_success.set(found.last_success.timestamp())

    async def _intraday(self) -> bool:
        last = await store.last_completed(self._pool, RunKind.INTRADAY)
        overlap = timedelta(seconds=self._plan.overlap)
        return await self._run(windows.intraday(last, self._clock(), overlap))

    async def _end_of_day(self) -> bool:
        day = schedule.end_of_day_due(self._clock(), await standing.last_end_of_day(self._pool))
        return day is None or await self._run(windows.end_of_day(day))

    async def _recheck(self) -> bool:
        now, ages = self._clock(), self._plan.recheck_ages
        last = await store.last_completed(self._pool, RunKind.RECHECK)
        items = await rechecks.due(self._pool, schedule.recheck_bounds(last, now, ages))
        if not (items.settlement_ids or items.object_ids):
            return True  # nothing crossed an age: the next re-check looks back to `last`
        return await self._run(schedule.recheck_window(last, now, ages), items)

    async def _run(self, window: Window, by_id: ById | None = None) -> bool:
        """One engine run, counted; True if it completed."""
        kind = window.kind.value
        started = time.monotonic()
        try:
            outcome: Outcome = await reconcile(
                self._pool,
                self._rail,
                window,
                grace=self._plan.grace,
                clock=self._clock,
                by_id=by_id,
            )
        except StoreUnavailable:
            self._metrics.runs.labels(kind=kind, outcome="unavailable").inc()
            raise
        finally:
            self._metrics.run_seconds.labels(kind=kind).observe(time.monotonic() - started)
        self._metrics.runs.labels(kind=kind, outcome=outcome.status.value).inc()
        self._metrics.healed.inc(outcome.healed)
        for obj_kind, count in outcome.foreign.items():
            self._metrics.out_of_scope.labels(kind=obj_kind).inc(count)
        for seconds in outcome.paid_after:
            self._metrics.accepted_to_paid.observe(seconds)
        for source, rows in (await standing.source_rows(self._pool, outcome.run_id)).items():
            self._metrics.objects_read.labels(source=source).inc(rows)
        if outcome.status is not RunStatus.COMPLETED:
            log.warning("%s run %d failed: %s", kind, outcome.run_id, outcome.error)
            return False
        return True

    def _pause(self, failures: int) -> float:
        """The interval after a good round; a growing, jittered backoff after failed ones."""
        interval = self._plan.interval
        if failures == 0:
            return interval
        return backoff(failures - 1, min(RETRY_BASE_SECONDS, interval), interval, self._rng, 0.5)

"""The SEPA rail's dispatcher: pending instructions collected into pain.001 files, each file
stored before it is uploaded, and uploaded as stored until the bank has it. No crash, pause
or lost answer pays twice, though the bank honours no key:

- An instruction is put in a file once, in the transaction that stores the file's bytes
  (`build`). It is never put in a second file: a file the bank refuses (it took nothing)
  fails its settlements with the bank's reason, and a transaction the bank rejects later is
  failed by its status report, in the inbox.
- A file is uploaded under its own fence and lease (`upload_due`), always as stored, so the
  bank sees one MsgId for it however often it is sent: after a lost answer, a crash before
  the answer was recorded, or a paused uploader whose lease another relay took over, the
  bank answers DU01 ("I have it") to every upload but the first that reached it. Both
  answers record the file as taken; a stale uploader's record is refused by the fence.
- The upload asks the send gate at the moment of writing, as every rail call does: a holder
  whose lease ran out writes nothing.

The file's execution date is the bank's business day, or the next one after the cut-off
(`services/domain/business_days.py`); `today` says what time it is at the bank.
"""

from __future__ import annotations

import hashlib
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

import asyncpg

from services.adapters.sepa.bank import Bank, Upload
from services.adapters.sepa.errors import Pain001Refused
from services.adapters.sepa.pain001 import CreditTransfer, Debtor, build_pain001
from services.domain.business_days import execution_date
from services.domain.instruction import SETTLEMENT_AFTER
from services.domain.instruction import InstructionEvent as E
from services.domain.rail import RailOutcome, RailResult
from services.domain.sepa import end_to_end_id
from services.platform import send_gate
from services.platform.backoff import backoff
from services.platform.clock import utc_now
from services.platform.failpoints import failpoint
from services.relay import bank_file_sql as sql
from services.relay.breaker import CircuitBreaker
from services.relay.dispatch import instruction_of
from services.relay.lease import LeaseClock
from services.relay.metrics import RelayMetrics
from services.relay.policy import DispatchPolicy
from services.relay.records import OutcomeRecords
from services.settlement.transitions import Move, apply_transitions

log = logging.getLogger(__name__)

# A transfer is tried alone in a file of this debtor's, to find what in it cannot be written.
UNWRITTEN_DEBTOR = Debtor("settle", "DE89370400440532013000")
NOON = datetime(2000, 1, 3, 12, tzinfo=UTC)


@dataclass(frozen=True)
class FilePolicy:
    """How files are made: who pays, batch booking, the cut-off, and how many per file."""

    debtor: Debtor
    batch_booking: bool = True
    cutoff: time = time(15, 0)
    file_size: int = 500  # transactions at most per file
    uploads_per_tick: int = 8


class FileDispatcher:
    """See the module docstring."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        bank: Bank,
        metrics: RelayMetrics,
        worker: str,
        files: FilePolicy,
        today: Callable[[], Awaitable[datetime]],
        policy: DispatchPolicy | None = None,
        rail_name: str = "sepa",
    ) -> None:
        self.pool, self.bank, self.worker, self.files = pool, bank, worker, files
        self.today = today
        self.rail_name = rail_name
        self.policy = policy or DispatchPolicy()
        self.metrics = metrics
        self.counts = metrics.of_rail(rail_name)
        self.breaker = CircuitBreaker()
        self.records = OutcomeRecords(pool, self.counts, worker, self.policy, False)
        self._rng = random.Random()

    async def tick(self) -> int:
        """Build a file of what is due, then upload what waits; the files uploaded."""
        self.counts.breaker_open.set(int(self.breaker.is_open))
        if self.breaker.is_open:
            return 0
        await self.build()
        uploaded = await self.upload_due()
        async with self.pool.acquire() as conn:
            gauges = await conn.fetchrow(sql.GAUGES, self.rail_name)
        self.counts.in_flight.set(gauges["in_flight"])
        self.counts.stuck.set(gauges["stuck"])
        return uploaded

    async def build(self) -> str | None:
        """Store one file of the pending instructions (and put them in it); its MsgId. A
        transfer that cannot be written in a file fails its settlement alone, with why."""
        now = await self.today()
        day = execution_date(now, self.files.cutoff)
        async with self.pool.acquire() as conn, conn.transaction():
            writable = await conn.fetch(sql.DUE_FOR_A_FILE, self.rail_name, self.files.file_size)
            unwritable: dict[uuid.UUID, str] = {}
            try:
                msg_id = await self._store(conn, writable, day, now) if writable else None
            except Pain001Refused:  # built before anything is written: try each one alone
                unwritable = {r["settlement_id"]: w for r in writable if (w := _unwritable(r, day))}
                writable = [row for row in writable if row["settlement_id"] not in unwritable]
                msg_id = await self._store(conn, writable, day, now) if writable else None
            claimed = await conn.fetch(sql.CLAIM_UNWRITABLE, list(unwritable), self.worker)
            sids = [r["settlement_id"] for r in claimed] + [r["settlement_id"] for r in writable]
            moves = [Move(sid, SETTLEMENT_AFTER[E.CLAIM]) for sid in sids]
            await apply_transitions(conn, moves, actor=self.worker, now=utc_now())
        for row in claimed:
            why = f"cannot be paid by SEPA credit transfer: {unwritable[row['settlement_id']]}"
            result = RailResult(RailOutcome.REFUSED, detail=why)
            await self.records.refused(instruction_of(row), int(row["fence"]), result)
        if msg_id is not None:
            log.info("payment file %s stored: %d transfers for %s", msg_id, len(writable), day)
            failpoint("files.after_build")  # stored, nothing uploaded yet
        return msg_id

    async def _store(
        self, conn: asyncpg.Connection, rows: list[asyncpg.Record], day: date, now: datetime
    ) -> str:
        """Build the file of `rows` (Pain001Refused, having written nothing, if it cannot be
        written), store it and put the instructions in it."""
        transfers = [_transfer(row, day) for row in rows]
        built = build_pain001(
            self.files.debtor, transfers, batch_booking=self.files.batch_booking, created_at=now
        )
        digest = hashlib.sha256(built.data).hexdigest()
        total = sum(t.amount for t in transfers)
        await conn.execute(
            sql.STORE_FILE,
            built.msg_id,
            self.rail_name,
            built.data,
            digest,
            len(rows),
            total,
            utc_now(),
            day,
        )
        sids = [row["settlement_id"] for row in rows]
        await conn.fetch(sql.PUT_IN_FILE, sids, built.msg_id, self.worker)
        return built.msg_id

    async def upload_due(self) -> int:
        """Upload every stored file not yet taken whose turn it is; how many went out."""
        p = self.policy
        lease = LeaseClock(p.lease_seconds, p.call_seconds)
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                sql.CLAIM_UPLOADS,
                self.rail_name,
                p.lease_seconds,
                self.worker,
                self.files.uploads_per_tick,
            )
        sent = 0
        for row in rows:
            sent += await self._upload(row, lease)
        return sent

    async def _upload(self, row: asyncpg.Record, lease: LeaseClock) -> int:
        msg_id, fence = row["msg_id"], int(row["fence"])
        if not lease.time_for_a_call():
            return 0
        failpoint("files.before_upload")
        generation = self.breaker.generation
        with send_gate.guarded(lease.time_for_a_call) as gate:
            upload = await self.bank.upload(bytes(row["content"]))
        if gate.refused:
            log.info("payment file %s not uploaded: the lease ran out before the write", msg_id)
            return 0
        self.counts.called(upload.outcome)
        self.breaker.record(upload.outcome, generation)
        failpoint("files.after_upload")  # the bank answered; nothing of it is recorded
        if upload.outcome is RailOutcome.ACCEPTED:
            await self._taken(msg_id, fence, upload)
        elif upload.outcome is RailOutcome.REFUSED:
            await self._refused(msg_id, fence, upload)
        else:
            await self._retry(msg_id, fence, int(row["attempts"]), upload)
        return 1

    async def _taken(self, msg_id: str, fence: int, upload: Upload) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            recorded = await conn.fetchval(
                sql.RECORD_TAKEN, msg_id, fence, upload.bank_file_id, upload.detail
            )
            if recorded is None:
                self.counts.fence_rejections.inc()
                return  # another relay holds the file now; its record stands
            rows = await conn.fetch(sql.IN_FILE, msg_id)
        log.info("payment file %s taken by the bank (%s)", msg_id, upload.detail)
        await self.records.transferred(
            [
                (
                    row["settlement_id"],
                    int(row["fence"]),
                    RailResult(RailOutcome.ACCEPTED, end_to_end_id(str(row["settlement_id"]))),
                )
                for row in rows
            ]
        )

    async def _refused(self, msg_id: str, fence: int, upload: Upload) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            recorded = await conn.fetchval(sql.RECORD_REFUSED, msg_id, fence, upload.detail)
            rows = await conn.fetch(sql.IN_FILE, msg_id) if recorded else []
        if recorded is None:
            self.counts.fence_rejections.inc()
            return
        log.warning("payment file %s refused by the bank: %s", msg_id, upload.detail)
        result = RailResult(RailOutcome.REFUSED, detail=f"the bank refused the file: {upload}")
        for row in rows:
            await self.records.refused(instruction_of(row), int(row["fence"]), result)

    async def _retry(self, msg_id: str, fence: int, attempts: int, upload: Upload) -> None:
        p = self.policy
        delay = backoff(attempts, p.backoff_base, p.backoff_cap, self._rng)
        async with self.pool.acquire() as conn:
            marked = await conn.fetchval(sql.RETRY_UPLOAD, msg_id, fence, delay, upload.detail)
        if marked is None:
            self.counts.fence_rejections.inc()
        log.info("payment file %s: %s, uploaded again in %.1f s", msg_id, upload.detail, delay)


def _unwritable(row: asyncpg.Record, day: date) -> str | None:
    """Why this instruction cannot be written in a payment file, if it cannot."""
    try:
        build_pain001(UNWRITTEN_DEBTOR, [_transfer(row, day)], batch_booking=False, created_at=NOON)
    except Pain001Refused as e:
        return "; ".join(e.reasons)
    return None


def _transfer(row: asyncpg.Record, day: date) -> CreditTransfer:
    return CreditTransfer(
        end_to_end_id=end_to_end_id(str(row["settlement_id"])),
        amount=row["amount"],
        creditor_name=row["payee"],
        creditor_iban=row["destination"],
        remittance=row["reference"],
        execution_date=day,
    )

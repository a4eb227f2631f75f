"""Everything the rail holds, in one place: objects, money, keys, runs, files, the journal.

The core reads and changes it only under its lock. Every change worth keeping is noted in
the journal as it is made (`keep`, `changed`, and the book's and the timers' own notes), so
`replay` can rebuild the same state at the next start.
"""

from __future__ import annotations

import os
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from railsim.announce import Withheld
from railsim.balance import BalanceBook
from railsim.effects import Effects
from railsim.faults import Dice, Faults
from railsim.habits import Habits
from railsim.idempotency import IdempotencyStore, Stored
from railsim.journal import Journal, object_record
from railsim.listing import Ordered
from railsim.objects import Charge, Payout, Transfer, Wire
from railsim.params import Kind
from railsim.replies import Delivery
from railsim.reports import ReportRun
from railsim.schedule import Timers


class FileStore:
    """Report files: kept in memory, or as files under the data directory."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = None if directory is None else directory / "files"
        self._held: dict[str, bytes] = {}

    def put(self, file_id: str, contents: bytes) -> None:
        """Keep `contents` as the file `file_id` (on disk whole before it is named)."""
        if self._directory is None:
            self._held[file_id] = contents
            return
        self._directory.mkdir(parents=True, exist_ok=True)
        partial = self._directory / f"{file_id}.partial"
        partial.write_bytes(contents)
        os.replace(partial, self._directory / f"{file_id}.csv")

    def clear(self) -> None:
        """Forget every file (a reset)."""
        self._held.clear()
        if self._directory is not None and self._directory.is_dir():
            for path in self._directory.iterdir():
                path.unlink()

    def get(self, file_id: str) -> bytes | None:
        """The contents of `file_id`, if it exists."""
        if self._directory is None:
            return self._held.get(file_id)
        if not file_id.replace("_", "").isalnum():
            return None  # an id never names a path outside the files directory
        path = self._directory / f"{file_id}.csv"
        return path.read_bytes() if path.is_file() else None


@dataclass
class Outflow:
    """Settle's money out per currency, as the account's own activity follows it."""

    since_charge: dict[str, int] = field(default_factory=dict)  # owed back by the next charge
    billable: dict[str, tuple[int, int]] = field(default_factory=dict)  # (volume, count)

    def add(self, currency: str, amount: int) -> None:
        """Settle moved `amount` out in `currency`."""
        self.since_charge[currency] = self.since_charge.get(currency, 0) + amount
        volume, count = self.billable.get(currency, (0, 0))
        self.billable[currency] = (volume + amount, count + 1)


class State:
    """The rail's holdings; `opened` is when the account (this state) began."""

    def __init__(
        self,
        journal: Journal,
        idempotency_window: float,
        outbox_limit: int,
        opened: float,
        seed: int = 0,
    ) -> None:
        self.journal = journal
        self.opened = opened
        self.rng = random.Random(seed)  # the account's own activity, repeatable by seed
        self.objects: dict[str, Transfer | Payout] = {}
        self.listed: dict[Kind, Ordered[Transfer | Payout]] = {k: Ordered() for k in Kind}
        self.charges: Ordered[Charge] = Ordered()
        self.reversed_by: dict[str, Transfer] = {}  # a reversal's id -> its transfer
        self.effects = Effects()
        self.timers = Timers(journal)
        self.book = BalanceBook(journal)
        self.keys = IdempotencyStore(idempotency_window)
        self.withheld = Withheld(outbox_limit)
        self.outbox: deque[Delivery] = deque(maxlen=outbox_limit)
        self.runs: Ordered[ReportRun] = Ordered()
        self.waiting_runs: list[ReportRun] = []  # pending, in the order they are due
        self.files = FileStore(journal.directory)
        self.outflow = Outflow()

    def keep(self, obj: Transfer | Payout | Charge, *, api: bool) -> None:
        """Take a new object; `api` when a call made it (then it counts as an effect)."""
        if isinstance(obj, Charge):
            self.charges.add(obj.id, obj)
        else:
            kind = Kind.TRANSFER if isinstance(obj, Transfer) else Kind.PAYOUT
            self.objects[obj.id] = obj
            self.listed[kind].add(obj.id, obj)
            if api:
                self.effects.count(kind, obj.metadata.get("settlement_id"))
        if self.journal.enabled:
            self.journal.note(object_record(obj, api=api))

    def source(self, source_id: str | None) -> Wire | None:
        """The object a balance transaction's `source` names, as Stripe expands it."""
        obj = self.objects.get(source_id or "")
        if obj is not None:
            return obj.to_wire()
        position = self.charges.position.get(source_id or "")
        if position is not None:
            return self.charges.records[position].to_wire()
        transfer = self.reversed_by.get(source_id or "")
        if transfer is None:
            return None
        return next(r.to_wire(transfer) for r in transfer.reversals if r.id == source_id)

    def changed(self, obj: Transfer | Payout | Charge) -> None:
        """Note that `obj` changed (its state now goes to the journal)."""
        if self.journal.enabled:
            self.journal.note(object_record(obj))

    def remember(self, key: str, stored: Stored) -> None:
        """Keep `stored` as the answer under idempotency `key`."""
        self.keys.remember(key, stored)
        if not self.journal.enabled:
            return
        reply = stored.reply
        self.journal.note(
            {
                "k": "key",
                "key": key,
                "fp": stored.fingerprint,
                "at": stored.stored_at,
                "status": reply.status,
                "body": reply.body.decode(),
                "req": reply.request_id,
                "id": reply.created_id,
            }
        )


@dataclass(frozen=True, slots=True)
class Rail:
    """What a due change reads and writes: the state, the fault settings and dice, the habits."""

    state: State
    faults: Faults
    dice: Dice
    habits: Habits = field(default_factory=Habits)

    @property
    def objects(self) -> dict[str, Transfer | Payout]:
        """The transfers and payouts, by id."""
        return self.state.objects

    @property
    def timers(self) -> Timers:
        """The changes due later."""
        return self.state.timers

    @property
    def book(self) -> BalanceBook:
        """The balance transactions."""
        return self.state.book

    @property
    def withheld(self) -> Withheld:
        """Events the webhook_drop fault kept back."""
        return self.state.withheld

"""The bank: its state, its clock and its faults behind one lock; what the HTTP layer calls.

Time moves the books: before anything is answered, every business day the clock has passed
is closed (its statements issued) and the next opened (its blocks and returns booked, the
reports due delivered), one transaction per day turned. Taking a file is one transaction too:
the file kept, its fates decided, its pain.002 issued, and what is due today booked.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import date
from pathlib import Path
from typing import NamedTuple

from banksim.booking import book_due
from banksim.clock import BankClock, Reading, WallClock, start_of
from banksim.faults import Faults
from banksim.intake import Taken, file_body, files_page, take
from banksim.ledger import effects
from banksim.outcomes import Loss, answer_loss
from banksim.pain001 import PaymentFile, read_payment_file
from banksim.reports import deliver_due, delivered_body, delivered_counts, delivered_page
from banksim.statements import close_day
from banksim.store import Store, set_meta
from services.domain.business_days import next_business_day


class Upload(NamedTuple):
    """A file taken, and whether its answer is to be lost."""

    taken: Taken
    loss: Loss | None


class Bank:
    """The simulated bank over its state directory."""

    def __init__(self, store: Store, clock: BankClock, faults: Faults) -> None:
        self.store = store
        self.clock = clock
        self._faults = faults
        self._lock = threading.Lock()
        self._books = date.fromisoformat(store.meta("books_date") or clock.start.isoformat())

    @classmethod
    def open(
        cls, directory: Path, wall: WallClock, day_seconds: float, start: date, faults: Faults
    ) -> Bank:
        """The bank kept in `directory`; on its first start, its calendar begins on `start`
        (moved on to a business day) now. A restart keeps the calendar it began; after a stop
        longer than a business day, it resumes at the start of the day after the last one its
        books were in, rather than closing every day it was down for."""
        store = Store(directory)
        epoch, first, seconds = (store.meta(k) for k in ("epoch", "start_date", "day_seconds"))
        if epoch is None or first is None or seconds is None:
            clock = BankClock(wall, wall.now(), start, day_seconds)
            with store.transaction() as db:
                set_meta(db, "start_date", clock.start.isoformat())
                _keep_clock(db, clock)
                set_meta(db, "books_date", clock.start.isoformat())
        else:
            clock = BankClock(wall, float(epoch), date.fromisoformat(first), float(seconds))
            if day_seconds != clock.day_seconds:
                clock.rescaled(day_seconds)
            books = date.fromisoformat(store.meta("books_date") or clock.start.isoformat())
            clock.resume_after(books)
            with store.transaction() as db:
                _keep_clock(db, clock)
        return cls(store, clock, faults)

    @property
    def faults(self) -> Faults:
        """The fault settings in force."""
        return self._faults

    def set_faults(self, faults: Faults) -> None:
        """Put `faults` in force for what happens from now on; decided fates stay."""
        with self._lock:
            self._faults = faults

    def catch_up(self) -> Reading:
        """Turn every business day the clock has passed; the clock's reading after."""
        with self._lock:
            return self._catch_up()

    def take_file(self, body: bytes) -> Upload:
        """Take a pain.001 file; FileRefused or DuplicateFile if the bank does not."""
        return self.take(body, read_payment_file(body))

    def take(self, body: bytes, payment: PaymentFile) -> Upload:
        """Take the file `body`, already read into `payment` (`read_payment_file`, which the
        caller may run off its event loop); DuplicateFile if the bank does not."""
        with self._lock:
            now = self._catch_up()
            with self.store.transaction() as db:
                taken = take(db, body, payment, now, self._faults)
                book_due(db, now.business_date, now.time, self._faults)
                deliver_due(db, now.business_date)
            return Upload(taken, answer_loss(payment.msg_id, self._faults))

    def advance(self, days: int = 1) -> Reading:
        """Begin the business day `days` after today at once, turning the days between."""
        with self._lock:
            self.clock.advance(days)
            with self.store.transaction() as db:
                _keep_clock(db, self.clock)
            return self._catch_up()

    def files(self, after: int, limit: int) -> dict[str, object]:
        """A page of the files taken (see `banksim.intake.files_page`)."""
        with self._lock:
            return files_page(self.store.db, after, limit)

    def file(self, file_id: str) -> bytes:
        """A taken file's bytes."""
        with self._lock:
            return file_body(self.store.db, file_id)

    def reports(self, after: int, limit: int, kind: str | None) -> dict[str, object]:
        """A page of the delivered reports (see `banksim.reports.delivered_page`)."""
        with self._lock:
            return delivered_page(self.store.db, after, limit, kind)

    def report(self, report_id: str) -> bytes:
        """A delivered report's bytes."""
        with self._lock:
            return delivered_body(self.store.db, report_id)

    def effects(self) -> dict[str, dict[str, int]]:
        """Transfer debits and returns booked, per EndToEndId."""
        with self._lock:
            return effects(self.store.db)

    def report_counts(self) -> dict[str, int]:
        """Reports delivered, per kind."""
        with self._lock:
            return delivered_counts(self.store.db)

    def close(self) -> None:
        """Close the state database."""
        with self._lock:
            self.store.close()

    def _catch_up(self) -> Reading:
        now = self.clock.read()
        while self._books < now.business_date:
            day, following = self._books, next_business_day(self._books)
            with self.store.transaction() as db:
                close_day(db, day, self._faults)
                set_meta(db, "books_date", following.isoformat())
                book_due(db, following, start_of(following), self._faults)
                deliver_due(db, following)
            self._books = following
        return now


def _keep_clock(db: sqlite3.Connection, clock: BankClock) -> None:
    set_meta(db, "epoch", repr(clock.epoch))
    set_meta(db, "day_seconds", repr(clock.day_seconds))

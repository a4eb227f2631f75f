"""What every call to the simulator's core goes through: one lock, the clock, due changes.

Every public method of the core takes the lock (`_locked`), so concurrent requests under one
key cannot both create; on leaving it the journal lines the call caused are written, before
the caller can answer. Delayed changes (payouts, reversals, the account's own activity,
report runs) are applied whenever the core is next touched (`_advance`), so no thread or
event loop is needed to drive it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from railsim import activity
from railsim.clock import Clock, SystemClock
from railsim.errors import ApiError
from railsim.faults import Dice, Faults
from railsim.habits import Habits
from railsim.journal import Journal
from railsim.listing import Ordered, R, page
from railsim.objects import Wire, json_bytes, new_id
from railsim.params import decode
from railsim.replay import journal_records, replay
from railsim.replies import Reply, api_error, error_reply
from railsim.reports import report_csv
from railsim.state import Rail, State
from railsim.statement import Causes
from railsim.timers import apply_due

Pairs = Iterable[tuple[str, str]]


class Guarded:
    """The state of the rail behind its lock, with the clock, faults and habits it runs by."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        faults: Faults | None = None,
        idempotency_window: float = 86400.0,
        outbox_limit: int = 10_000,
        habits: Habits | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._initial_faults = faults or Faults()
        self._faults = self._initial_faults
        self._dice = Dice(self._faults.seed)
        self._habits = habits or Habits()
        self._window = idempotency_window
        self._outbox_limit = outbox_limit
        self._journal = Journal(data_dir)
        records = journal_records(data_dir) if data_dir is not None else []
        self._state = self._opened(records)

    @property
    def habits(self) -> Habits:
        """The account's habits."""
        return self._habits

    def _opened(self, records: list[Wire]) -> State:
        """A state read back from journal `records`, or a fresh account's; its activity on."""
        now = self.clock.now()
        state = State(self._journal, self._window, self._outbox_limit, now, self._faults.seed)
        if records:
            replay(records, state)
        else:
            self._journal.note({"k": "open", "at": now})
        state.book.mature(now)
        if self._habits.active:
            activity.start(Rail(state, self._faults, self._dice, self._habits), now)
        self._journal.write()
        return state

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the lock; on leaving, write the journal lines the call caused."""
        with self._lock:
            try:
                yield
            finally:
                self._journal.write()

    def _rail(self) -> Rail:
        return Rail(self._state, self._faults, self._dice, self._habits)

    def _advance(self) -> float:
        now = self.clock.now()
        state = self._state
        state.outbox.extend(apply_due(self._rail(), now))
        state.book.mature(now)
        while state.waiting_runs and state.waiting_runs[0].due <= now:
            self._complete_run(now)
        return now

    def _complete_run(self, now: float) -> None:
        """Render the first waiting report run and put its file in the store: succeeded."""
        state = self._state
        run = state.waiting_runs.pop(0)
        charges = {c.id: c for c in state.charges.records}
        book = state.book
        causes = Causes(state.objects, charges, book.swept, book.find, state.reversed_by)
        contents = report_csv(run, state.book.transactions.records, causes).encode()
        file_id = new_id("file")
        state.files.put(file_id, contents)
        run.status, run.succeeded_at = "succeeded", int(run.due)
        run.file = {"id": file_id, "size": len(contents), "created": int(now)}
        if self._journal.enabled:
            self._journal.note(run.record())

    def _list(
        self,
        url: str,
        filters: frozenset[str],
        ordered: Callable[[], Ordered[R]],
        pairs: Pairs,
        read: Callable[[R, str], object],
        wire: Callable[[R], Wire],
    ) -> Reply:
        pairs = list(pairs)
        request_id = new_id("req")
        with self._locked():
            self._advance()
            subject = f"list:{url.removeprefix('/v1/')}:{sorted(pairs)}"
            if self._dice.chance("fail_before", subject, self._faults.fail_before):
                return api_error(request_id)
            try:
                listed = page(url, filters, ordered(), decode(pairs), read=read, wire=wire)
            except ApiError as e:
                return error_reply(e, request_id)
            return Reply(200, json_bytes(listed), request_id)

    def _one(self, subject: str, missing: str, found: Callable[[], Wire | None]) -> Reply:
        """One object read under the lock, or Stripe's 404 with the message `missing`."""
        request_id = new_id("req")
        with self._locked():
            self._advance()
            if self._dice.chance("fail_before", subject, self._faults.fail_before):
                return api_error(request_id)
            obj = found()
            if obj is None:
                error = ApiError(missing, status=404, code="resource_missing", param="id")
                return error_reply(error, request_id)
            return Reply(200, json_bytes(obj), request_id)

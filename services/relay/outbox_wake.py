"""When the outbox publisher looks for rows, and when writers need not wake it.

Every statement that writes outbox rows notifies `settle_outbox` at commit (migration 0002),
and PostgreSQL serialises the commits of notifying transactions on one lock, cluster-wide:
under load that lock queues every writer's commit behind every other's. A publisher that is
busy does not need the notifications, since it is looking anyway. So while its wake-ups keep
finding rows (`BUSY_ROWS` or more), it promises to look again within `PROMISE_S`
(`outbox_publishing.busy_until`, one row of an unlogged table, stamped again before the
promise runs out) and looks every `LOOK_S` on its own clock; the trigger notifies only when
no promise stands (migration 0031). Once its wake-ups find little, it stops stamping and
keeps looking on its clock until the promise has run out and a `PROMISE_S` more has passed:
a writer that saw the promise and committed late is still seen. Then it waits for
notifications again, and polls.

A publisher that dies with a promise standing leaves writers silent for `PROMISE_S` at most;
another replica's poll, or the first notification after it, picks the rows up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

BUSY_ROWS = 20  # a wake-up publishing this many rows means the outbox is busy
PROMISE_S = 0.05  # how soon a busy publisher promises to look again
LOOK_S = 0.01  # how often it looks while a promise stands

# One row: until when a publisher promised to look again. Unlogged: it is not worth a WAL
# record, and after a crash the table is empty, which means no promise.
PROMISE = """
INSERT INTO outbox_publishing (id, busy_until) VALUES (true, now() + make_interval(secs => $1))
ON CONFLICT (id) DO UPDATE
   SET busy_until = greatest(outbox_publishing.busy_until, EXCLUDED.busy_until)
"""


class Wakeups:
    """A publisher's promise to writers, and how long it may wait for a notification."""

    def __init__(
        self,
        poll_seconds: float,
        promise_seconds: float = PROMISE_S,
        look_seconds: float = LOOK_S,
        busy_rows: int = BUSY_ROWS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.poll_seconds = poll_seconds
        self.promise_seconds = promise_seconds
        self.look_seconds = look_seconds
        self.busy_rows = busy_rows
        self._clock = clock
        self._stamped = float("-inf")  # when the standing promise was last stamped

    def stamp_due(self, published: int) -> bool:
        """Whether to stamp the promise now, after a wake-up that published `published` rows:
        when the outbox is busy and half the promise has run."""
        busy = published >= self.busy_rows
        return busy and self._clock() - self._stamped >= self.promise_seconds / 2

    def stamped(self) -> None:
        """The promise was stamped just now (after the statement returned, so no sooner than
        the database's own stamp)."""
        self._stamped = self._clock()

    def timeout(self) -> float:
        """How long to wait for a notification before looking again: `look_seconds` while a
        promise stands or has just run out, the poll interval otherwise."""
        kept_until = self._stamped + self.promise_seconds + self.promise_seconds
        return self.look_seconds if self._clock() < kept_until else self.poll_seconds

"""Changes due at a later time on the simulator's clock, earliest first, kept in the journal."""

from __future__ import annotations

import heapq
import itertools
from enum import Enum

from railsim.journal import Journal


class Action(Enum):
    """A change due at some time."""

    PAY = "pay"  # payout pending or in_transit -> paid
    FAIL_CLOSED = "fail_closed"  # payout -> failed, account_closed
    FAIL_PROCESSING = "fail_processing"  # payout -> failed, could_not_process
    REVERSE = "reverse"  # transfer reversed in full, or paid payout returned (-> failed)
    REVERSE_PART = "reverse_part"  # transfer reversed in part: half its amount, rounded down
    REVERSE_PIECE = "reverse_piece"  # one of the n equal parts a transfer is reversed in
    TRANSIT = "transit"  # payout pending -> in_transit
    # The account's own activity (habits.py): scheduled afresh at every start, never journaled
    CHARGE = "charge"
    DESTINATION_CHARGE = "destination_charge"
    OTHER_TRANSFER = "other_transfer"
    CONNECT_FEE = "connect_fee"
    AUTOMATIC_PAYOUT = "automatic_payout"


ACTIVITY = frozenset(
    {
        Action.CHARGE,
        Action.DESTINATION_CHARGE,
        Action.OTHER_TRANSFER,
        Action.CONNECT_FEE,
        Action.AUTOMATIC_PAYOUT,
    }
)


class Timers:
    """Changes waiting for their time, earliest first; each one's scheduling and application
    noted in the journal, so a restart resumes those still waiting."""

    def __init__(self, journal: Journal | None = None) -> None:
        self._heap: list[tuple[float, int, Action, str]] = []
        self._order = itertools.count()  # ties keep the order they were scheduled in
        self._journal = journal or Journal()

    def add(self, due: float, action: Action, object_id: str) -> None:
        """Schedule `action` on `object_id` at `due` (Unix seconds)."""
        seq = next(self._order)
        heapq.heappush(self._heap, (due, seq, action, object_id))
        if self._journal.enabled and action not in ACTIVITY:
            self._journal.note(
                {"k": "timer", "seq": seq, "due": due, "action": action.value, "id": object_id}
            )

    def pop_due(self, now: float) -> tuple[float, Action, str] | None:
        """Remove and return the earliest change due by `now`, if any."""
        if not self._heap or self._heap[0][0] > now:
            return None
        at, seq, action, object_id = heapq.heappop(self._heap)
        if self._journal.enabled and action not in ACTIVITY:
            self._journal.note({"k": "fired", "seq": seq})
        return at, action, object_id

    def restore(self, waiting: dict[int, tuple[float, str, str]]) -> None:
        """Take back the changes a journal left waiting ({seq: (due, action, object id)})."""
        for seq, (due, action, object_id) in waiting.items():
            heapq.heappush(self._heap, (due, seq, Action(action), object_id))
        self._order = itertools.count(max(waiting, default=-1) + 1)

"""Which idempotency records may be deleted: a pure rule, mirrored by `key_cleanup.SWEEP_BATCH`.

    the record                                         kept or deleted
    younger than the retention                         kept: it replays, refuses or answers 410
    in flight (a request holds it), whatever its age   kept: the holder or a takeover ends it
    its settlement not final (accepted ... review)     kept until the settlement is final
    otherwise                                          deleted

The retention may not be shorter than replay + tombstone: past that age `idempotency.decide`
already treats the key as never seen, so deleting the record changes no answer; deleting it
earlier would turn a 410 (or a replay) into a second execution. A key whose request was
refused (409 duplicate reference) has no settlement and goes with its age alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from services.domain.settlement import TERMINAL, SettlementStatus
from services.ledger.idempotency import KeyState

DEFAULT_RETENTION = timedelta(hours=48)
DEFAULT_BATCH = 1000
MAX_BATCH = 50_000


@dataclass(frozen=True, slots=True)
class KeyRetention:
    """How long idempotency records are kept, and how many one cleanup statement may delete."""

    retention: timedelta  # a record's age, from its first use, at which it may go
    batch: int = DEFAULT_BATCH  # records one statement examines (and so deletes) at most

    def __post_init__(self) -> None:
        if self.retention <= timedelta(0):
            raise ValueError("retention must be positive, e.g. timedelta(hours=48)")
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"batch must be between 1 and {MAX_BATCH}, e.g. {DEFAULT_BATCH}")

    def cutoff(self, now: datetime) -> datetime:
        """Records first used at or before this instant are old enough to go."""
        return now - self.retention


def key_retention(
    replay: timedelta, tombstone: timedelta, retention: timedelta, batch: int = DEFAULT_BATCH
) -> KeyRetention:
    """The retention for these idempotency windows; refused when it would cut a window short."""
    if retention < replay + tombstone:
        raise ValueError(
            f"retention {retention} is shorter than replay + tombstone ({replay + tombstone}); "
            "keep records at least that long, or a retried request would run twice"
        )
    return KeyRetention(retention, batch)


def deletable(
    policy: KeyRetention,
    state: KeyState,
    created_at: datetime,
    settlement: SettlementStatus | None,
    now: datetime,
) -> bool:
    """Whether a record may be deleted at `now`; `settlement` is the status of the settlement
    booked under the key, None when the request booked none."""
    if created_at > policy.cutoff(now) or state is not KeyState.COMPLETED:
        return False
    return settlement is None or settlement in TERMINAL


# The statuses in which a settlement is final, as stored: the SQL's own copy of the rule.
FINAL_STATUSES: tuple[str, ...] = tuple(sorted(str(s) for s in TERMINAL))

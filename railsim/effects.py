"""The rail's own count of money movements: the ground truth for "at most one effect"."""

from __future__ import annotations

import itertools
from collections import Counter

from railsim.objects import Wire
from railsim.params import Kind


class Effects:
    """Every created transfer and payout, counted per settlement id found in its metadata."""

    def __init__(self) -> None:
        self._by_settlement: dict[str, Counter[Kind]] = {}
        self._total = 0
        self._unattributed = 0

    def count(self, kind: Kind, settlement_id: str | None) -> None:
        """Record one created object, whatever its idempotency key did."""
        self._total += 1
        if settlement_id is None:
            self._unattributed += 1
            return
        self._by_settlement.setdefault(settlement_id, Counter())[kind] += 1

    def of(self, settlement_id: str) -> dict[str, int]:
        """{"transfers": n, "payouts": n} for one settlement (zeros if the rail never saw it)."""
        counts = self._by_settlement.get(settlement_id, Counter())
        return {kind.value: counts[kind] for kind in Kind}

    def summary(self, offset: int = 0, limit: int | None = None) -> Wire:
        """Counts for every settlement, the total, and objects without a settlement id; given
        a `limit`, only the settlements from `offset` on in the order first seen, and the
        offset of the next page (None after the last), so a reader holds one page at a time.
        Settlements are never forgotten but by a reset, so offsets stay put meanwhile."""
        if limit is None:
            page, following = list(self._by_settlement), None
        else:
            page = list(itertools.islice(self._by_settlement, offset, offset + limit))
            more = offset + len(page) < len(self._by_settlement)
            following = offset + len(page) if more else None
        summary: Wire = {
            "by_settlement": {sid: self.of(sid) for sid in page},
            "total": self._total,
            "unattributed": self._unattributed,
        }
        if limit is not None:
            summary["next_offset"] = following
        return summary

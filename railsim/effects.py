"""The rail's own count of money movements: the ground truth for "at most one effect"."""

from __future__ import annotations

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

    def summary(self) -> Wire:
        """Counts for every settlement, the total, and objects without a settlement id."""
        return {
            "by_settlement": {sid: self.of(sid) for sid in self._by_settlement},
            "total": self._total,
            "unattributed": self._unattributed,
        }

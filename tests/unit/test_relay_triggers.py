"""Pass 1's trigger reads only `created` events and skips what it cannot decode."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from aiokafka import ConsumerRecord

from services.relay.triggers import OffsetCommits, created_settlements
from services.shared import avro


def record(value: bytes) -> ConsumerRecord:
    return ConsumerRecord("settlement.events", 0, 0, 0, 0, None, value, None, 0, len(value), [])


def event(settlement_id: str, kind: str) -> bytes:
    return avro.encode("SettlementEvent", {
        "event_id": str(uuid.uuid4()), "settlement_id": settlement_id, "tenant": "acme",
        "reference": "payout-42", "type": kind, "sequence": 1, "amount": 12_345,
        "currency": "EUR", "occurred_at": datetime(2026, 11, 26, tzinfo=UTC),
        "rail_reference": None, "reason": None,
        "status": "accepted" if kind == "created" else kind,
    })  # fmt: skip


def test_only_created_events_trigger_dispatch_and_garbage_is_skipped() -> None:
    first, second, paid = (str(uuid.uuid4()) for _ in range(3))
    records = [
        record(event(first, "created")),
        record(b"\x00not avro"),
        record(event(paid, "paid")),
        record(event(second, "created")),
    ]
    assert created_settlements(records) == [first, second]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_offsets_are_committed_at_most_once_an_interval_and_only_after_a_dispatch() -> None:
    clock = Clock()
    commits = OffsetCommits(1.0, clock)
    clock.now = 5.0
    assert not commits.due()  # nothing dispatched: nothing to commit
    commits.dispatched()
    assert commits.due()
    commits.dispatched()
    clock.now = 5.9
    assert not commits.due()  # within the interval of the last commit
    clock.now = 6.0
    assert commits.due()
    assert not commits.due()  # committed; nothing dispatched since

"""Pass 1's trigger reads only `created` events, passes poison over, keeps polling
while earlier events are at the rail, and commits no offset past an undispatched event."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest
from aiokafka import ConsumerRecord, TopicPartition

from services.contracts import avro
from services.relay import triggers
from services.relay.metrics import create_metrics
from services.relay.triggers import DispatchesInOrder, OffsetCommits, created_settlements
from tests.events import settlement_event
from tests.waiting import eventually


def record(value: bytes, partition: int = 0, offset: int = 0) -> ConsumerRecord:
    return ConsumerRecord(
        "settlement.events", partition, offset, 0, 0, None, value, None, 0, len(value), []
    )


def event(settlement_id: str, kind: str) -> bytes:
    return avro.encode("SettlementEvent", settlement_event(kind, settlement_id=settlement_id))


def test_only_created_events_trigger_dispatch_and_garbage_is_skipped() -> None:
    first, second, paid = (str(uuid.uuid4()) for _ in range(3))
    records = [
        record(event(first, "created")),
        record(b"\x00not avro"),
        record(event(paid, "paid")),
        record(event(second, "created")),
    ]
    assert created_settlements(records).settlement_ids == [first, second]


def test_poison_is_passed_over_with_where_it_sits_and_why_and_the_rest_still_dispatches() -> None:
    good = str(uuid.uuid4())
    records = [
        record(event("settlement-42", "created"), partition=3, offset=17),
        record(event(str(uuid.uuid4()), "created")[:-9], partition=3, offset=18),
        record(event(str(uuid.uuid4()), "refund_scheduled"), partition=3, offset=19),
        record(event(good.upper(), "created"), partition=3, offset=20),
    ]
    created = created_settlements(records)
    assert created.settlement_ids == [good]  # in canonical form, as the books hold it
    assert [(p.partition, p.offset, p.reason) for p in created.poison] == [
        (3, 17, "invalid_settlement_id"),
        (3, 18, "undecodable"),
    ]
    assert "settlement-42" in created.poison[0].detail


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


P0, P1 = TopicPartition("settlement.events", 0), TopicPartition("settlement.events", 1)


async def test_a_batch_finished_early_releases_no_offset_before_the_batches_polled_before_it() -> (
    None
):
    first, second = asyncio.Event(), asyncio.Event()
    batches = DispatchesInOrder(limit=4)
    batches.start(first.wait(), {P0: 10})
    batches.start(second.wait(), {P0: 20, P1: 5})
    second.set()
    await asyncio.sleep(0)
    assert not await batches.settle()
    assert batches.committable({P0, P1}) == {}  # the first batch's claims are not durable yet
    first.set()
    await asyncio.sleep(0)
    assert await batches.settle()
    assert batches.committable({P0, P1}) == {P0: 20, P1: 5}
    assert batches.committable({P0, P1}) == {}  # released once


async def test_polling_waits_only_once_the_limit_of_batches_is_dispatching() -> None:
    first, second = asyncio.Event(), asyncio.Event()
    batches = DispatchesInOrder(limit=2)
    batches.start(first.wait(), {P0: 1})
    assert not await batches.settle()  # one of two running: the next poll goes ahead
    batches.start(second.wait(), {P0: 2})
    settling = asyncio.ensure_future(batches.settle())
    await asyncio.sleep(0.01)
    assert not settling.done()  # two running: no third poll until one of them is dispatched
    first.set()
    assert await asyncio.wait_for(settling, 1.0)
    assert batches.committable({P0, P1}) == {P0: 1}


async def test_a_batch_held_at_the_rail_holds_one_slot_not_the_poll() -> None:
    held = asyncio.Event()  # a call whose answer the rail holds back until the call times out
    batches = DispatchesInOrder(limit=2)
    batches.start(held.wait(), {P0: 1})
    for offset in (2, 3, 4):  # later batches are dispatched while the first one waits
        batches.start(asyncio.sleep(0), {P0: offset})
        assert not await asyncio.wait_for(batches.settle(), 0.5)
    assert batches.committable({P0}) == {}  # but no offset passes the held batch's
    held.set()
    await asyncio.sleep(0)
    assert await batches.settle()
    assert batches.committable({P0}) == {P0: 4}


async def test_a_failure_that_must_stop_the_relay_is_raised_and_its_offsets_never_released() -> (
    None
):
    async def broken() -> None:
        raise ValueError("a settlement changed under its row lock")

    batches = DispatchesInOrder(limit=4)
    batches.start(broken(), {P0: 7})
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="row lock"):
        await batches.settle()
    assert batches.committable({P0, P1}) == {}


async def test_offsets_of_a_revoked_partition_are_left_to_its_new_owner() -> None:
    batches = DispatchesInOrder(limit=4)
    batches.start(asyncio.sleep(0), {P0: 3, P1: 4})
    await asyncio.sleep(0.01)
    assert await batches.settle()
    assert batches.committable({P1}) == {P1: 4}


async def test_a_session_that_ends_sees_its_dispatches_through_rather_than_abandon_claims() -> None:
    at_rail = asyncio.Event()
    batches = DispatchesInOrder(limit=4)
    batches.start(at_rail.wait(), {P0: 3})
    finishing = asyncio.ensure_future(batches.finish())
    await asyncio.sleep(0.01)
    assert not finishing.done()  # the claim is still at the rail
    at_rail.set()
    await asyncio.wait_for(finishing, 1.0)
    assert batches.committable({P0}) == {}  # a finished session commits nothing more


class FakeConsumer:
    """Hands out scripted polls, then nothing; records the offsets committed. Each partition's
    end is `ends` once a poll fetched from it; its position follows the records handed out."""

    def __init__(
        self,
        polls: list[dict[TopicPartition, list[ConsumerRecord]]],
        ends: dict[TopicPartition, int] | None = None,
    ) -> None:
        self.polls = polls
        self.committed: list[dict[TopicPartition, int]] = []
        self.ends = ends or {}
        self.positions: dict[TopicPartition, int] = {}

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.ends.get(tp) if tp in self.positions else None

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def getmany(
        self, timeout_ms: int, max_records: int
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        if self.polls:
            poll = self.polls.pop(0)
            for tp, records in poll.items():
                self.positions[tp] = records[-1].offset + 1
            return poll
        await asyncio.sleep(timeout_ms / 1000)
        return {}

    def assignment(self) -> set[TopicPartition]:
        return {P0, P1}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.committed.append(offsets)


class HeldDispatcher:
    """Holds the first settlement's dispatch until released; records the order of starts."""

    def __init__(self, held: str) -> None:
        self.held = held
        self.release = asyncio.Event()
        self.started: list[str] = []

    async def dispatch_many(self, settlement_ids: Sequence[str]) -> None:
        self.started.extend(settlement_ids)
        if self.held in settlement_ids:
            await self.release.wait()


async def test_events_polled_while_a_batch_is_at_the_rail_are_dispatched_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(triggers, "POLL_MS", 10)
    monkeypatch.setattr(triggers, "COMMIT_SECONDS", 0.0)
    slow, quick = str(uuid.uuid4()), str(uuid.uuid4())
    consumer = FakeConsumer(
        [
            {P0: [record(event(slow, "created"), 0, 41)]},
            {P1: [record(event(quick, "created"), 1, 8)]},
        ]
    )
    dispatcher = HeldDispatcher(held=slow)
    running = asyncio.ensure_future(triggers.trigger_dispatch(lambda: consumer, dispatcher))  # type: ignore[arg-type, return-value]
    try:
        await eventually(lambda: quick in dispatcher.started, 1, "the second batch dispatched")
        assert dispatcher.started == [slow, quick]  # the second poll did not wait for the first
        await asyncio.sleep(0.05)  # polls and commit rounds pass meanwhile
        assert consumer.committed == []  # the first batch holds every offset back
        dispatcher.release.set()
        await eventually(lambda: consumer.committed, 1, "a commit")
        assert consumer.committed == [{P0: 42, P1: 9}]
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_the_triggers_report_how_far_behind_the_partition_ends_they_read() -> None:
    settlement = str(uuid.uuid4())
    # Fetched up to offset 41 of P0 (end 50) and 8 of P1 (end 12): 8 + 3 messages left.
    consumer = FakeConsumer(
        [
            {P0: [record(event(settlement, "created"), 0, 41)]},
            {P1: [record(event(settlement, "paid"), 1, 8)]},
        ],
        ends={P0: 50, P1: 12},
    )
    metrics = create_metrics()
    dispatcher = HeldDispatcher(held="none")
    running = asyncio.ensure_future(
        triggers.trigger_dispatch(lambda: consumer, dispatcher, metrics)  # type: ignore[arg-type, return-value]
    )
    lag = {"service": "relay", "topic": "settlement.events"}
    try:
        await eventually(
            lambda: (
                not consumer.polls and metrics.registry.get_sample_value("settle_consumer_lag", lag)
            ),
            1,
            "the lag reported after both polls",
        )
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert metrics.registry.get_sample_value("settle_consumer_lag", lag) == 11


class RevokedConsumer(FakeConsumer):
    """Its first partition was revoked after the poll; it refuses an empty commit, as
    aiokafka's commit does (ValueError)."""

    def assignment(self) -> set[TopicPartition]:
        return {P1}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            raise ValueError(offsets)
        await super().commit(offsets)


async def test_offsets_all_of_revoked_partitions_commit_nothing_and_the_relay_runs_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(triggers, "POLL_MS", 10)
    monkeypatch.setattr(triggers, "COMMIT_SECONDS", 0.0)
    settlement = str(uuid.uuid4())
    consumer = RevokedConsumer([{P0: [record(event(settlement, "created"), 0, 41)]}])
    dispatcher = HeldDispatcher(held="none")
    running = asyncio.ensure_future(triggers.trigger_dispatch(lambda: consumer, dispatcher))  # type: ignore[arg-type, return-value]
    try:
        await eventually(
            lambda: settlement in dispatcher.started and not consumer.polls, 1, "the dispatch"
        )
        await asyncio.sleep(0.1)  # polls, dispatches released and commits come due meanwhile
        assert not running.done(), running
        assert dispatcher.started == [settlement] and consumer.committed == []
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

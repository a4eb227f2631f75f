"""Group commit: concurrent callers share batches of bounded size, each gets its own answer,
and stopping answers every caller still waiting. No I/O; the batch function is a fake."""

from __future__ import annotations

import asyncio

import pytest

from services.platform.group_commit import GroupCommit


class Stopped(Exception):
    """What a caller left waiting by `stop` gets."""


class Books:
    """A batch function that records its batches and can be held inside one."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.running = 0
        self.most_running = 0
        self.hold = asyncio.Event()
        self.hold.set()

    async def commit(self, items: list[int]) -> list[int | Exception]:
        self.batches.append(items)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await self.hold.wait()
        finally:
            self.running -= 1
        if 13 in items and len(items) > 1:
            raise ValueError("a batch holding 13")
        return [ValueError(f"{n} refused") if n < 0 else n * 10 for n in items]


def group(books: Books, workers: int = 1, max_batch: int = 3) -> GroupCommit[int, int]:
    return GroupCommit(books.commit, workers=workers, max_batch=max_batch, stopping=Stopped)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_callers_waiting_together_share_batches_of_at_most_max_batch() -> None:
    books = Books()
    books.hold.clear()
    commits = group(books)
    first = asyncio.create_task(commits.submit(0))
    await settle()  # the first batch is running alone, held
    rest = [asyncio.create_task(commits.submit(n)) for n in range(1, 8)]
    await settle()
    books.hold.set()
    assert await asyncio.gather(first, *rest) == [n * 10 for n in range(8)]
    assert books.batches == [[0], [1, 2, 3], [4, 5, 6], [7]]


async def test_no_more_batches_run_at_once_than_workers() -> None:
    books = Books()
    books.hold.clear()
    commits = group(books, workers=2, max_batch=1)
    calls = [asyncio.create_task(commits.submit(n)) for n in range(6)]
    await settle()
    assert books.running == 2
    books.hold.set()
    await asyncio.gather(*calls)
    assert books.most_running == 2 and len(books.batches) == 6


async def test_each_caller_gets_its_own_answer_and_a_failed_batch_fails_all_of_it() -> None:
    books = Books()
    books.hold.clear()
    commits = group(books, max_batch=2)
    calls = [asyncio.create_task(commits.submit(n)) for n in (1, -2, 13, 4)]
    await settle()
    books.hold.set()
    answers = await asyncio.gather(*calls, return_exceptions=True)
    assert answers[0] == 10
    assert str(answers[1]) == "-2 refused"
    assert books.batches == [[1, -2], [13, 4]]
    assert [str(a) for a in answers[2:]] == ["a batch holding 13"] * 2


async def test_a_caller_that_has_gone_is_left_out_of_its_batch() -> None:
    books = Books()
    books.hold.clear()
    commits = group(books)
    first = asyncio.create_task(commits.submit(0))
    await settle()
    gone = asyncio.create_task(commits.submit(1))
    kept = asyncio.create_task(commits.submit(2))
    await settle()
    gone.cancel()
    books.hold.set()
    assert (await first, await kept) == (0, 20)
    assert books.batches == [[0], [2]]


async def test_stopping_answers_the_batch_in_flight_and_the_queue_and_refuses_more() -> None:
    books = Books()
    books.hold.clear()
    commits = group(books, max_batch=2)
    calls = [asyncio.create_task(commits.submit(n)) for n in range(5)]
    await settle()
    assert books.batches == [[0, 1]]  # running, held
    await commits.stop()
    answers = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 2)
    assert all(isinstance(a, Stopped) for a in answers), answers
    with pytest.raises(Stopped):
        await commits.submit(9)
    assert books.batches == [[0, 1]]


async def test_a_caller_after_a_quiet_spell_is_served_by_a_new_worker() -> None:
    books = Books()
    commits = group(books)
    assert await commits.submit(1) == 10
    await settle()
    assert await asyncio.wait_for(commits.submit(2), 2) == 20
    assert books.batches == [[1], [2]]


async def test_with_linger_callers_a_moment_apart_share_one_batch() -> None:
    books = Books()
    commits = GroupCommit(books.commit, workers=2, max_batch=3, stopping=Stopped, linger=0.05)
    first = asyncio.create_task(commits.submit(1))
    await settle()  # a worker is lingering for more
    assert books.batches == []
    second = asyncio.create_task(commits.submit(2))
    assert await asyncio.gather(first, second) == [10, 20]
    assert books.batches == [[1, 2]]


async def test_with_linger_a_full_batch_goes_at_once() -> None:
    books = Books()
    commits = GroupCommit(books.commit, workers=1, max_batch=3, stopping=Stopped, linger=60)
    calls = [asyncio.create_task(commits.submit(n)) for n in range(3)]
    assert await asyncio.wait_for(asyncio.gather(*calls), 2) == [0, 10, 20]
    assert books.batches == [[0, 1, 2]]


async def test_many_items_of_one_caller_share_batches_and_each_gets_its_own_answer() -> None:
    books = Books()
    commits = group(books, workers=2, max_batch=3)
    answers = await commits.submit_many([1, -2, 3, 4, 5, 6, 7])
    assert [a if isinstance(a, int) else str(a) for a in answers] == [
        10,
        "-2 refused",
        30,
        40,
        50,
        60,
        70,
    ]
    assert sorted(n for batch in books.batches for n in batch) == [-2, 1, 3, 4, 5, 6, 7]
    assert max(map(len, books.batches)) == 3


async def test_many_items_submitted_after_stop_are_refused_at_once() -> None:
    commits = group(Books())
    await commits.stop()
    with pytest.raises(Stopped):
        await commits.submit_many([1, 2])

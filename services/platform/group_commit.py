"""Group commit: items of concurrent callers share one batch (one transaction, one commit).

Each caller hands its item to `GroupCommit.submit` and waits. Up to `workers` tasks, started
on demand, each take what is waiting, oldest first and at most `max_batch` items, and run the
batch function once on it: under load batches grow and the commit's cost is shared; alone, a
caller pays one batch of one. A worker ends when nothing waits, so an idle service holds no
task. The batch function answers each item with a result or the exception that item gets;
if it raises, every caller of the batch gets that exception. An item whose caller has gone
(its wait was cancelled) is left out of its batch. With `linger`, a worker that finds fewer
than `max_batch` items waits that long for more first: at moderate rates, callers that
arrive a few milliseconds apart then share a commit instead of paying one each.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
BatchFunction = Callable[[list[Item]], Awaitable[Sequence[Result | Exception]]]


class GroupCommit(Generic[Item, Result]):
    """Runs `commit` on batches of the items callers `submit`; see the module docstring.

    `stopping` makes the error a caller gets when `stop` leaves its item unanswered."""

    def __init__(
        self,
        commit: BatchFunction[Item, Result],
        *,
        workers: int,
        max_batch: int,
        stopping: Callable[[], Exception],
        linger: float = 0.0,
    ) -> None:
        if workers < 1 or max_batch < 1:
            raise ValueError("workers and max_batch: pass 1 or more")
        if linger < 0:
            raise ValueError("linger: pass 0 or more seconds")
        self._commit = commit
        self._workers = workers
        self._max_batch = max_batch
        self._stopping = stopping
        self._linger = linger
        self._waiting: collections.deque[tuple[Item, asyncio.Future[Result]]] = collections.deque()
        self._running = 0  # workers between their start and their last look at `_waiting`
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False

    async def submit(self, item: Item) -> Result:
        """`item`'s answer once its batch has run; raises the exception the batch gave it."""
        return await self._queue([item])[0]

    async def submit_many(self, items: Sequence[Item]) -> list[Result | BaseException]:
        """Each item's answer (or the exception its batch gave it), in order, as if each had
        been `submit`ted by a caller of its own; one wait, not a task per item."""
        return await asyncio.gather(*self._queue(items), return_exceptions=True)

    def _queue(self, items: Sequence[Item]) -> list[asyncio.Future[Result]]:
        if self._stopped:
            raise self._stopping()
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Result]] = [loop.create_future() for _ in items]
        self._waiting.extend(zip(items, futures, strict=True))
        for _ in range(min(len(items), self._workers - self._running)):
            self._running += 1
            task = asyncio.create_task(self._work())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return futures

    async def stop(self) -> None:
        """Stop the workers; every caller still waiting, in a running batch or queued, gets
        `stopping()`. Later submissions get it at once."""
        self._stopped = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        while self._waiting:
            _answer(self._waiting.popleft()[1], self._stopping())

    async def _work(self) -> None:
        try:
            while self._waiting:
                if self._linger and len(self._waiting) < self._max_batch:
                    await asyncio.sleep(self._linger)
                size = min(self._max_batch, len(self._waiting))
                batch = [self._waiting.popleft() for _ in range(size)]
                live = [(item, future) for item, future in batch if not future.done()]
                if live:
                    await self._run(live)
        finally:
            self._running -= 1

    async def _run(self, live: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        answers: Sequence[Result | Exception]
        try:
            answers = await self._commit([item for item, _ in live])
            if len(answers) != len(live):
                raise ValueError(f"the batch function answered {len(answers)} of {len(live)}")
        except asyncio.CancelledError:
            # Stopping: whoever waits on this batch hears so instead of waiting forever.
            for _, future in live:
                _answer(future, self._stopping())
            raise
        except Exception as e:  # noqa: BLE001 - not swallowed: every caller of the batch gets it
            answers = [e] * len(live)
        for (_, future), answer in zip(live, answers, strict=True):
            _answer(future, answer)


def _answer(future: asyncio.Future[Result], answer: Result | Exception) -> None:
    if future.done():  # the caller has gone
        return
    if isinstance(answer, Exception):
        future.set_exception(answer)
    else:
        future.set_result(answer)

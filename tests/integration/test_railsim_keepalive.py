"""The simulator's webhook client against receivers that answer in each of HTTP/1.1's ways:
connections kept and reused, closed by the receiver between posts, answers chunked or run to
the close, and receivers that never answer."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from railsim.errors import DeliveryError
from railsim.keepalive import KeepAliveClient

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
Answer = Callable[[bytes], bytes | None]  # request head -> bytes to write (None: say nothing)


@dataclass
class RawReceiver:
    """A receiver on raw sockets: answers each request with `answer(head)`; with `answers`
    set, a connection that has answered that many reads the next request and closes unanswered
    (a receiver closing an idle connection just as it is reused); with `hang_up` set, it
    closes right after each answer. Records connections opened and requests read."""

    answer: Answer
    answers: int | None = None
    hang_up: bool = False
    connections: int = 0
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            for answered in range(10_000):
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                self.requests.append((head, await reader.readexactly(length)))
                reply = self.answer(head)
                if reply is None:
                    await asyncio.sleep(60)
                if answered == self.answers:
                    break
                writer.write(reply or b"")
                await writer.drain()
                if self.hang_up:
                    break
        writer.close()


@contextlib.asynccontextmanager
async def receiving(receiver: RawReceiver) -> AsyncIterator[str]:
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1/webhooks/stripe?source=rail"
    finally:
        server.close()


def client(url: str) -> KeepAliveClient:
    return KeepAliveClient(url, {"Content-Type": "application/json"}, max_idle=4)


async def test_posts_reuse_one_kept_alive_connection_and_carry_the_body_and_headers() -> None:
    receiver = RawReceiver(lambda _: OK)
    async with receiving(receiver) as url:
        poster = client(url)
        signed = {"Stripe-Signature": "t=1"}
        statuses = [await poster.post(b'{"n":%d}' % n, signed) for n in range(5)]
        await poster.aclose()
    assert statuses == [200] * 5
    assert receiver.connections == 1
    head, body = receiver.requests[3]
    assert head.startswith(b"POST /v1/webhooks/stripe?source=rail HTTP/1.1\r\n")
    assert b"\r\nStripe-Signature: t=1\r\n" in head
    assert b"\r\nContent-Type: application/json\r\n" in head
    assert body == b'{"n":3}'


async def test_a_connection_the_receiver_closes_as_it_is_reused_costs_no_failed_attempt() -> None:
    receiver = RawReceiver(lambda _: OK, answers=1)
    async with receiving(receiver) as url:
        poster = client(url)
        statuses = [await poster.post(b"{}", {}) for _ in range(3)]
        await poster.aclose()
    assert statuses == [200] * 3
    assert receiver.connections == 3


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
    ],
    ids=["chunked", "empty"],
)
async def test_a_whole_answer_is_read_so_the_next_post_gets_its_own(answer: bytes) -> None:
    receiver = RawReceiver(lambda head: answer if b"first" in head else OK)
    async with receiving(receiver) as url:
        poster = client(url)
        first = await poster.post(b"{}", {"X-Attempt": "first"})
        second = await poster.post(b"{}", {"X-Attempt": "second"})
        await poster.aclose()
    assert (first, second) == (202, 200)
    assert receiver.connections == 1


async def test_an_answer_without_length_runs_to_the_close_and_the_next_post_reconnects() -> None:
    receiver = RawReceiver(lambda _: b"HTTP/1.1 503 Busy\r\n\r\nbusy", hang_up=True)
    async with receiving(receiver) as url:
        poster = client(url)
        assert [await poster.post(b"{}", {}) for _ in range(2)] == [503, 503]
        await poster.aclose()
    assert receiver.connections == 2


async def test_a_post_cut_off_by_its_deadline_leaves_no_connection_to_reuse() -> None:
    receiver = RawReceiver(lambda head: None if b"first" in head else OK)
    async with receiving(receiver) as url:
        poster = client(url)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await poster.post(b"{}", {"X-Attempt": "first"})
        async with asyncio.timeout(5):
            assert await poster.post(b"{}", {"X-Attempt": "second"}) == 200
        await poster.aclose()
    assert receiver.connections == 2


async def test_no_receiver_listening_is_a_delivery_error() -> None:
    async with receiving(RawReceiver(lambda _: OK)) as url:
        pass  # closed again: nothing listens on the port now
    with pytest.raises(DeliveryError):
        await client(url).post(b"{}", {})


def test_a_url_that_is_not_http_is_refused_when_the_client_is_made() -> None:
    with pytest.raises(ValueError, match="http"):
        KeepAliveClient("ftp://example.test/hooks", {})

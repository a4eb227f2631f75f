"""HTTP1Client against a real asyncio server on loopback: connections kept and dropped, and
each failure sorted into "nothing was sent" and "the answer was lost"."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from services.platform import http1
from services.platform.http1 import AnswerLost, AnswerTimeout, HTTP1Client, NotSent
from tests.tls_support import self_signed
from tools.infra.procs import free_ports

# What the server does with one request it has read whole: bytes to write back (the
# connection stays open for the next request), or None to close the connection.
Reply = Callable[[bytes], Awaitable[bytes | None]]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Server:
    """A loopback HTTP/1.1 server that reads requests one after another on each connection
    and counts connections and requests."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.ended = 0  # connections the client closed
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = await self.reply(request)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.ended += 1  # the client went away
        finally:
            writer.close()

    def close_idle(self) -> None:
        """Close every connection from the server's side, as an idle timeout does."""
        for writer in self.writers:
            writer.close()

    def url(self, path: str = "/v1/transfers", scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"


@asynccontextmanager
async def serving(reply: Reply, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(reply)
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0, ssl=tls)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        server.close_idle()
        listener.close()
        await listener.wait_closed()


def always(answer: bytes) -> Reply:
    async def reply(request: bytes) -> bytes:
        return answer

    return reply


def client(
    timeout: float = 2.0, connections: int = 4, ssl_context: ssl.SSLContext | None = None
) -> HTTP1Client:
    return HTTP1Client(
        timeout=timeout,
        connect_timeout=timeout / 2,
        connections=connections,
        ssl_context=ssl_context,
    )


async def settle_loop() -> None:
    """Let the loop deliver what the server did (a close reaching the client's reader)."""
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_a_kept_alive_connection_carries_the_next_request() -> None:
    async with serving(always(OK)) as server:
        http = client()
        first = await http.request("POST", server.url(), {"Idempotency-Key": "k1"}, b"a=1")
        second = await http.request("POST", server.url(), {"Idempotency-Key": "k1"}, b"a=1")
        await http.aclose()

    assert (first.status, first.body, second.body) == (200, b"ok", b"ok")
    assert (server.connections, len(server.requests)) == (1, 2)
    assert server.requests[0].startswith(b"POST /v1/transfers HTTP/1.1\r\n")
    assert b"\r\nIdempotency-Key: k1\r\n" in server.requests[0]
    assert server.requests[0].endswith(b"Content-Length: 3\r\n\r\na=1")


async def test_answer_headers_are_read_in_any_case() -> None:
    answer = b"HTTP/1.1 200 OK\r\nIdempotent-Replayed: true\r\nContent-Length: 0\r\n\r\n"
    async with serving(always(answer)) as server:
        http = client()
        got = await http.request("GET", server.url(), {})
        await http.aclose()

    assert got.headers["idempotent-replayed"] == got.headers["Idempotent-Replayed"] == "true"


async def test_a_connection_the_server_closed_while_idle_is_not_written_to() -> None:
    async with serving(always(OK)) as server:
        http = client()
        await http.request("POST", server.url(), {}, b"a=1")
        server.close_idle()
        await settle_loop()
        again = await http.request("POST", server.url(), {}, b"a=2")
        await http.aclose()

    assert again.status == 200
    assert server.connections == 2  # a new connection took the request
    assert [r.endswith(b"a=2") for r in server.requests] == [False, True]  # sent once


async def test_a_post_on_a_kept_connection_closed_unanswered_is_lost_not_resent() -> None:
    answers = iter([OK, None])

    async def first_answers_then_closes(request: bytes) -> bytes | None:
        return next(answers)

    async with serving(first_answers_then_closes) as server:
        http = client()
        await http.request("POST", server.url(), {}, b"a=1")
        with pytest.raises(AnswerLost) as lost:
            await http.request("POST", server.url(), {}, b"a=2")
        await http.aclose()

    assert not isinstance(lost.value, NotSent)
    assert len(server.requests) == 2  # it reached the server: resending could act twice


async def test_a_get_on_a_kept_connection_closed_unanswered_is_sent_once_more() -> None:
    answers = iter([OK, None, OK, None])

    async def second_request_is_dropped(request: bytes) -> bytes | None:
        return next(answers)

    async with serving(second_request_is_dropped) as server:
        http = client()
        await http.request("GET", server.url(), {})
        again = await http.request("GET", server.url(), {})
        await http.aclose()

    assert again.body == b"ok"
    assert (len(server.requests), server.connections) == (3, 2)


async def test_a_get_sent_once_more_gets_its_own_connect_bound() -> None:
    async def answer_late_then_drop(request: bytes) -> bytes | None:
        if len(server.requests) == 2:
            await asyncio.sleep(0.3)  # past the first attempt's connect bound, then closed
            return None
        return OK

    async with serving(answer_late_then_drop) as server:
        http = HTTP1Client(timeout=2.0, connect_timeout=0.2, connections=4)
        await http.request("GET", server.url(), {})
        again = await http.request("GET", server.url(), {})
        await http.aclose()

    assert again.status == 200
    assert len(server.requests) == 3


async def test_an_idle_connection_past_the_keepalive_bound_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http1, "KEEPALIVE_SECONDS", 0.05)
    async with serving(always(OK)) as server:
        http = client()
        await http.request("GET", server.url(), {})
        await asyncio.sleep(0.1)
        await http.request("GET", server.url(), {})
        await http.aclose()

    assert server.connections == 2


async def test_idle_connections_are_closed_after_the_keepalive_bound_without_traffic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http1, "KEEPALIVE_SECONDS", 0.05)
    async with serving(always(OK)) as server:
        http = client()
        await http.request("GET", server.url(), {})
        await asyncio.sleep(0.3)
        ended = server.ended  # the client closed it: the server's read saw the end
        await http.aclose()

    assert ended == 1


async def test_a_timeout_while_reading_the_answer_is_lost_not_unsent() -> None:
    async def never(request: bytes) -> bytes:
        await asyncio.sleep(10)
        return OK

    async with serving(never) as server:
        http = client(timeout=0.3)
        with pytest.raises(AnswerTimeout):
            await http.request("POST", server.url(), {}, b"a=1")
        await http.aclose()

    assert len(server.requests) == 1


async def test_a_chunked_answer_is_read_whole_and_the_connection_kept() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;ext=1\r\n{"id\r\na\r\n": "tr_1"}\r\n0\r\nX-Trailer: 1\r\n\r\n'
    )
    async with serving(always(chunked)) as server:
        http = client()
        first = await http.request("GET", server.url(), {})
        second = await http.request("GET", server.url(), {})
        await http.aclose()

    assert first.body == second.body == b'{"id": "tr_1"}'
    assert server.connections == 1


async def test_an_answer_without_length_runs_to_the_close_and_is_not_reused() -> None:
    async def until_close(request: bytes) -> None:
        server.writers[-1].write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        return None

    async with serving(until_close) as server:
        http = client()
        first = await http.request("GET", server.url(), {})
        await http.request("GET", server.url(), {})
        await http.aclose()

    assert first.body == b"all of it"
    assert server.connections == 2


async def test_an_interim_answer_is_skipped() -> None:
    async with serving(always(b"HTTP/1.1 100 Continue\r\n\r\n" + OK)) as server:
        http = client()
        got = await http.request("POST", server.url(), {}, b"a=1")
        await http.aclose()

    assert (got.status, got.body) == (200, b"ok")


@pytest.mark.parametrize(
    "answer",
    [b"SMTP READY\r\n\r\n", b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"id": '],
    ids=["not_http", "cut_short"],
)
async def test_an_answer_that_breaks_is_lost(answer: bytes) -> None:
    async def then_close(request: bytes) -> None:
        server.writers[-1].write(answer)
        return None

    async with serving(then_close) as server:
        http = client()
        with pytest.raises(AnswerLost) as lost:
            await http.request("POST", server.url(), {}, b"a=1")
        await http.aclose()

    assert not isinstance(lost.value, AnswerTimeout)


async def test_a_refused_connection_sent_nothing() -> None:
    http = client()
    with pytest.raises(NotSent) as refused:
        await http.request("POST", f"http://127.0.0.1:{free_ports()}/v1/transfers", {}, b"a=1")
    await http.aclose()

    assert isinstance(refused.value.__cause__, ConnectionRefusedError)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http://127.0.0.1:port/x", "nothing"])
async def test_a_url_it_cannot_send_to_sent_nothing(url: str) -> None:
    http = client()
    with pytest.raises(NotSent):
        await http.request("GET", url, {})
    await http.aclose()


async def test_waiting_for_a_free_connection_is_bounded_and_sends_nothing() -> None:
    async def slow(request: bytes) -> bytes:
        await asyncio.sleep(0.6)
        return OK

    async with serving(slow) as server:
        http = client(timeout=1.0, connections=1)
        first = asyncio.create_task(http.request("POST", server.url(), {}, b"a=1"))
        await asyncio.sleep(0.05)
        with pytest.raises(NotSent):
            await http.request("POST", server.url(), {}, b"a=2")
        assert (await first).status == 200
        await http.aclose()

    assert len(server.requests) == 1


async def test_a_closed_client_refuses_to_send() -> None:
    http = client()
    await http.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await http.request("GET", "http://127.0.0.1:1/", {})


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="connections"):
        HTTP1Client(timeout=1.0, connect_timeout=0.5, connections=0)
    with pytest.raises(ValueError, match="connect_timeout"):
        HTTP1Client(timeout=1.0, connect_timeout=2.0, connections=1)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    return self_signed(tmp_path_factory.mktemp("tls"))


async def test_an_https_url_is_spoken_over_tls_and_its_certificate_checked(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    async with serving(always(OK), tls=served) as server:
        trusting = client(ssl_context=ssl.create_default_context(cafile=str(cert)))
        got = await trusting.request("GET", server.url(scheme="https"), {})
        await trusting.aclose()
        stranger = client()  # the system's CAs: this certificate is nobody's
        with pytest.raises(NotSent) as refused:
            await stranger.request("POST", server.url(scheme="https"), {}, b"a=1")
        await stranger.aclose()

    assert got.body == b"ok"
    assert isinstance(refused.value.__cause__, ssl.SSLError)
    assert len(server.requests) == 1

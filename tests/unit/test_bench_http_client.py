"""The benchmarks' raw keep-alive client: an idle connection the server closed is posted to
again on a fresh connection, under the same idempotency key, and never read as an answer."""

from __future__ import annotations

import asyncio

import pytest

from tools.bench.e2e_load import Arrivals, Offered, _Connections, _post
from tools.bench.http_load import exchange

ANSWER = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"


async def _server(answers_before_close: int) -> tuple[asyncio.Server, list[bytes]]:
    """A server answering `answers_before_close` requests per connection, then closing it."""
    keys: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(answers_before_close):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            keys.append(head.split(b"Idempotency-Key: ")[1].split(b"\r\n")[0])
            writer.write(ANSWER)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0), keys


async def test_a_connection_closed_before_an_answer_is_an_error_not_a_status() -> None:
    server, _ = await _server(answers_before_close=0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    with pytest.raises(ConnectionResetError):
        await exchange(reader, writer, f"127.0.0.1:{port}", "/v1/settlements", {}, b"{}")
    writer.close()
    server.close()


async def test_an_idle_connection_the_server_closed_is_retried_afresh_with_the_same_key() -> None:
    server, keys = await _server(answers_before_close=1)
    port = server.sockets[0].getsockname()[1]
    pool, out = _Connections(f"http://127.0.0.1:{port}"), Offered()
    load = Arrivals("acme", "token", "run", rate=10, seconds=1)
    await _post(load, 1, pool, out)  # the server answers, then closes the connection
    await asyncio.sleep(0.05)
    await _post(load, 2, pool, out)  # the idle connection is dead: a fresh one is used
    assert out.http_statuses == {201: 2}
    assert keys == [b"run-k0000001", b"run-k0000002"]
    pool.close()
    server.close()

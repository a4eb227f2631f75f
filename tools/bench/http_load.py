"""A small HTTP/1.1 load client on raw asyncio streams, light enough that the server, not
the client, is what a benchmark measures (httpx spends more CPU per request than the ledger
does on two cores)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# One request's path, headers and body, for request number n.
RequestFor = Callable[[int], tuple[str, dict[str, str], bytes]]


@dataclass
class LoadResult:
    """Statuses seen and per-request latencies of one load run."""

    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)


async def exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    host: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
) -> int:
    """POST one request on a keep-alive connection and read the whole answer; its status."""
    head = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    status_line = await reader.readline()
    if not status_line:  # the server closed a keep-alive connection it had left idle
        raise ConnectionResetError("connection closed before an answer")
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def post_load(url: str, count: int, clients: int, request_for: RequestFor) -> LoadResult:
    """POST `count` requests over `clients` keep-alive connections; statuses and latencies."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    numbers = iter(range(count))
    result = LoadResult()

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for n in numbers:
                path, headers, body = request_for(n)
                sent = time.perf_counter()
                status = await exchange(reader, writer, f"{host}:{port}", path, headers, body)
                result.latencies.append(time.perf_counter() - sent)
                result.statuses[status] = result.statuses.get(status, 0) + 1
        finally:
            writer.close()

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    result.elapsed = time.monotonic() - started
    return result

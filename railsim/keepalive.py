"""HTTP/1.1 POSTs to one URL over kept-alive connections, on raw asyncio streams.

The webhook sender's client: httpx spent most of the simulator's CPU per transfer here (its
pool scans every connection on each request, tens of them at 32 in flight). This
client does one thing, posting a body and reading the status, with one write per request
and one read of the answer's head; an answer is read whole (Content-Length, chunked, or up
to close) so the connection can carry the next request.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

from railsim.errors import DeliveryError

_Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 65536  # an answer's status line and headers; more is no webhook receiver's answer
# What a connection can fail with mid-exchange; any of them means "not delivered"
_BROKEN = (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


class KeepAliveClient:
    """POSTs to `url`, reusing up to `max_idle` idle connections; one connection per request
    in flight, so the caller's concurrency is the number of connections."""

    def __init__(self, url: str, headers: Mapping[str, str], *, max_idle: int = 32) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"webhook URL must be http(s)://host[:port]/path, not {url!r}")
        self.url = url
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"POST {target} HTTP/1.1", f"Host: {parts.netloc.rpartition('@')[2]}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._max_idle = max_idle
        self._idle: list[_Connection] = []

    async def post(self, body: bytes, headers: Mapping[str, str]) -> int:
        """POST `body` with `headers` on top of the fixed ones; the answer's status, or
        DeliveryError if the connection failed before a whole answer came (the caller bounds
        the wait: a connection cancelled mid-exchange is closed, never reused)."""
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = b"%b%bContent-Length: %d\r\n\r\n%b" % (
            self._head,
            extra.encode("latin-1"),
            len(body),
            body,
        )
        try:
            return await self._exchange(request)
        except _BROKEN as e:
            raise DeliveryError(f"POST {self.url} failed: {e!r}") from e

    async def aclose(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()

    async def _exchange(self, request: bytes) -> int:
        while self._idle:
            connection = self._idle.pop()
            if connection[0].at_eof() or connection[1].is_closing():
                connection[1].close()  # the receiver closed it while idle
                continue
            try:
                return await self._on(connection, request)
            except (ConnectionError, asyncio.IncompleteReadError) as e:
                if isinstance(e, asyncio.IncompleteReadError) and e.partial:
                    raise  # it had begun to answer: a broken answer, not a stale connection
                # Closed by the receiver as we reused it; a fresh connection is the usual cure
        reader, writer = await asyncio.open_connection(
            self._host, self._port, ssl=self._ssl, limit=_MAX_HEAD
        )
        return await self._on((reader, writer), request)

    async def _on(self, connection: _Connection, request: bytes) -> int:
        reader, writer = connection
        kept = False
        try:
            writer.write(request)
            status, keep = await _read_answer(reader)
            if keep and len(self._idle) < self._max_idle:
                self._idle.append(connection)
                kept = True
            return status
        finally:
            if not kept:
                writer.close()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one whole answer; its status and whether the connection may carry another."""
    head = await reader.readuntil(_HEAD_END)
    status_line, *lines = head[: -len(_HEAD_END)].split(b"\r\n")
    version, status = status_line.split(b" ", 2)[:2]
    length, chunked, keep = None, False, version == b"HTTP/1.1"
    for line in lines:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = value.endswith(b"chunked")
        elif name == b"connection":
            keep = value == b"keep-alive" or (keep and value != b"close")
    if chunked:
        await _skip_chunks(reader)
    elif length is not None:
        await reader.readexactly(length)
    else:
        await reader.read()  # no length: the answer runs to the close
        keep = False
    return int(status), keep


async def _skip_chunks(reader: asyncio.StreamReader) -> None:
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        await reader.readexactly(size + 2)
    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, up to the empty line
        pass

"""An HTTP/1.1 client on asyncio streams: kept-alive connections, per-phase deadlines, and
errors that say whether any byte of the request was written.

The rail's calls go through it (services/adapters/stripe/http.py). A general client spends more
CPU per call than the relay does on everything else (building request objects, payload
registries, tracing hooks); this one writes each request with one ``write`` and reads the
answer's head with one ``readuntil``.

    TransportError              no whole answer came (a SettleError)
    ├── NotSent                 nothing was written: a URL it cannot send to, connect refused
    │                           or failed (DNS, TCP, TLS), connect or pool wait past its
    │                           bound, the caller's send gate closed (services/platform/
    │                           send_gate.py); sending again is safe
    └── AnswerLost              the request was written, or may have been, and the answer
        │                       broke, never came, or was not HTTP; it may have taken effect
        └── AnswerTimeout       the call's deadline passed after writing (a TimeoutError)

A pooled connection that the server closed while it was idle is seen closed before anything
is written to it and is dropped. One that turns out closed only after the request went out
(the keep-alive race) is an AnswerLost, except that a GET, which changes nothing, is sent
once more on a new connection.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import NamedTuple
from urllib.parse import urlsplit

from services.domain.errors import SettleError
from services.platform import send_gate
from services.platform.http1_wire import HEAD_END, Answer, read_answer, request_bytes

KEEPALIVE_SECONDS = 4.0  # idle connections are dropped after this; see HTTP1Client
MAX_HEAD = 65536  # an answer's status line and headers; more is no API's answer
# What a connection can fail with mid-exchange: a broken or reset socket, an answer cut
# short, a head past MAX_HEAD, or bytes that are not an HTTP answer.
_BROKEN = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


class TransportError(SettleError):
    """The request got no whole answer; the subclass says whether it was written."""


class NotSent(TransportError):
    """Nothing of the request was written: the same request may be sent again."""

    retriable = True


class AnswerLost(TransportError):
    """The request was (or may have been) written and no whole answer came back."""

    retriable = False


class AnswerTimeout(AnswerLost, TimeoutError):
    """The call's deadline passed after the request was written."""


class _Origin(NamedTuple):
    host: str
    port: int
    authority: str  # the Host header's value
    ssl: ssl.SSLContext | None


class _Idle(NamedTuple):
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    since: float  # loop time it was put back


class _Stale(Exception):
    """A reused connection answered nothing at all: closed by the server (keep-alive race)."""


class HTTP1Client:
    """Requests over at most `connections` connections, each call bounded by `timeout`
    seconds, connecting and waiting for a free connection together by `connect_timeout`.

    Idle connections are kept up to KEEPALIVE_SECONDS, shorter than the common 5 s server
    idle timeout, so that a request is rarely written to a connection the server is closing.
    Redirects are not followed and no proxy or netrc setting is read from the environment.
    """

    def __init__(
        self,
        *,
        timeout: float,
        connect_timeout: float,
        connections: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if connections < 1:
            raise ValueError(f"connections must be at least 1, e.g. 64; got {connections}")
        if not 0 < connect_timeout <= timeout:
            raise ValueError(
                f"connect_timeout must be positive and at most timeout ({timeout}), e.g. "
                f"{timeout / 2}; got {connect_timeout}"
            )
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._free = asyncio.Semaphore(connections)
        self._ssl = ssl_context
        self._origins: dict[str, _Origin] = {}
        self._idle: dict[_Origin, list[_Idle]] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self._closed = False

    async def request(
        self, method: str, url: str, headers: dict[str, str], body: bytes = b""
    ) -> Answer:
        """Send one request and read its whole answer; NotSent or AnswerLost if no answer."""
        if self._closed:
            raise RuntimeError("the HTTP client is closed; build a new one")
        origin, target = self._route(url)
        try:
            message = request_bytes(method, target, origin.authority, headers, body)
        except UnicodeEncodeError as e:
            raise NotSent(f"a header of {method} {url} is not Latin-1: {e}") from e
        started = asyncio.get_running_loop().time()
        if self._free.locked():
            try:
                async with asyncio.timeout(self._connect_timeout):
                    await self._free.acquire()
            except TimeoutError as e:
                raise NotSent(f"no connection to {origin.authority} came free in time") from e
        else:
            await self._free.acquire()  # free now: no wait to bound
        try:
            return await self._send(origin, message, method == "GET", started)
        finally:
            self._free.release()

    async def aclose(self) -> None:
        """Close every idle connection; the client is unusable afterwards."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.writer.close()

    def _route(self, url: str) -> tuple[_Origin, str]:
        slash = url.find("/", url.find("://") + 3)
        base, target = (url, "/") if slash < 0 else (url[:slash], url[slash:])
        origin = self._origins.get(base)
        if origin is None:
            origin = self._origins[base] = self._origin_of(base)
        return origin, target

    def _origin_of(self, base: str) -> _Origin:
        try:
            parts = urlsplit(base)
            port = parts.port  # a port that is not a number is a ValueError here
        except ValueError as e:
            raise NotSent(f"cannot send to {base!r}: {e}") from e
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
            raise NotSent(f"cannot send to {base!r}: only http(s)://host[:port] URLs")
        context = None
        if parts.scheme == "https":
            context = self._ssl if self._ssl is not None else ssl.create_default_context()
        number = port if port is not None else (443 if context is not None else 80)
        return _Origin(parts.hostname, number, parts.netloc, context)

    async def _send(self, origin: _Origin, message: bytes, idempotent: bool, at: float) -> Answer:
        deadline = at + self._timeout
        idle = self._take_idle(origin)
        if idle is not None:
            try:
                return await self._exchange(origin, idle.reader, idle.writer, message, deadline)
            except _Stale as e:
                if not idempotent:
                    raise AnswerLost(f"{origin.authority} closed a kept-alive connection") from e
                # A GET changes nothing at the server: sent again on a new connection, once,
                # its connect bounded afresh (within the call's deadline).
                at = min(asyncio.get_running_loop().time(), deadline - self._connect_timeout)
        reader, writer = await self._connect(origin, at + self._connect_timeout)
        try:
            return await self._exchange(origin, reader, writer, message, deadline)
        except _Stale as e:
            raise AnswerLost(f"{origin.authority} closed the connection unanswered") from e

    def _take_idle(self, origin: _Origin) -> _Idle | None:
        """The most recently used idle connection still open and young enough, if any."""
        connections = self._idle.get(origin)
        if not connections:
            return None
        oldest = asyncio.get_running_loop().time() - KEEPALIVE_SECONDS
        while connections:
            idle = connections.pop()
            if idle.since < oldest:
                # The rest are older still: the list is in the order they were put back.
                for stale in (idle, *connections):
                    stale.writer.close()
                connections.clear()
                return None
            if not idle.reader.at_eof() and not idle.writer.is_closing():
                return idle
            idle.writer.close()  # the server closed it while idle: nothing was sent on it
        return None

    def _put_back(
        self, origin: _Origin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        self._idle.setdefault(origin, []).append(_Idle(reader, writer, loop.time()))
        if self._sweeper is None:
            self._sweeper = loop.call_later(KEEPALIVE_SECONDS, self._sweep)

    def _sweep(self) -> None:
        """Close the connections idle past KEEPALIVE_SECONDS, even if no request comes."""
        loop = asyncio.get_running_loop()
        oldest = loop.time() - KEEPALIVE_SECONDS
        for connections in self._idle.values():
            while connections and connections[0].since <= oldest:
                connections.pop(0).writer.close()
        left = [connections[0].since for connections in self._idle.values() if connections]
        self._sweeper = loop.call_at(min(left) + KEEPALIVE_SECONDS, self._sweep) if left else None

    async def _connect(
        self, origin: _Origin, deadline: float
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout_at(deadline):
                return await asyncio.open_connection(
                    origin.host, origin.port, ssl=origin.ssl, limit=MAX_HEAD
                )
        except TimeoutError as e:
            raise NotSent(f"connecting to {origin.authority} timed out") from e
        except (OSError, ssl.SSLError, ValueError) as e:
            raise NotSent(f"connecting to {origin.authority} failed: {e!r}") from e

    async def _exchange(
        self,
        origin: _Origin,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        message: bytes,
        deadline: float,
    ) -> Answer:
        kept = False
        try:
            async with asyncio.timeout_at(deadline):
                # The last checks, with the connection in hand and no await before the write: a
                # guarded call may no longer be allowed to start, and one already past its
                # deadline (the process stalled) would only be written to be given up on.
                if not send_gate.may_write():
                    raise NotSent(f"the send gate closed before writing to {origin.authority}")
                if asyncio.get_running_loop().time() >= deadline:
                    raise NotSent(
                        f"the call's deadline passed before writing to {origin.authority}"
                    )
                writer.write(message)
                send_gate.written()
                try:
                    head = await reader.readuntil(HEAD_END)
                except (ConnectionError, asyncio.IncompleteReadError) as e:
                    if isinstance(e, asyncio.IncompleteReadError) and e.partial:
                        raise  # it had begun to answer: a broken answer, not a closed idle
                    raise _Stale(repr(e)) from e
                answer, keep = await read_answer(reader, head)
            if keep and not self._closed:
                self._put_back(origin, reader, writer)
                kept = True
            return answer
        except TimeoutError as e:
            raise AnswerTimeout(f"no whole answer from {origin.authority} in time") from e
        except _BROKEN as e:
            raise AnswerLost(f"the answer from {origin.authority} broke: {e!r}") from e
        finally:
            if not kept:
                writer.close()  # also when cancelled mid-exchange: never reused half-read

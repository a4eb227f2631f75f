"""The bytes of HTTP/1.1 for services.platform.http1: a request as written, an answer as read."""

from __future__ import annotations

import asyncio
from typing import NamedTuple

from multidict import CIMultiDict

HEAD_END = b"\r\n\r\n"
_NO_BODY = frozenset({204, 304})


class Answer(NamedTuple):
    """One HTTP answer, read whole."""

    status: int  # the status code, e.g. 200
    headers: CIMultiDict[str]  # looked up by any case, as HTTP names are
    body: bytes  # decoded from chunks if it came chunked


def request_bytes(
    method: str, target: str, authority: str, headers: dict[str, str], body: bytes
) -> bytes:
    """The request as written to the socket; UnicodeEncodeError if a header is not Latin-1."""
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    if body or method != "GET":
        lines += f"Content-Length: {len(body)}\r\n"
    head = f"{method} {target} HTTP/1.1\r\nHost: {authority}\r\n{lines}\r\n"
    return head.encode("latin-1") + body


async def read_answer(reader: asyncio.StreamReader, head: bytes) -> tuple[Answer, bool]:
    """The answer whose head is `head`, its body read from `reader`, and whether the
    connection may carry another request."""
    status, version, headers = _parse_head(head)
    while 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
        status, version, headers = _parse_head(await reader.readuntil(HEAD_END))
    connection = headers.get("connection", "").lower()
    keep = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    if status in _NO_BODY:
        body = b""
    elif headers.get("transfer-encoding", "").lower().endswith("chunked"):
        body = await _read_chunks(reader)
    elif (length := headers.get("content-length")) is not None:
        body = await reader.readexactly(int(length))
    else:
        body, keep = await reader.read(), False  # no length: the answer runs to the close
    return Answer(status, headers, body), keep


def _parse_head(head: bytes) -> tuple[int, str, CIMultiDict[str]]:
    """Status, HTTP version and headers of an answer's head; ValueError if it is not one."""
    status_line, *lines = head[: -len(HEAD_END)].decode("latin-1").split("\r\n")
    version, status, *_ = [*status_line.split(" ", 2), ""]
    if version not in ("HTTP/1.1", "HTTP/1.0") or len(status) != 3:
        raise ValueError(f"not an HTTP/1.x answer: {status_line[:80]!r}")
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"malformed header line: {line[:80]!r}")
        headers.add(name.strip(), value.strip())
    return int(status), version, headers


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        parts.append((await reader.readexactly(size + 2))[:-2])
    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, up to the empty line
        pass
    return b"".join(parts)

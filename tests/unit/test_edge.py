"""The shared HTTP edge below the services' routes: the body cap over any chunk source, a
plain ASGI body that ends in a disconnect, and the headers an error's status requires."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.requests import ClientDisconnect

from services.platform.bearer import BearerAuth, Unauthorized, token_digest
from services.platform.edge import (
    ApiError,
    BodyTooLarge,
    asgi_body_chunks,
    error_headers,
    read_capped,
)


class Chunks:
    """A body arriving in `parts`; remembers how many were read."""

    def __init__(self, *parts: bytes) -> None:
        self.parts, self.read = parts, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            self.read += 1
            yield part


async def test_a_body_up_to_the_limit_is_read_whole() -> None:
    assert await read_capped(Chunks(b"ab", b"cd"), "4", 4) == b"abcd"
    assert await read_capped(Chunks(b"ab", b"cd"), None, 4) == b"abcd"


async def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_read() -> None:
    chunks = Chunks(b"a")
    with pytest.raises(BodyTooLarge, match="larger than 4 bytes"):
        await read_capped(chunks, b"5", 4)
    assert chunks.read == 0


async def test_a_body_longer_than_it_declared_is_refused_at_the_chunk_that_crosses() -> None:
    chunks = Chunks(b"abc", b"de", b"f")
    with pytest.raises(BodyTooLarge):
        await read_capped(chunks, "3", 4)
    assert chunks.read == 2


def receiver(*messages: dict[str, Any]) -> Any:
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    return receive


async def test_an_asgi_body_is_read_across_its_messages() -> None:
    receive = receiver(
        {"type": "http.request", "body": b"ab", "more_body": True},
        {"type": "http.request", "body": b"c"},
    )
    assert [c async for c in asgi_body_chunks(receive)] == [b"ab", b"c"]


async def test_a_client_that_leaves_mid_body_is_a_disconnect_not_a_short_body() -> None:
    receive = receiver(
        {"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.disconnect"}
    )
    with pytest.raises(ClientDisconnect):
        await read_capped(asgi_body_chunks(receive), None, 100)


class Busy(ApiError):
    status = 503
    code = "busy"
    retry_after_seconds = 2


def test_a_401_asks_for_a_bearer_token_and_a_retriable_error_says_when() -> None:
    assert error_headers(Unauthorized("who?")) == {"WWW-Authenticate": "Bearer"}
    assert error_headers(Busy("later")) == {"Retry-After": "2"}
    assert error_headers(BodyTooLarge(10)) == {}


def test_a_token_may_be_configured_by_its_sha256_alone() -> None:
    token = "alice-operator-token-7"
    digest = hashlib.sha256(token.encode()).hexdigest()
    auth = BearerAuth({f"sha256:{digest}": "alice", "bob-token-given-plain": "bob"})
    assert auth.tenant_for(token) == "alice"
    assert auth.tenant_for("bob-token-given-plain") == "bob"
    assert auth.holds("alice", token_digest(token))
    with pytest.raises(Unauthorized):
        auth.tenant_for(f"sha256:{digest}")  # the digest is not the token
    # Anything but 64 hex digits after the prefix is a token given as it is.
    odd = "sha256:not-hex-at-all"
    assert BearerAuth({odd: "carol"}).tenant_for(odd) == "carol"

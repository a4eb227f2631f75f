"""StripeRail.send: the exact request Stripe receives, and how every answer is classified.

The stripe package and settle's HTTP client run for real over loopback sockets; only Stripe is
replaced, by `FakeStripe`, a small HTTP/1.1 server that answers from a handler or breaks the
connection in the ways a network does.
"""

from __future__ import annotations

import asyncio
import enum
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

import pytest
import stripe
from multidict import CIMultiDict

from services.adapters.stripe.outcomes import outcome_of_error
from services.adapters.stripe.rail import (
    DEFAULT_MAX_PAGES,
    DEFAULT_TIMEOUT,
    StripeRail,
    stripe_rail,
)
from services.domain.payout import PayoutMethod
from services.domain.rail import RailInstruction, RailOutcome
from services.platform.http1 import AnswerLost, AnswerTimeout, NotSent, TransportError
from services.platform.settings import load_settings
from tools.infra.procs import free_ports

KEY = "9f" * 32
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SHORT = 0.5  # seconds: a call timeout for tests that wait for one to pass


@dataclass(frozen=True)
class Seen:
    """One request as it arrived on the socket."""

    method: str
    target: str
    headers: CIMultiDict[str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def params(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.target).query))

    def form(self) -> dict[str, str]:
        """The form-encoded body."""
        return dict(parse_qsl(self.body.decode()))


@dataclass(frozen=True)
class Reply:
    """An HTTP answer."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class Break(enum.Enum):
    """What the fake does instead of answering, once it has read the whole request."""

    HANG = "never answers"
    CLOSE = "closes the connection"
    RESET = "resets the connection"
    CUT_BODY = "closes after half an answer"
    GARBAGE = "answers something that is not HTTP"


Handler = Callable[[Seen], Awaitable[Reply | Break]]


class FakeStripe:
    """A Stripe stand-in on 127.0.0.1 that records requests and answers from a handler.

    With no handler nothing listens on its port: connections are refused.
    """

    def __init__(self, handler: Handler | None) -> None:
        self.requests: list[Seen] = []
        self.connections = 0
        self.received = asyncio.Event()  # set once a request has arrived
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._released = asyncio.Event()  # ends every Break.HANG
        self.url = f"http://127.0.0.1:{free_ports()}"

    async def start(self) -> None:
        if self._handler is not None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        self._released.set()
        for writer in self._writers:
            writer.close()  # a connection left idle by a client sees its end
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def rail(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_pages: int = DEFAULT_MAX_PAGES,
        connections: int = 64,
        clock: Callable[[], datetime] = lambda: NOW,
    ) -> StripeRail:
        """A StripeRail whose Stripe is this fake."""
        return StripeRail(
            "sk_test_unit",
            api_base=self.url,
            timeout=timeout,
            max_pages=max_pages,
            connections=connections,
            clock=clock,
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None and self._handler is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections += 1
        try:
            while True:  # one request after another on a kept-alive connection
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                request_line, *lines = head.rstrip("\r\n").split("\r\n")
                method, target, _ = request_line.split(" ", 2)
                headers = CIMultiDict(
                    (name.strip(), value.strip())
                    for name, value in (line.split(":", 1) for line in lines)
                )
                body = await reader.readexactly(int(headers.get("Content-Length", "0")))
                seen = Seen(method, target, headers, body)
                self.requests.append(seen)
                self.received.set()
                answer = await self._handler(seen)
                if isinstance(answer, Reply):
                    writer.write(wire(answer))
                    await writer.drain()
                    continue
                await self._break(answer, writer)
                return
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client went away
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _break(self, how: Break, writer: asyncio.StreamWriter) -> None:
        if how is Break.HANG:
            await self._released.wait()
        elif how is Break.RESET:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        elif how is Break.CUT_BODY:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
            writer.write(head + b'\r\n{"id": "tr_')
            await writer.drain()
        elif how is Break.GARBAGE:
            writer.write(b"SMTP READY\r\n\r\n")
            await writer.drain()


def wire(reply: Reply) -> bytes:
    """`reply` as HTTP/1.1 bytes."""
    try:
        reason = HTTPStatus(reply.status).phrase
    except ValueError:
        reason = "Unknown"
    headers = {"Content-Length": str(len(reply.body)), **reply.headers}
    lines = [f"HTTP/1.1 {reply.status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body


@asynccontextmanager
async def fake_stripe(handler: Handler | None) -> AsyncIterator[FakeStripe]:
    """A running FakeStripe, stopped on exit."""
    fake = FakeStripe(handler)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


def instruction(method: PayoutMethod = PayoutMethod.TRANSFER, **changes: str) -> RailInstruction:
    """A rail instruction for settlement stl_1 of tenant acme."""
    fields = {"settlement_id": "stl_1", "tenant": "acme", "destination": "acct_1"} | changes
    return RailInstruction(
        idempotency_key=KEY, amount=1250, currency="EUR", method=method, **fields
    )


def answer(status: int, body: object = None, **headers: str) -> Handler:
    """A handler that answers every request with `status` and JSON `body` (none if None)."""
    content = b"" if body is None else json.dumps(body).encode()
    if body is not None:
        headers = {"Content-Type": "application/json", **headers}

    async def handle(request: Seen) -> Reply:
        return Reply(status, content, headers)

    return handle


def fail(how: Break) -> Handler:
    """A handler that breaks the connection `how`, after reading the request."""

    async def handle(request: Seen) -> Break:
        return how

    return handle


def stripe_error(type_: str, code: str | None = None) -> dict[str, object]:
    """A Stripe error body."""
    error: dict[str, object] = {"type": type_, "message": "from the fake"}
    if code is not None:
        error["code"] = code
    return {"error": error}


async def test_transfer_sends_our_key_metadata_group_and_lower_case_currency() -> None:
    async with fake_stripe(answer(200, {"id": "tr_123", "object": "transfer"})) as fake:
        rail = fake.rail()
        result = await rail.send(instruction())
        await rail.aclose()

    assert (result.outcome, result.rail_reference, result.status) == (
        RailOutcome.ACCEPTED,
        "tr_123",
        200,
    )
    [request] = fake.requests
    assert (request.method, request.path) == ("POST", "/v1/transfers")
    assert request.headers["Idempotency-Key"] == KEY
    assert request.headers["Authorization"] == "Bearer sk_test_unit"
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert request.form() == {
        "amount": "1250",
        "currency": "eur",
        "destination": "acct_1",
        "transfer_group": "stl_1",
        "metadata[settlement_id]": "stl_1",
        "metadata[tenant]": "acme",
        "description": "settle settlement stl_1",
    }


async def test_payout_sends_our_key_and_metadata_without_transfer_group() -> None:
    async with fake_stripe(answer(200, {"id": "po_123", "object": "payout"})) as fake:
        rail = fake.rail()
        result = await rail.send(instruction(PayoutMethod.PAYOUT, destination="ba_9"))
        await rail.aclose()

    assert (result.outcome, result.rail_reference) == (RailOutcome.ACCEPTED, "po_123")
    [request] = fake.requests
    assert (request.method, request.path) == ("POST", "/v1/payouts")
    assert request.headers["Idempotency-Key"] == KEY
    assert request.form() == {
        "amount": "1250",
        "currency": "eur",
        "destination": "ba_9",
        "metadata[settlement_id]": "stl_1",
        "metadata[tenant]": "acme",
        "description": "settle settlement stl_1",
    }


async def test_the_same_instruction_sends_the_same_key_every_time_on_one_connection() -> None:
    async with fake_stripe(answer(200, {"id": "tr_1"})) as fake:
        rail = fake.rail()
        await rail.send(instruction())
        await rail.send(instruction())
        await rail.aclose()

    assert [r.headers["Idempotency-Key"] for r in fake.requests] == [KEY, KEY]
    assert fake.connections == 1  # the pooled connection was kept alive and reused


async def test_a_replayed_answer_is_accepted_and_says_so() -> None:
    async with fake_stripe(answer(200, {"id": "tr_1"}, **{"Idempotent-Replayed": "true"})) as fake:
        rail = fake.rail()
        result = await rail.send(instruction())
        await rail.aclose()

    assert (result.outcome, result.detail) == (RailOutcome.ACCEPTED, "idempotent_replayed")


async def test_the_factory_points_the_client_at_stripe_api_base() -> None:
    async with fake_stripe(answer(200, {"id": "tr_1"})) as fake:
        settings = load_settings({"STRIPE_API_BASE": f"{fake.url}/", "STRIPE_API_KEY": "sk_test_f"})
        rail = stripe_rail(settings)
        await rail.send(instruction())
        await rail.aclose()

    [request] = fake.requests
    assert (request.target, request.headers["Host"]) == ("/v1/transfers", fake.url[7:])
    assert request.headers["Authorization"] == "Bearer sk_test_f"


async def test_an_empty_key_is_a_programming_error_and_nothing_is_sent() -> None:
    async with fake_stripe(answer(200, {"id": "tr_1"})) as fake:
        rail = fake.rail()
        bad = RailInstruction("stl_1", "acme", "", "acct_1", 1, "EUR", PayoutMethod.TRANSFER)
        with pytest.raises(ValueError, match="idempotency_key"):
            await rail.send(bad)
        await rail.aclose()

    assert fake.requests == []


async def test_a_closed_rail_sends_nothing() -> None:
    async with fake_stripe(answer(200, {"id": "tr_1"})) as fake:
        rail = fake.rail()
        await rail.send(instruction())
        await rail.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await rail.send(instruction())
        await rail.aclose()  # closing twice is harmless

    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("status", "body", "outcome", "detail"),
    [
        (
            400,
            stripe_error("invalid_request_error", "balance_insufficient"),
            "refused",
            "balance_insufficient",
        ),
        (
            400,
            stripe_error("invalid_request_error", "transfers_not_allowed"),
            "refused",
            "transfers_not_allowed",
        ),
        (400, stripe_error("invalid_request_error", "account_closed"), "refused", "account_closed"),
        (400, stripe_error("invalid_request_error"), "refused", "invalid_request_error"),
        (402, stripe_error("card_error", "card_declined"), "refused", "card_declined"),
        (
            404,
            stripe_error("invalid_request_error", "resource_missing"),
            "refused",
            "resource_missing",
        ),
        (400, stripe_error("idempotency_error"), "ambiguous", "idempotency_error"),
        (401, stripe_error("invalid_request_error"), "retryable", "authentication_error"),
        (403, stripe_error("invalid_request_error"), "retryable", "permission_error"),
        (409, stripe_error("idempotency_error"), "retryable", "conflict"),
        (429, stripe_error("invalid_request_error", "rate_limit"), "retryable", "rate_limit"),
        (400, stripe_error("invalid_request_error", "rate_limit"), "retryable", "rate_limit"),
        (429, stripe_error("invalid_request_error", "lock_timeout"), "retryable", "lock_timeout"),
        (500, stripe_error("api_error"), "ambiguous", "api_error"),
        (502, None, "ambiguous", "http_502"),
        (503, stripe_error("api_error"), "ambiguous", "api_error"),
        (504, None, "ambiguous", "http_504"),
        (418, stripe_error("invalid_request_error"), "ambiguous", "invalid_request_error"),
        (200, {"object": "transfer"}, "ambiguous", "malformed_response"),
        (302, None, "ambiguous", "http_302"),  # a redirect is not followed
    ],
)
async def test_each_answer_is_classified_after_exactly_one_request(
    status: int, body: object, outcome: str, detail: str
) -> None:
    # Stripe-Should-Retry: true would make the library retry if its retries were on.
    headers = {"Stripe-Should-Retry": "true", "Location": "/v1/elsewhere"}
    async with fake_stripe(answer(status, body, **headers)) as fake:
        rail = fake.rail()
        result = await rail.send(instruction())
        await rail.aclose()

    assert (result.outcome, result.detail, result.status) == (outcome, detail, status)
    assert len(fake.requests) == 1


async def test_a_2xx_body_that_is_not_json_is_ambiguous() -> None:
    async def html(request: Seen) -> Reply:
        return Reply(200, b"<html>gateway</html>", {"Content-Type": "text/html"})

    async with fake_stripe(html) as fake:
        rail = fake.rail()
        result = await rail.send(instruction())
        await rail.aclose()

    assert (result.outcome, result.rail_reference) == (RailOutcome.AMBIGUOUS, None)


@pytest.mark.parametrize(
    ("how", "detail"),
    [
        (Break.HANG, "timeout"),
        (Break.CLOSE, "network_error"),
        (Break.RESET, "network_error"),
        (Break.CUT_BODY, "network_error"),
        (Break.GARBAGE, "network_error"),
    ],
    ids=lambda v: v.name.lower() if isinstance(v, Break) else v,
)
async def test_a_failure_after_the_request_reached_the_rail_is_ambiguous(
    how: Break, detail: str
) -> None:
    async with fake_stripe(fail(how)) as fake:
        rail = fake.rail(timeout=SHORT)
        result = await rail.send(instruction())
        await rail.aclose()

    assert (result.outcome, result.detail, result.status) == (RailOutcome.AMBIGUOUS, detail, None)
    assert len(fake.requests) == 1


async def test_a_refused_connection_is_retryable() -> None:
    async with fake_stripe(None) as nothing_listens:
        rail = nothing_listens.rail(timeout=SHORT)
        result = await rail.send(instruction())
        await rail.aclose()

    assert (result.outcome, result.detail, result.status) == (
        RailOutcome.RETRYABLE,
        "not_sent",
        None,
    )


async def test_a_connect_that_never_completes_is_retryable_before_the_call_deadline() -> None:
    # A listener whose accept queue is full: the kernel drops further handshakes unanswered.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = [socket.socket() for _ in range(3)]
    for filler in fillers:
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
    try:
        rail = StripeRail("sk_test_unit", api_base=f"http://127.0.0.1:{port}", timeout=1.0)
        started = asyncio.get_running_loop().time()
        result = await rail.send(instruction())
        elapsed = asyncio.get_running_loop().time() - started
        await rail.aclose()
    finally:
        for s in (*fillers, listener):
            s.close()

    assert (result.outcome, result.detail) == (RailOutcome.RETRYABLE, "not_sent")
    assert elapsed < 0.9  # the connect bound (half the call) fired, not the call's deadline


async def test_waiting_for_a_pooled_connection_past_its_bound_is_retryable() -> None:
    async with fake_stripe(fail(Break.HANG)) as fake:
        rail = fake.rail(timeout=2 * SHORT, connections=1)
        first = asyncio.create_task(rail.send(instruction()))
        await fake.received.wait()
        second = await rail.send(instruction(settlement_id="stl_2"))
        await first
        await rail.aclose()

    assert (second.outcome, second.detail) == (RailOutcome.RETRYABLE, "not_sent")
    assert (first.result().outcome, first.result().detail) == (RailOutcome.AMBIGUOUS, "timeout")
    assert len(fake.requests) == 1


async def test_a_url_scheme_the_client_cannot_speak_is_retryable() -> None:
    rail = StripeRail("sk_test_unit", api_base="ftp://127.0.0.1:21", timeout=SHORT)
    result = await rail.send(instruction())
    await rail.aclose()

    assert (result.outcome, result.detail) == (RailOutcome.RETRYABLE, "not_sent")


def bare(cls: type[BaseException]) -> BaseException:
    """An instance of `cls` for classifying by type (its constructor's arguments vary)."""
    return cls.__new__(cls)


@pytest.mark.parametrize(
    ("cause", "outcome", "detail"),
    [
        (NotSent, "retryable", "not_sent"),
        (AnswerTimeout, "ambiguous", "timeout"),
        (TimeoutError, "ambiguous", "timeout"),
        (AnswerLost, "ambiguous", "network_error"),
        (TransportError, "ambiguous", "network_error"),
        (ConnectionResetError, "ambiguous", "network_error"),
        (ConnectionRefusedError, "ambiguous", "network_error"),
        (OSError, "ambiguous", "network_error"),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else v,
)
def test_each_transport_error_is_classified_by_its_type(
    cause: type[BaseException], outcome: str, detail: str
) -> None:
    err = stripe.APIConnectionError("from the client")  # type: ignore[no-untyped-call]
    err.__cause__ = bare(cause)
    result = outcome_of_error(err)

    assert (result.outcome, result.detail, result.status) == (outcome, detail, None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, "timeout"),
        ({"max_pages": 0}, "max_pages"),
        ({"api_key": ""}, "api_key"),
        ({"connections": 0}, "connections"),
    ],
)
def test_bad_construction_arguments_are_rejected(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"api_key": "sk_test_unit"} | kwargs
    with pytest.raises(ValueError, match=message):
        StripeRail(**arguments)  # type: ignore[arg-type]

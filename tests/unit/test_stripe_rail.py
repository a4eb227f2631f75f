"""StripeRail.send: the exact request Stripe receives, and how every answer is classified.

The stripe package runs for real; only the network is replaced, by an httpx MockTransport.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from urllib.parse import parse_qsl

import httpx
import pytest

from services.relay.rail import PayoutMethod, RailInstruction, RailOutcome
from services.relay.stripe_rail import (
    DEFAULT_MAX_PAGES,
    DEFAULT_TIMEOUT,
    StripeRail,
    stripe_rail,
)
from services.shared.config import load_settings

KEY = "9f" * 32
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def instruction(method: PayoutMethod = PayoutMethod.TRANSFER, **changes: str) -> RailInstruction:
    """A rail instruction for settlement stl_1 of tenant acme."""
    fields = {"settlement_id": "stl_1", "tenant": "acme", "destination": "acct_1"} | changes
    return RailInstruction(
        idempotency_key=KEY, amount=1250, currency="EUR", method=method, **fields
    )


class Recorder:
    """An httpx transport that records requests and answers them from a handler."""

    def __init__(self, handler: Handler) -> None:
        self.requests: list[httpx.Request] = []
        self._handler = handler

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self._handler(request)

    def rail(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_pages: int = DEFAULT_MAX_PAGES,
        clock: Callable[[], datetime] = lambda: NOW,
    ) -> StripeRail:
        """A StripeRail whose network is this recorder."""
        transport = httpx.MockTransport(self)
        return StripeRail(
            "sk_test_unit", timeout=timeout, max_pages=max_pages, transport=transport, clock=clock
        )


def answer(status: int, body: object = None, **headers: str) -> Handler:
    """A handler that answers every request with `status` and JSON `body`."""

    async def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body, headers=headers)

    return handle


def fail(error: type[httpx.TransportError]) -> Handler:
    """A handler whose transport raises `error`, as httpx would."""

    async def handle(request: httpx.Request) -> httpx.Response:
        raise error("simulated", request=request)

    return handle


def form(request: httpx.Request) -> dict[str, str]:
    """The form-encoded body of a request."""
    return dict(parse_qsl(request.content.decode()))


def stripe_error(type_: str, code: str | None = None) -> dict[str, object]:
    """A Stripe error body."""
    error: dict[str, object] = {"type": type_, "message": "from the fake"}
    if code is not None:
        error["code"] = code
    return {"error": error}


async def test_transfer_sends_our_key_metadata_group_and_lower_case_currency() -> None:
    recorder = Recorder(answer(200, {"id": "tr_123", "object": "transfer"}))
    rail = recorder.rail()
    result = await rail.send(instruction())
    await rail.aclose()

    assert (result.outcome, result.rail_reference, result.status) == (
        RailOutcome.ACCEPTED,
        "tr_123",
        200,
    )
    [request] = recorder.requests
    assert (request.method, request.url.path) == ("POST", "/v1/transfers")
    assert request.headers["Idempotency-Key"] == KEY
    assert request.headers["Authorization"] == "Bearer sk_test_unit"
    assert form(request) == {
        "amount": "1250",
        "currency": "eur",
        "destination": "acct_1",
        "transfer_group": "stl_1",
        "metadata[settlement_id]": "stl_1",
        "metadata[tenant]": "acme",
        "description": "settle settlement stl_1",
    }


async def test_payout_sends_our_key_and_metadata_without_transfer_group() -> None:
    recorder = Recorder(answer(200, {"id": "po_123", "object": "payout"}))
    rail = recorder.rail()
    result = await rail.send(instruction(PayoutMethod.PAYOUT, destination="ba_9"))
    await rail.aclose()

    assert (result.outcome, result.rail_reference) == (RailOutcome.ACCEPTED, "po_123")
    [request] = recorder.requests
    assert (request.method, request.url.path) == ("POST", "/v1/payouts")
    assert request.headers["Idempotency-Key"] == KEY
    assert form(request) == {
        "amount": "1250",
        "currency": "eur",
        "destination": "ba_9",
        "metadata[settlement_id]": "stl_1",
        "metadata[tenant]": "acme",
        "description": "settle settlement stl_1",
    }


async def test_the_same_instruction_sends_the_same_key_every_time() -> None:
    recorder = Recorder(answer(200, {"id": "tr_1"}))
    rail = recorder.rail()
    await rail.send(instruction())
    await rail.send(instruction())
    await rail.aclose()

    assert [r.headers["Idempotency-Key"] for r in recorder.requests] == [KEY, KEY]


async def test_a_replayed_answer_is_accepted_and_says_so() -> None:
    recorder = Recorder(answer(200, {"id": "tr_1"}, **{"Idempotent-Replayed": "true"}))
    rail = recorder.rail()
    result = await rail.send(instruction())
    await rail.aclose()

    assert (result.outcome, result.detail) == (RailOutcome.ACCEPTED, "idempotent_replayed")


async def test_the_factory_points_the_client_at_stripe_api_base() -> None:
    recorder = Recorder(answer(200, {"id": "tr_1"}))
    settings = load_settings(
        {"STRIPE_API_BASE": "http://railsim.local:8111/", "STRIPE_API_KEY": "sk_test_f"}
    )
    rail = stripe_rail(settings, transport=httpx.MockTransport(recorder))
    await rail.send(instruction())
    await rail.aclose()

    [request] = recorder.requests
    assert str(request.url) == "http://railsim.local:8111/v1/transfers"
    assert request.headers["Authorization"] == "Bearer sk_test_f"


async def test_an_empty_key_is_a_programming_error_and_nothing_is_sent() -> None:
    recorder = Recorder(answer(200, {"id": "tr_1"}))
    rail = recorder.rail()
    bad = RailInstruction("stl_1", "acme", "", "acct_1", 1, "EUR", PayoutMethod.TRANSFER)
    with pytest.raises(ValueError, match="idempotency_key"):
        await rail.send(bad)
    await rail.aclose()

    assert recorder.requests == []


@pytest.mark.parametrize(
    ("status", "body", "outcome", "detail"),
    [
        (400, stripe_error("invalid_request_error", "balance_insufficient"), "refused",
         "balance_insufficient"),
        (400, stripe_error("invalid_request_error", "transfers_not_allowed"), "refused",
         "transfers_not_allowed"),
        (400, stripe_error("invalid_request_error", "account_closed"), "refused",
         "account_closed"),
        (400, stripe_error("invalid_request_error"), "refused", "invalid_request_error"),
        (402, stripe_error("card_error", "card_declined"), "refused", "card_declined"),
        (404, stripe_error("invalid_request_error", "resource_missing"), "refused",
         "resource_missing"),
        (400, stripe_error("idempotency_error"), "ambiguous", "idempotency_error"),
        (401, stripe_error("invalid_request_error"), "retryable", "authentication_error"),
        (403, stripe_error("invalid_request_error"), "retryable", "permission_error"),
        (409, stripe_error("idempotency_error"), "retryable", "conflict"),
        (429, stripe_error("invalid_request_error", "rate_limit"), "retryable", "rate_limit"),
        (400, stripe_error("invalid_request_error", "rate_limit"), "retryable", "rate_limit"),
        (429, stripe_error("invalid_request_error", "lock_timeout"), "retryable",
         "lock_timeout"),
        (500, stripe_error("api_error"), "ambiguous", "api_error"),
        (502, None, "ambiguous", "http_502"),
        (503, stripe_error("api_error"), "ambiguous", "api_error"),
        (504, None, "ambiguous", "http_504"),
        (418, stripe_error("invalid_request_error"), "ambiguous", "invalid_request_error"),
        (200, {"object": "transfer"}, "ambiguous", "malformed_response"),
    ],
)  # fmt: skip
async def test_each_answer_is_classified_after_exactly_one_request(
    status: int, body: object, outcome: str, detail: str
) -> None:
    # Stripe-Should-Retry: true would make the library retry if its retries were on.
    recorder = Recorder(answer(status, body, **{"Stripe-Should-Retry": "true"}))
    rail = recorder.rail()
    result = await rail.send(instruction())
    await rail.aclose()

    assert (result.outcome, result.detail, result.status) == (outcome, detail, status)
    assert len(recorder.requests) == 1


async def test_a_2xx_body_that_is_not_json_is_ambiguous() -> None:
    async def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>gateway</html>")

    recorder = Recorder(html)
    rail = recorder.rail()
    result = await rail.send(instruction())
    await rail.aclose()

    assert (result.outcome, result.rail_reference) == (RailOutcome.AMBIGUOUS, None)


@pytest.mark.parametrize(
    ("error", "outcome", "detail"),
    [
        (httpx.ConnectError, "retryable", "not_sent"),
        (httpx.ConnectTimeout, "retryable", "not_sent"),
        (httpx.PoolTimeout, "retryable", "not_sent"),
        (httpx.ReadTimeout, "ambiguous", "timeout"),
        (httpx.WriteTimeout, "ambiguous", "timeout"),
        (httpx.ReadError, "ambiguous", "network_error"),
        (httpx.RemoteProtocolError, "ambiguous", "network_error"),
    ],
)
async def test_a_transport_failure_is_retryable_only_when_nothing_was_sent(
    error: type[httpx.TransportError], outcome: str, detail: str
) -> None:
    recorder = Recorder(fail(error))
    rail = recorder.rail()
    result = await rail.send(instruction())
    await rail.aclose()

    assert (result.outcome, result.detail, result.status) == (outcome, detail, None)
    assert len(recorder.requests) == 1


async def test_a_call_past_its_deadline_is_ambiguous() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, json={"id": "tr_late"})

    recorder = Recorder(slow)
    rail = recorder.rail(timeout=0.05)
    result = await rail.send(instruction())
    await rail.aclose()

    assert (result.outcome, result.detail) == (RailOutcome.AMBIGUOUS, "timeout")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": 0}, "timeout"),
        ({"max_pages": 0}, "max_pages"),
        ({"api_key": ""}, "api_key"),
    ],
)
def test_bad_construction_arguments_are_rejected(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"api_key": "sk_test_unit"} | kwargs
    with pytest.raises(ValueError, match=message):
        StripeRail(**arguments)  # type: ignore[arg-type]

"""The calls that create (POST /v1/transfers, /v1/payouts), answered on bare ASGI.

They are the simulator's hot path, one per transfer a relay makes, and Starlette's routing,
middleware and request objects cost more CPU than the core's create; so `RailApp` hands them
here before its routing, and they are answered from the ASGI scope with the same status,
headers and bytes Starlette would send. The gate every /v1 call passes (the API key, the
answer delay) lives here too, so the Starlette routes share it.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl

from starlette.types import Receive, Scope, Send

from railsim.core import RailSim
from railsim.errors import ApiError
from railsim.objects import API_VERSION
from railsim.params import Kind
from railsim.replies import Delivery, Reply, error_reply
from railsim.webhooks import WebhookSender

CREATE_PATHS = {f"/v1/{kind}": kind for kind in Kind}
_READ = (b"authorization", b"idempotency-key")  # the request headers a create looks at
_JSON = (b"content-type", b"application/json")


class CreateCalls:
    """Creates answered over ASGI, and the gate (API key, delays) of every /v1 call."""

    def __init__(self, sim: RailSim, sender: WebhookSender | None, answer_delay: float) -> None:
        self.sim = sim
        self.sender = sender
        self.answer_delay = answer_delay  # seconds every call takes before it is answered

    async def admit(self, authorization: str) -> Reply | None:
        """Stripe's 401 for a call without a secret or restricted key; otherwise None, once the
        answer delay and the latency fault have passed."""
        scheme, _, token = authorization.partition(" ")
        if scheme != "Bearer" or not token.startswith(("sk_", "rk_")):
            unauthorized = ApiError(
                "You did not provide a valid API key: use Authorization: Bearer sk_...",
                status=401,
            )
            return error_reply(unauthorized, "req_unauthorized")
        pause = self.answer_delay + self.sim.faults.latency_ms / 1000
        if pause:
            await asyncio.sleep(pause)
        return None

    async def answer(self, kind: Kind, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one POST /v1/<kind>: create under the key's rules, answer, queue its events."""
        headers: dict[bytes, str] = {}
        for name, value in scope["headers"]:
            if (
                name in _READ and name not in headers
            ):  # the first of a repeated header, as Starlette
                headers[name] = value.decode("latin-1")
        body = await _body(receive)
        if body is None:
            return  # the caller hung up before sending the whole form
        key = headers.get(b"idempotency-key")
        denied = await self.admit(headers.get(b"authorization", ""))
        if denied is not None:
            reply, key = denied, None
        else:
            reply = self._create(kind, body, key)
        later = await self._dispatch(reply)
        if reply.hold_seconds:
            await asyncio.sleep(reply.hold_seconds)
        start = {"type": "http.response.start", "status": reply.status}
        await send({**start, "headers": _raw_headers(reply, key)})
        await send({"type": "http.response.body", "body": reply.body})
        if later and self.sender is not None:
            self.sender.enqueue(later)

    def _create(self, kind: Kind, body: bytes, key: str | None) -> Reply:
        try:
            form = parse_qsl(body.decode(), keep_blank_values=True)
        except UnicodeDecodeError:
            bad = ApiError("The request body is not valid UTF-8.", code="parameter_invalid_string")
            return error_reply(bad, "req_undecodable")
        return self.sim.create(kind, form, key)

    async def _dispatch(self, reply: Reply) -> tuple[Delivery, ...]:
        """Post the call's webhooks now (the early fault) or queue them (an answer held back);
        otherwise those to queue once the answer is written, so that only the early fault
        makes a webhook win the race with its answer."""
        if self.sender is None or not reply.webhooks:
            return ()
        if reply.webhooks_first:
            await self.sender.send_first(reply.webhooks)
            return ()
        if reply.hold_seconds:
            # The rail acted; only the answer is stuck, so its events go out as usual
            self.sender.enqueue(reply.webhooks)
            return ()
        return reply.webhooks


def answer_headers(reply: Reply, key: str | None) -> dict[str, str]:
    """The Stripe headers of an answer: Request-Id and version, the key echoed, replays marked."""
    headers = {"Request-Id": reply.request_id, "Stripe-Version": API_VERSION}
    if key is not None:
        headers["Idempotency-Key"] = key
    if reply.replayed:
        headers["Idempotent-Replayed"] = "true"
    return headers


def _raw_headers(reply: Reply, key: str | None) -> list[tuple[bytes, bytes]]:
    """The answer's headers as Starlette's Response lays them out: its own, lower-cased,
    then the length and the type."""
    headers = answer_headers(reply, key).items()
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    return [*raw, (b"content-length", b"%d" % len(reply.body)), _JSON]


async def _body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnected first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)

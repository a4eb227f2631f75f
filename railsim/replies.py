"""What the core hands back: answers (status + exact body bytes) and webhook deliveries."""

from __future__ import annotations

from dataclasses import dataclass

from railsim.errors import ApiError
from railsim.objects import json_bytes


@dataclass(frozen=True, slots=True)
class Delivery:
    """One webhook to post: the event's bytes are fixed; each attempt is signed afresh."""

    event_id: str
    event_type: str
    payload: bytes
    not_before: float  # Unix seconds; later than now when the event is held back (reorder)


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to one API call, as the HTTP layer must send it."""

    status: int
    body: bytes  # replayed byte for byte under the same idempotency key
    request_id: str
    replayed: bool = False  # served from the idempotency store; nothing happened
    hold_seconds: float = 0.0  # answer only after this long (the timeout fault)
    webhooks: tuple[Delivery, ...] = ()  # events this call caused, not yet queued anywhere
    webhooks_first: bool = False  # post them before answering (the early-webhook fault)
    created_id: str | None = None  # the object this call created, even if it answers 500

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300


def error_reply(error: ApiError, request_id: str) -> Reply:
    """A Stripe-shaped error answer: {"error": {type, code, message, param}}."""
    body = {
        "error": {
            "type": error.type,
            "code": error.code,
            "message": error.message,
            "param": error.param,
            "request_log_url": f"https://dashboard.stripe.com/test/logs/{request_id}",
        }
    }
    return Reply(status=error.status, body=json_bytes(body), request_id=request_id)


def api_error(request_id: str) -> Reply:
    """Stripe's generic 500: the caller cannot tell whether anything happened."""
    error = ApiError(
        "An unknown error occurred", status=500, type_="api_error", code=None, param=None
    )
    return error_reply(error, request_id)

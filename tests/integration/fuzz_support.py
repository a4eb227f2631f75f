"""What the fuzz tests (test_api_fuzz) share: an app served from a thread of its own, the
rail's signing of webhook bodies, the ledger's and the webhook's documents (the operator API's:
operator_fuzz_support.py), and the Hypothesis settings."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

import requests
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings
from schemathesis.generation.stateful.state_machine import APIStateMachine

from railsim.webhooks import signature_header
from services.inbox.http import WEBHOOK_PATH
from services.inbox.http import create_app as create_inbox_app
from services.inbox.metrics import create_metrics as create_inbox_metrics
from services.inbox.signature import SignatureCheck
from services.ledger.http import create_app
from tests.integration.test_ledger_api import ledger_settings

WEBHOOK_SECRET = "whsec_fuzz"
WEBHOOK_MAX_BODY = 65536
SIGNATURE = "Stripe-Signature"
# Per operation and phase: enough to find a contract gap in seconds, few enough that the whole
# module stays well under two minutes.
MAX_EXAMPLES = 25
# The same examples every run, so a red run is a finding to reproduce rather than luck; the
# health checks time generation, which the HTTP round trips dominate here.
FUZZED = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
# Scenarios of a few linked calls each: the links' targets get ids the API issued.
STATEFUL = settings(FUZZED, max_examples=15, stateful_step_count=6)


@contextmanager
def served(build: Callable[[AsyncExitStack], Awaitable[Any]]) -> Iterator[str]:
    """The app `build` makes (its resources on the stack) served on a free local port from a
    thread of its own, for the duration; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # A client's idle keep-alive connection holds the shutdown no longer than a second.
    config = uvicorn.Config(None, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)

    async def serve() -> None:
        async with AsyncExitStack() as stack:
            server.config.app = await build(stack)
            await server.serve(sockets=[sock])

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the app did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class RailSigner(requests.Session):
    """Sends what it is given, as the rail would: any Stripe-Signature header it carries is
    replaced by a fresh signature of the exact body bytes with WEBHOOK_SECRET. A request
    without the header (or with an empty one) goes as it is, and is refused."""

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if request.headers.get(SIGNATURE):
            body = request.body or b""
            raw = body.encode() if isinstance(body, str) else body
            request.headers[SIGNATURE] = signature_header(raw, WEBHOOK_SECRET, int(time.time()))
        return super().send(request, **kwargs)


@schemathesis.check
def webhook_503_is_only_change_pending(ctx: Any, response: Any, case: Any) -> bool | None:
    """The webhook's one 503 the fuzz may see: `change_pending` (a parked event of another id
    holds the change; WEBHOOK_CONFIG lets 503 through `not_a_server_error` for it). The store
    is up throughout, so `store_unavailable` means a body it cannot hold: a server error."""
    if case.operation.path != WEBHOOK_PATH or response.status_code != 503:
        return None
    code = response.json()["error"]["code"]
    assert code == "change_pending", f"503 {code}: the inbox failed to store a valid event"
    return True


# For the webhook: `not_a_server_error` lets 503 by, which the check above narrows.
WEBHOOK_CONFIG = {
    "checks": {"not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx", "503"]}}
}


def webhook_checks() -> SignatureCheck:
    """The signature check the fuzzed inbox runs: RailSigner's secret."""
    return SignatureCheck([WEBHOOK_SECRET])


def ledger_document() -> dict[str, Any]:
    # Nothing connects while the app is built; the settings only have to load.
    offline = ledger_settings("postgresql://settle@127.0.0.1:1/x", "127.0.0.1:1", "a", "b")
    return create_app(None, None, offline).api.openapi()  # type: ignore[arg-type]


def webhook_document() -> dict[str, Any]:
    """The inbox's public app's document (served on no port: the rail reads none)."""
    app = create_inbox_app(
        None,  # type: ignore[arg-type]
        webhook_checks(),
        create_inbox_metrics(),
        max_body_bytes=WEBHOOK_MAX_BODY,
    )
    return app.api.openapi()


def machine_at(
    schema: schemathesis.schemas.BaseSchema, url: str, session: requests.Session | None = None
) -> type[APIStateMachine]:
    """`schema`'s state machine, calling the app at `url` (through `session`, if given)."""
    base: Any = schema.as_state_machine()
    kwargs: dict[str, Any] = {"base_url": url}
    if session is not None:
        kwargs["session"] = session

    class AtUrl(base):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return kwargs

    return AtUrl

"""The HTTP layer under the stripe package: the client settle owns, behind stripe's port.

``StripeHTTP`` carries the rail's calls over settle's HTTP/1.1 client (services.platform.http1),
a subclass of stripe's documented extension point, ``stripe.HTTPClient``: per-phase timeouts,
no redirects followed, and the transport error kept as the ``__cause__`` of every
``APIConnectionError``, which is what tells "never sent" from "sent, answer lost" (see
``sent_nothing``). stripe's own client builds every request and reads every answer.

The invariant checker's read-only listings (tools/check/rail.py) use it too.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Mapping

import stripe

from services.adapters.stripe.logs import log_only_when_heard
from services.platform.http1 import AnswerLost, HTTP1Client, NotSent

CONNECT_TIMEOUT_CAP = 3.0  # seconds; a connect that never completes sent nothing, so fail it fast
DEFAULT_CONNECTIONS = 64  # the dispatcher's rail calls in flight (DispatchPolicy.concurrent_calls)


def early_timeout(total: float) -> float:
    """The bound on connecting and on waiting for a pooled connection, for a `total` call.

    Both are cut shorter than the whole call, so that a rail that cannot be reached surfaces
    as a connect error (nothing sent, safe to retry) rather than as the caller's overall
    deadline (ambiguous).
    """
    return min(CONNECT_TIMEOUT_CAP, total / 2)


def sent_nothing(cause: BaseException | None) -> bool:
    """Whether this transport failure certainly happened before the request was written:
    settle's client says so by raising NotSent (connecting: DNS, TCP, TLS; waiting for a
    pooled connection; a URL it cannot send to), and nothing else is taken as proof."""
    return isinstance(cause, NotSent)


class StripeHTTP(stripe.HTTPClient):
    """stripe's HTTP client port over one HTTP1Client (async only, never retries a POST).

    Its connections are opened on the first call, inside the running loop, and closed by
    ``close_async``; the client is unusable afterwards. A GET is sent once more when a
    kept-alive connection turns out closed after it was written; a POST never is.
    """

    name = "settle-http1"

    def __init__(self, timeout: float, *, connections: int = DEFAULT_CONNECTIONS) -> None:
        super().__init__()
        log_only_when_heard()
        self._http = HTTP1Client(
            timeout=timeout,
            connect_timeout=early_timeout(timeout),
            connections=connections,
            ssl_context=ssl.create_default_context(cafile=stripe.ca_bundle_path),
        )

    async def request_async(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        post_data: object = None,
    ) -> tuple[bytes, int, Mapping[str, str]]:
        """Send one request; a transport failure becomes APIConnectionError caused by it."""
        body = post_data.encode() if isinstance(post_data, str) else post_data
        try:
            answer = await self._http.request(
                method.upper(), url, dict(headers), body if isinstance(body, bytes) else b""
            )
        except (NotSent, AnswerLost) as e:
            # The transport error stays as __cause__: the rail reads it to tell "never sent"
            # from "sent, answer lost". (should_retry is moot where library retries are off;
            # and stripe leaves this constructor unannotated, hence the ignore.)
            raise stripe.APIConnectionError(  # type: ignore[no-untyped-call]
                f"network error talking to the rail: {type(e).__name__}: {e}",
                should_retry=sent_nothing(e),
            ) from e
        return answer.body, answer.status, answer.headers

    def sleep_async(self, secs: float) -> Awaitable[None]:
        """Sleep `secs` (used only by stripe's retry loop, which the rail switches off)."""
        return asyncio.sleep(secs)

    async def close_async(self) -> None:
        """Close the pooled connections; the client is unusable afterwards."""
        await self._http.aclose()


class StripeAPI:
    """Stripe's client over settle's transport: `client` for the calls, `where` for messages,
    `aclose()` when done. Every part of settle that talks to Stripe (or the simulator, or
    stripe-mock) builds its client here."""

    def __init__(
        self,
        api_key: str,
        *,
        api_base: str | None,
        timeout: float,
        connections: int,
        retries: int,
    ) -> None:
        """`api_base` None is Stripe's own address; `retries` are the library's retries of a
        call whose answer was lost (0 where a call may move money). ValueError for no key."""
        if not api_key:
            raise ValueError(
                "api_key is empty: pass a Stripe secret key (sk_test_... or sk_live_...)"
            )
        self.where = api_base or "api.stripe.com"
        self.http = StripeHTTP(timeout, connections=connections)
        self.client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base.rstrip("/")} if api_base else None,
            max_network_retries=retries,
            http_client=self.http,
        )

    async def aclose(self) -> None:
        """Close the pooled connections; the client is unusable afterwards."""
        await self.http.close_async()

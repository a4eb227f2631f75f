"""The HTTP layer under the stripe package: clients that settle owns, behind stripe's port.

``StripeAiohttp`` carries the rail's calls. stripe's own ``AIOHTTPClient`` takes no per-phase
timeouts, leaves the body read outside its error handling and follows redirects; this
subclass of stripe's documented extension point, ``stripe.HTTPClient``, does neither and
keeps the transport error as the ``__cause__`` of every ``APIConnectionError``, which is
what tells "never sent" from "sent, answer lost" (see ``sent_nothing``).

The invariant checker's read-only listings (tools/check/rail.py) use it too.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Mapping

import aiohttp
import stripe

CONNECT_TIMEOUT_CAP = 3.0  # seconds; a connect that never completes sent nothing, so fail it fast
DEFAULT_CONNECTIONS = 64  # the dispatcher's rail calls in flight (DispatchPolicy.concurrent_calls)
# Idle pooled connections are dropped before the common 5 s server idle timeout (uvicorn's,
# many proxies'), so that a create is rarely written to a connection the server is closing.
KEEPALIVE_SECONDS = 4.0


def early_timeout(total: float) -> float:
    """The bound on connecting and on waiting for a pooled connection, for a `total` call.

    Both are cut shorter than the whole call, so that a rail that cannot be reached surfaces
    as a connect error (nothing sent, safe to retry) rather than as the caller's overall
    deadline (ambiguous).
    """
    return min(CONNECT_TIMEOUT_CAP, total / 2)


def aiohttp_timeout(total: float) -> aiohttp.ClientTimeout:
    """Per-phase aiohttp timeouts for a call bounded by `total` seconds.

    ``connect`` bounds the pool wait plus connecting, ``sock_connect`` the TCP and TLS
    handshake alone; both raise ``ConnectionTimeoutError``.
    """
    early = early_timeout(total)
    return aiohttp.ClientTimeout(total=total, connect=early, sock_connect=early)


# Transport failures that happen before a single request byte reaches the rail: connecting
# (DNS, TCP, TLS, proxy), waiting for a pooled connection, or a URL that cannot be sent to.
NOT_SENT: tuple[type[Exception], ...] = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
    aiohttp.InvalidURL,
    aiohttp.NonHttpUrlClientError,
)


def sent_nothing(cause: BaseException | None) -> bool:
    """Whether this transport failure certainly happened before the request was written.

    A redirect's bad URL is excluded: the first request went out. (Redirects are not
    followed here, so that case cannot arise from StripeAiohttp; the rule guards the class.)
    """
    return isinstance(cause, NOT_SENT) and not isinstance(cause, aiohttp.RedirectClientError)


class StripeAiohttp(stripe.HTTPClient):
    """stripe's HTTP client port over one aiohttp session (async only, never retries).

    The session is opened on the first call, inside the running loop, and closed by
    ``close_async``; the client is unusable afterwards. aiohttp may resend a GET once when
    a pooled keep-alive connection turns out closed; it never resends a POST.
    """

    name = "aiohttp"

    def __init__(self, timeout: float, *, connections: int = DEFAULT_CONNECTIONS) -> None:
        super().__init__()
        if connections < 1:
            raise ValueError(f"connections must be at least 1, e.g. 64; got {connections}")
        self._timeout = aiohttp_timeout(timeout)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            if self._closed:
                raise RuntimeError("the Stripe HTTP client is closed; build a new rail")
            connector = aiohttp.TCPConnector(
                limit=self._connections,
                keepalive_timeout=KEEPALIVE_SECONDS,
                ssl=ssl.create_default_context(cafile=stripe.ca_bundle_path),
            )
            # trust_env stays off: no proxy or netrc credentials picked up from the host.
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def request_async(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        post_data: object = None,
    ) -> tuple[bytes, int, Mapping[str, str]]:
        """Send one request; a transport failure becomes APIConnectionError caused by it."""
        session = self._open()
        body = post_data.encode() if isinstance(post_data, str) else post_data
        data = body if isinstance(body, bytes) else None
        try:
            async with session.request(
                method, url, headers=headers, data=data, allow_redirects=False
            ) as response:
                return await response.read(), response.status, response.headers
        except (aiohttp.ClientError, TimeoutError) as e:
            # The aiohttp error stays as __cause__: the rail reads it to tell "never sent" from
            # "sent, answer lost". (should_retry is moot: library retries are off; and stripe
            # leaves this constructor unannotated, hence the ignore.)
            raise stripe.APIConnectionError(  # type: ignore[no-untyped-call]
                f"network error talking to the rail: {type(e).__name__}: {e}",
                should_retry=sent_nothing(e),
            ) from e

    def sleep_async(self, secs: float) -> Awaitable[None]:
        """Sleep `secs` (used only by stripe's retry loop, which settle switches off)."""
        return asyncio.sleep(secs)

    async def close_async(self) -> None:
        """Close the session and its pooled connections, if one was ever opened."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()

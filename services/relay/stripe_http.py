"""The HTTP layer under the stripe package: an httpx.AsyncClient that settle owns.

stripe's own ``HTTPXClient`` builds its httpx client internally, so it takes neither a
transport (tests would need patching) nor per-phase timeouts. This subclass of stripe's
documented extension point, ``stripe.HTTPClient``, takes the httpx client from us instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping

import httpx
import stripe

CONNECT_TIMEOUT_CAP = 3.0  # seconds; a connect that never completes sent nothing, so fail it fast


def httpx_timeout(total: float) -> httpx.Timeout:
    """Per-phase httpx timeouts for a call bounded by `total` seconds.

    Connecting and waiting for a pooled connection are cut shorter than the whole call, so
    that a rail that cannot be reached surfaces as a connect error (nothing sent, safe to
    retry) rather than as the caller's overall deadline (ambiguous).
    """
    early = min(CONNECT_TIMEOUT_CAP, total / 2)
    return httpx.Timeout(total, connect=early, pool=early)


class StripeHttpx(stripe.HTTPClient):
    """stripe's HTTP client port over an httpx.AsyncClient (async only, never retries)."""

    name = "httpx"

    def __init__(self, client: httpx.AsyncClient) -> None:
        super().__init__()
        self._client = client

    async def request_async(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        post_data: object = None,
    ) -> tuple[bytes, int, Mapping[str, str]]:
        """Send one request; a transport failure becomes APIConnectionError caused by it."""
        content = post_data if isinstance(post_data, str | bytes) else None
        try:
            response = await self._client.request(method, url, headers=headers, content=content)
        except httpx.RequestError as e:
            # The httpx error stays as __cause__: the rail reads it to tell "never sent" from
            # "sent, answer lost". (should_retry is moot: library retries are off; and stripe
            # leaves this constructor unannotated, hence the ignore.)
            raise stripe.APIConnectionError(  # type: ignore[no-untyped-call]
                f"network error talking to the rail: {type(e).__name__}: {e}",
                should_retry=isinstance(e, NOT_SENT),
            ) from e
        return response.content, response.status_code, response.headers

    def sleep_async(self, secs: float) -> Awaitable[None]:
        """Sleep `secs` (used only by stripe's retry loop, which settle switches off)."""
        return asyncio.sleep(secs)

    async def close_async(self) -> None:
        """Close the underlying httpx client and its pooled connections."""
        await self._client.aclose()


# Transport failures that happen before a single request byte reaches the rail: connecting
# (TCP or TLS), waiting for a pooled connection, or a URL scheme httpx cannot speak.
NOT_SENT: tuple[type[httpx.TransportError], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
)

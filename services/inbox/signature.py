"""Stripe-Signature checking, against every active secret.

The header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t." + body>[,v1=...]`; it is read as
the stripe package's `WebhookSignature.verify_header` reads it (the conformance test holds
the two side by side), but parsed once for all secrets, with each secret's key hashed once at
start-up, and the body hashed as the bytes it came in: the library's version costs several
times the HMAC itself on every webhook.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Sequence
from hashlib import sha256

from services.inbox.errors import BadSignature

TOLERANCE_SECONDS = 300
SCHEME = "v1"


class SignatureCheck:
    """Accepts a body signed by any of `secrets` (several during a rotation) within tolerance."""

    def __init__(
        self,
        secrets: Sequence[str],
        tolerance: int = TOLERANCE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not secrets or not all(s.strip() for s in secrets):
            raise ValueError("secrets: pass at least one non-empty signing secret")
        # Keyed once: copying a keyed HMAC skips hashing the key again on every webhook.
        self._keys = tuple(hmac.new(s.encode(), digestmod=sha256) for s in secrets)
        self._tolerance = tolerance
        self._clock = clock

    def verify(self, body: bytes, header: str | None) -> None:
        """Return if `header` signs `body`; raise BadSignature (code says why) otherwise."""
        if not header:
            raise BadSignature("send the Stripe-Signature header", code="missing_signature")
        try:
            body.decode("utf-8")  # Stripe signs text: a body that is not UTF-8 was not signed
        except UnicodeDecodeError as e:
            raise BadSignature("the body is not UTF-8, so it cannot be signed") from e
        timestamp, signatures = _parsed(header)
        if timestamp is None or not signatures:
            raise BadSignature("no active secret signed this body")
        prefix = b"%d." % timestamp
        if not any(_signs(key, prefix, body, signatures) for key in self._keys):
            raise BadSignature("no active secret signed this body")
        # Only a body one secret signed, but too long ago, is stale; anything else is invalid.
        if self._tolerance and timestamp < self._clock() - self._tolerance:
            raise BadSignature(
                f"the signature is older than {self._tolerance} s", code="stale_signature"
            )


def _parsed(header: str) -> tuple[int | None, list[bytes]]:
    """The header's first timestamp and its v1 signatures; (None, []) when an item that names
    either has no value, or the timestamp is not an integer, as the library refuses them."""
    timestamp: int | None = None
    signatures: list[bytes] = []
    for item in header.split(","):
        name, equals, value = item.partition("=")
        if name not in ("t", SCHEME):
            continue
        if not equals:
            return None, []
        value = value.partition("=")[0]
        if name == SCHEME:
            signatures.append(value.encode())
        elif timestamp is None:
            try:
                timestamp = int(value)
            except ValueError:
                return None, []
    return timestamp, signatures


def _signs(key: hmac.HMAC, prefix: bytes, body: bytes, signatures: list[bytes]) -> bool:
    mac = key.copy()
    mac.update(prefix)
    mac.update(body)
    expected = mac.hexdigest().encode()
    # As bytes: a header is any Latin-1 text, and comparing str refuses non-ASCII.
    return any(hmac.compare_digest(expected, s) for s in signatures)

"""Stripe-Signature checking with the stripe package, against every active secret."""

from __future__ import annotations

from collections.abc import Sequence

import stripe

from services.inbox.errors import BadSignature

TOLERANCE_SECONDS = 300


class SignatureCheck:
    """Accepts a body signed by any of `secrets` (several during a rotation) within tolerance."""

    def __init__(self, secrets: Sequence[str], tolerance: int = TOLERANCE_SECONDS) -> None:
        if not secrets or not all(s.strip() for s in secrets):
            raise ValueError("secrets: pass at least one non-empty signing secret")
        self._secrets = tuple(secrets)
        self._tolerance = tolerance

    def verify(self, body: bytes, header: str | None) -> None:
        """Return if `header` signs `body`; raise BadSignature (code says why) otherwise."""
        if not header:
            raise BadSignature("send the Stripe-Signature header", code="missing_signature")
        try:
            payload = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadSignature("the body is not UTF-8, so it cannot be signed") from e
        for secret in self._secrets:
            if self._signed(payload, header, secret, self._tolerance):
                return
        # Only a body one secret signed, but too long ago, is stale; anything else is invalid.
        if any(self._signed(payload, header, s, None) for s in self._secrets):
            raise BadSignature(
                f"the signature is older than {self._tolerance} s", code="stale_signature"
            )
        raise BadSignature("no active secret signed this body")

    @staticmethod
    def _signed(payload: str, header: str, secret: str, tolerance: int | None) -> bool:
        try:
            stripe.WebhookSignature.verify_header(payload, header, secret, tolerance)
        except stripe.SignatureVerificationError:
            return False
        return True

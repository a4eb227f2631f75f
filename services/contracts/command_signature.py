"""Signed settlement commands: proof that a command on Kafka comes from its tenant.

A producer signs the exact bytes of the Kafka record's value, as Stripe signs webhooks:

    settle-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, b"<t>." + value)>

under the tenant's own signing secret. The header may carry several `v1=` entries (one per
secret while a secret is rotated); any one matching a secret of the command's tenant proves
it. The timestamp bounds how long a captured command can be replayed (TOLERANCE_SECONDS
either side of when the broker appended the record, see services/ledger/command_auth.py);
within that window a replay carries the original's idempotency key, so it gets the
original's answer and never books a second settlement.

Pure code: no Kafka, no clock; the caller passes the record's bytes and the time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from enum import StrEnum

SIGNATURE_HEADER = "settle-signature"
TOLERANCE_SECONDS = 300
SCHEME = "v1"
MAX_SIGNATURES = 8  # v1 entries read from one header: a rotation needs two


class CommandSigning(StrEnum):
    """Whether a command must be signed (`required`) or only checked when signed (`optional`)."""

    REQUIRED = "required"
    OPTIONAL = "optional"


class SignatureRefusal(StrEnum):
    """Why a command's signature proves nothing; the dead-letter reason."""

    MISSING = "signature_missing"
    INVALID = "signature_invalid"
    EXPIRED = "signature_expired"


def signed_payload(value: bytes, timestamp: int) -> bytes:
    """The bytes the HMAC covers: the decimal timestamp, a dot, and the record's value."""
    return f"{timestamp}.".encode() + value


def signature(secret: str, value: bytes, timestamp: int) -> str:
    """The hex HMAC-SHA256 of `value` at `timestamp` under `secret`."""
    payload = signed_payload(value, timestamp)
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def signature_header(secrets: Sequence[str], value: bytes, timestamp: int) -> bytes:
    """The `settle-signature` header value signing `value` under each of `secrets`."""
    entries = [f"{SCHEME}={signature(s, value, timestamp)}" for s in secrets]
    return ",".join([f"t={timestamp}", *entries]).encode()


def signed_headers(secrets: Sequence[str], value: bytes, now: int) -> list[tuple[str, bytes]]:
    """The Kafka headers that sign `value` at `now` under `secrets`; none without a secret."""
    return [(SIGNATURE_HEADER, signature_header(secrets, value, now))] if secrets else []


def verify(
    header: bytes | None,
    value: bytes,
    secrets: Sequence[str],
    now: int,
    tolerance: int = TOLERANCE_SECONDS,
) -> SignatureRefusal | None:
    """None when `header` signs `value` under one of `secrets` within `tolerance` seconds of
    `now`; else why not. Expired is said only of a signature that is otherwise good."""
    if header is None:
        return SignatureRefusal.MISSING
    parsed = _parse(header)
    if parsed is None:
        return SignatureRefusal.INVALID
    timestamp, given = parsed
    expected = [signature(secret, value, timestamp) for secret in secrets]
    # Every pair compared, in constant time each: the time taken says nothing of how close
    # a forged signature came.
    matched = False
    for candidate in given:
        for good in expected:
            matched |= hmac.compare_digest(candidate, good)
    if not matched:
        return SignatureRefusal.INVALID
    if abs(now - timestamp) > tolerance:
        return SignatureRefusal.EXPIRED
    return None


def _parse(header: bytes) -> tuple[int, list[str]] | None:
    try:
        text = header.decode("ascii")
    except UnicodeDecodeError:
        return None
    timestamp: int | None = None
    given: list[str] = []
    for item in text.split(","):
        name, sep, content = item.strip().partition("=")
        if not sep:
            return None
        if name == "t" and _is_seconds(content) and timestamp is None:
            timestamp = int(content)
        elif name == SCHEME:
            given.append(content)
    # Unknown schemes are ignored (a later scheme may be added beside v1), as Stripe does.
    if timestamp is None or not given or len(given) > MAX_SIGNATURES:
        return None
    return timestamp, given


def _is_seconds(text: str) -> bool:
    # Bounded before int(): a timestamp of thousands of digits is refused, not converted.
    return text.isascii() and text.isdigit() and len(text) <= 12

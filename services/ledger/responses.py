"""The exact bytes of the ledger's response bodies.

A retried request gets the first response byte for byte, so bodies are rendered once from
explicit values into canonical JSON (sorted keys, no whitespace) and stored. Error bodies are
the edge's (`services.platform.edge.error_body`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache

import orjson


def settlement_body(
    *,
    settlement_id: str,
    reference: str,
    payee: str,
    destination: str,
    amount: int,
    currency: str,
    rail: str,
    metadata: Mapping[str, str],
    status: str,
    rail_idempotency_key: str,
    created_at: datetime,
    rail_reference: str | None = None,
) -> bytes:
    """The 201 body of an accepted settlement as canonical JSON bytes (UTF-8)."""
    settlement = {
        "object": "settlement",
        "id": settlement_id,
        "reference": reference,
        "payee": payee,
        "destination": destination,
        "amount": amount,
        "currency": currency,
        "rail": rail,
        "metadata": dict(metadata),
        "status": str(status),
        "rail_idempotency_key": rail_idempotency_key,
        "rail_reference": rail_reference,
        "created_at": timestamp(created_at),
    }
    return canonical_json(settlement)


def canonical_json(value: object) -> bytes:
    """`value` as canonical JSON: sorted keys, no whitespace, UTF-8 unescaped.

    Byte for byte what `json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False).encode()` gives (stored fingerprints were made that way), at a
    fraction of the CPU."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


# A batch renders one moment for every settlement it books.
@lru_cache(maxsize=64)
def timestamp(moment: datetime) -> str:
    """`moment` as ISO 8601 UTC with milliseconds, e.g. "2026-11-25T21:59:35.123Z"."""
    if moment.tzinfo is None:
        raise ValueError("timestamp needs an aware datetime; pass one with tzinfo=UTC")
    # Truncated, not rounded, so a rendering never lands in the next second or day.
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"

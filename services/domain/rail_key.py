"""The idempotency key settle sends to the rail for a settlement (SPEC 4.2).

The key is SHA-256 over the settlement's identity and content, so a relay restored from a backup
derives the very key it sent before and the rail deduplicates the re-issue. The fields are
encoded as a compact JSON array behind a version tag: JSON quoting keeps the fields apart (no
"ab"+"c" = "a"+"bc" collision) and the tag lets a later scheme never collide with this one.
"""

from __future__ import annotations

import hashlib
import re
import uuid

import orjson

from services.domain.money import is_amount, is_currency

SCHEME = "settle.rail-key.v1"
_CANONICAL_ID = re.compile("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def rail_idempotency_key(
    tenant: str, settlement_id: str, destination: str, amount: int, currency: str
) -> str:
    """The 64 lower-case hex character rail idempotency key of one settlement."""
    if not is_amount(amount):
        raise ValueError(f"amount must be an int of minor units in 1 .. 2**63-1, not {amount!r}")
    if not is_currency(currency):
        raise ValueError(f"currency must be an ISO 4217 code, not {currency!r}")
    # The canonical UUID text, so "ABC..." and "{abc...}" spellings of one id give one key;
    # an id already in that form (as settle mints them) is its own canonical text.
    canonical_id = settlement_id
    if not _CANONICAL_ID.fullmatch(settlement_id):
        canonical_id = str(uuid.UUID(settlement_id))
    fields = [SCHEME, tenant, canonical_id, destination, amount, currency]
    # orjson writes exactly what json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    # did for every string and int here (the v1 keys were made that way), in less CPU.
    return hashlib.sha256(orjson.dumps(fields)).hexdigest()

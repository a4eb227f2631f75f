"""Validation of settlement requests from HTTP and Kafka into one canonical SettlementRequest.

Both ingress paths end in `_settlement`, so one rule set decides what is valid and one canonical
form decides the fingerprint: an HTTP request and a Kafka command with the same tenant, key and
content are the same request. Limits, and why:

    body                        at most MAX_BODY_BYTES (16 KiB) of UTF-8 JSON; 413 above
    reference, payee,           1..255 characters, no control characters (the database's
    destination                 CHECK limits; control characters only ever hide mistakes)
    amount                      a JSON number that is a whole count of minor units, 1 .. 10**15
                                (100, 100.0 and 1e2 are all 100); never parsed through a float.
                                The cap keeps every balance shard far from bigint overflow
                                (`domain.money.MAX_SETTLEMENT_AMOUNT` says why)
    currency                    an active ISO 4217 code in upper case, exactly as written
    rail                        null or a rail settle drives ("sim", "stripe")
    metadata                    at most 50 string pairs, keys 1..40 characters without "[" or
                                "]", values at most 500 characters: Stripe's limits, so the map
                                can be passed to the rail unchanged
    tenant                      from the caller (the API token, or the Kafka record), never the
                                HTTP body; 1..64 characters, no ":" (it separates account ids)

Unknown top-level fields are refused so a misspelt optional field cannot silently drop data.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from typing import Any

from services.domain.money import MAX_SETTLEMENT_AMOUNT, is_currency
from services.domain.trace_context import TraceContext
from services.ledger.errors import InvalidRequest
from services.ledger.model import SettlementRequest
from services.ledger.responses import canonical_json
from services.platform.config import RailKind

MAX_BODY_BYTES = 16_384
MAX_TEXT_CHARS = 255
MAX_TENANT_CHARS = 64
MAX_KEY_CHARS = 255
MAX_METADATA_KEYS = 50
MAX_METADATA_KEY_CHARS = 40
MAX_METADATA_VALUE_CHARS = 500

# Both ingress paths fingerprint as the HTTP request that creates a settlement.
METHOD = "POST"
PATH = "/v1/settlements"

RAILS = frozenset(kind.value for kind in RailKind)
BODY_FIELDS = ("reference", "payee", "destination", "amount", "currency", "rail", "metadata")
COMMAND_FIELDS = ("tenant", "idempotency_key", *BODY_FIELDS)
_OPTIONAL = frozenset({"rail", "metadata"})

# C0, DEL and C1 controls, and lone surrogates, which no UTF-8 encoder or database accepts.
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# Stripe refuses square brackets in metadata keys: it reads them as nested parameters.
_FORBIDDEN_KEY = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\\[\\]]")
_KEY = re.compile("[\x20-\x7e]+")


def validate_idempotency_key(value: str | None, field: str = "Idempotency-Key") -> str:
    """The key if it is 1..255 printable ASCII characters, no edge spaces; else InvalidRequest."""
    return _idempotency_key(value, field)


def parse_settlement_body(
    tenant: str, idempotency_key: str, raw: bytes, trace: TraceContext | None = None
) -> SettlementRequest:
    """The validated, fingerprinted request of a POST /v1/settlements body, to be booked
    under `trace`; else InvalidRequest."""
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidRequest(
            f"body is {len(raw)} bytes; send at most {MAX_BODY_BYTES}",
            code="body_too_large",
            status=413,
        )
    fields = _load_object(raw)
    unknown = sorted(set(fields) - set(BODY_FIELDS))
    if unknown:
        hint = " (it comes from the API token)" if unknown[0] == "tenant" else ""
        raise InvalidRequest(
            f"unknown field {unknown[0]!r}{hint}", code="unknown_field", field=unknown[0]
        )
    return _settlement(tenant, validate_idempotency_key(idempotency_key), fields, trace)


def parse_settlement_command(
    record: Mapping[str, object], trace: TraceContext | None = None
) -> SettlementRequest:
    """The validated, fingerprinted request of a decoded SettlementCommand, to be booked under
    `trace`; else InvalidRequest."""
    unknown = sorted(set(record) - set(COMMAND_FIELDS))
    if unknown:
        raise InvalidRequest(
            f"unknown field {unknown[0]!r}", code="unknown_field", field=unknown[0]
        )
    if "tenant" not in record:
        raise InvalidRequest("tenant is required", code="missing_field", field="tenant")
    key = _idempotency_key(record.get("idempotency_key"), "idempotency_key")
    request = _settlement(record.get("tenant"), key, record, trace)
    # No command may carry what an HTTP body could not.
    if len(canonical_body(request)) > MAX_BODY_BYTES:
        raise InvalidRequest(
            f"command is larger than {MAX_BODY_BYTES} bytes", code="body_too_large", status=413
        )
    return request


def body_fields(request: SettlementRequest) -> dict[str, object]:
    """The request's body in canonical form: null rail and empty metadata are left out."""
    body: dict[str, object] = {
        "reference": request.reference,
        "payee": request.payee,
        "destination": request.destination,
        "amount": request.amount,
        "currency": request.currency,
    }
    if request.rail is not None:
        body["rail"] = request.rail
    if request.metadata:
        body["metadata"] = dict(request.metadata)
    return body


def canonical_body(request: SettlementRequest) -> bytes:
    """The canonical JSON bytes of the request's body: sorted keys, compact, UTF-8."""
    return canonical_json(body_fields(request))


def fingerprint(tenant: str, method: str, path: str, body: Mapping[str, object]) -> bytes:
    """SHA-256 (32 bytes) over the canonical JSON of tenant, method, path and `body_fields`."""
    document = {"tenant": tenant, "method": method, "path": path, "body": dict(body)}
    return hashlib.sha256(canonical_json(document)).digest()


class _DuplicateKey(ValueError):
    pass


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of duplicate keys; two values for one field is ambiguous.
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _load_object(raw: bytes) -> dict[str, object]:
    try:
        # Every number, NaN and Infinity become Decimal: exact, and never a float.
        value = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_object_pairs,
            parse_float=Decimal,
            parse_int=Decimal,
            parse_constant=Decimal,
        )
    except _DuplicateKey as e:
        raise InvalidRequest(f"key {e.args[0]!r} appears twice", code="malformed_json") from e
    except (ValueError, RecursionError) as e:
        raise InvalidRequest(f"body is not UTF-8 JSON: {e}", code="malformed_json") from e
    if not isinstance(value, dict):
        raise InvalidRequest("body must be a JSON object", code="malformed_json")
    return value


def _settlement(
    tenant: object, key: str, fields: Mapping[str, object], trace: TraceContext | None
) -> SettlementRequest:
    for name in BODY_FIELDS:
        if name not in fields and name not in _OPTIONAL:
            raise InvalidRequest(f"{name} is required", code="missing_field", field=name)
    request = SettlementRequest(
        tenant=_tenant(tenant),
        idempotency_key=key,
        reference=_text(fields["reference"], "reference"),
        payee=_text(fields["payee"], "payee"),
        destination=_text(fields["destination"], "destination"),
        amount=_amount(fields["amount"]),
        currency=_currency(fields["currency"]),
        rail=_rail(fields.get("rail")),
        metadata=_metadata(fields.get("metadata", {})),
    )
    digest = fingerprint(request.tenant, METHOD, PATH, body_fields(request))
    return replace(request, fingerprint=digest, trace=trace)


def _idempotency_key(value: object, field: str) -> str:
    if value is None:
        raise InvalidRequest(f"{field} is required", code="missing_idempotency_key", field=field)
    if (
        not isinstance(value, str)
        or len(value) > MAX_KEY_CHARS
        or not _KEY.fullmatch(value)
        or value != value.strip(" ")
    ):
        raise InvalidRequest(
            f"{field} must be 1 to {MAX_KEY_CHARS} printable ASCII characters"
            " without leading or trailing spaces",
            code="invalid_idempotency_key",
            field=field,
        )
    return value


def _tenant(value: object) -> str:
    if isinstance(value, str) and ":" in value:
        raise InvalidRequest("tenant must not contain ':'", code="invalid_field", field="tenant")
    return _text(value, "tenant", MAX_TENANT_CHARS)


def _text(value: object, field: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= max_chars or _FORBIDDEN.search(value):
        raise InvalidRequest(
            f"{field} must be a string of 1 to {max_chars} characters without control characters",
            code="invalid_field",
            field=field,
        )
    return value


def _amount(value: object) -> int:
    def invalid(why: str) -> InvalidRequest:
        return InvalidRequest(f"amount {why}", code="invalid_amount", field="amount")

    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise invalid("must be a JSON number of minor units, e.g. 1050 for 10.50")
    if isinstance(value, Decimal) and not value.is_finite():
        raise invalid("must be a finite number")
    # Range first: it bounds the number before any arithmetic on a huge exponent.
    if not 0 < value <= MAX_SETTLEMENT_AMOUNT:
        raise invalid(f"must be greater than 0 and at most {MAX_SETTLEMENT_AMOUNT}")
    if isinstance(value, Decimal):
        if value != value.to_integral_value():
            raise invalid("must be a whole number of minor units")
        return int(value)
    return value


def _currency(value: object) -> str:
    if isinstance(value, str) and is_currency(value):
        return value
    hint = ""
    if isinstance(value, str) and is_currency(value.upper()):
        hint = f"; write {value.upper()!r}"
    raise InvalidRequest(
        f"currency must be an active ISO 4217 code in upper case, e.g. 'USD'{hint}",
        code="invalid_currency",
        field="currency",
    )


def _rail(value: object) -> str | None:
    if value is None or (isinstance(value, str) and value in RAILS):
        return value
    raise InvalidRequest(
        f"rail must be null or one of {sorted(RAILS)}", code="invalid_field", field="rail"
    )


def _metadata(value: object) -> dict[str, str]:
    def invalid(why: str, field: str = "metadata") -> InvalidRequest:
        return InvalidRequest(f"{field} {why}", code="invalid_metadata", field=field)

    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise invalid("must be an object of string keys to string values")
    if len(value) > MAX_METADATA_KEYS:
        raise invalid(f"has {len(value)} keys; send at most {MAX_METADATA_KEYS}")
    # Sorted, so the error reported and the map stored do not depend on the sender's order.
    for key in sorted(value):
        item = value[key]
        field = f"metadata.{key}"
        if not 1 <= len(key) <= MAX_METADATA_KEY_CHARS or _FORBIDDEN_KEY.search(key):
            raise invalid(
                f"key must be 1 to {MAX_METADATA_KEY_CHARS} characters"
                " without control characters, '[' or ']'",
                field,
            )
        if not isinstance(item, str) or len(item) > MAX_METADATA_VALUE_CHARS:
            raise invalid(
                f"must be a string of at most {MAX_METADATA_VALUE_CHARS} characters", field
            )
        if _FORBIDDEN.search(item):
            raise invalid("must not contain control characters", field)
    return {key: value[key] for key in sorted(value)}

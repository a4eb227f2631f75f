"""What the inbox's OpenAPI document says of `POST /v1/webhooks/stripe`: the header, the body
(exactly what `events.parse_event` reads as an event), and every answer.

The public port serves no document (the rail reads none); it is built from the app
(`create_app(...).api.openapi()`) for the contract tests and for whoever points a rail at us.
"""

from __future__ import annotations

from typing import Any

from services.domain.rail_event import SIGNALS
from services.inbox.events import MAX_MINOR_UNITS, MAX_TEXT_CHARS
from services.inbox.signature import TOLERANCE_SECONDS
from services.platform.api_docs import error_entry

OPERATION_ID = "receive_stripe_webhook"
# orjson, which reads the body, reads any number that rounds to a finite double (an integer
# past 64 bits too, as that double) and refuses the rest: below this bound, exactly.
_HUGE = 2**1024 - 2**970
_NUMBER = {"exclusiveMinimum": -_HUGE, "exclusiveMaximum": _HUGE}
_NO_NUL = "^[^\\x00]*$"
_TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS, "pattern": _NO_NUL}
_OBJECT_ID = {"id": {"type": "string", "minLength": 1}}
_BACK = "amount_reversed"
_BACK_UNITS = {_BACK: {"type": "integer", "minimum": 1, "maximum": MAX_MINOR_UNITS}}


def _anything() -> dict[str, Any]:
    """Any JSON value orjson reads: a number within a double's range, at any depth."""
    value: dict[str, Any] = {"$ref": "#/components/schemas/RailJsonValue"}
    return {
        "anyOf": [
            {"type": ["null", "boolean", "string"]},
            {"type": "number", **_NUMBER},
            {"type": "array", "items": value},
            {"type": "object", "additionalProperties": value},
        ]
    }


def _object_with(inner: dict[str, Any]) -> dict[str, Any]:
    """`data.object` (required, an object) holding what `inner` says."""
    obj = {"type": "object", **inner}
    return {
        "required": ["data"],
        "properties": {
            "data": {"type": "object", "required": ["object"], "properties": {"object": obj}}
        },
    }


def _in_object(properties: dict[str, Any]) -> dict[str, Any]:
    # `data.object`'s `properties`, when `data` and `data.object` are objects at all.
    return {"properties": {"object": {"properties": properties}}}


def _when(event_type: str | list[str], then: dict[str, Any]) -> dict[str, Any]:
    types = event_type if isinstance(event_type, list) else [event_type]
    return {"if": {"properties": {"type": {"enum": types}}}, "then": then}


def event_schema() -> dict[str, Any]:
    """The JSON Schema of a body the inbox reads as an event (others are `malformed_event`)."""
    value: dict[str, Any] = {"$ref": "#/components/schemas/RailJsonValue"}
    return {
        "title": "RailEvent",
        "description": (
            "A Stripe (or rail simulator) event, signed as sent. Fields beyond these are kept "
            "as sent. A `payout.failed` whose `data.object.arrival_date` is before `created` "
            "reports money back: its `data.object.amount` must then be a positive integer "
            f"of at most {MAX_MINOR_UNITS}. An integer may be written 100 or 100.0."
        ),
        "type": "object",
        "required": ["id", "type"],
        "properties": {
            "id": {**_TEXT, "description": "The rail's event id, e.g. `evt_...`."},
            "type": {**_TEXT, "description": "e.g. `transfer.created`."},
            "created": {"type": "integer", **_NUMBER, "description": "Unix seconds."},
        },
        "additionalProperties": value,
        "allOf": [
            # A type with a signal names the transfer or payout it is about.
            _when(sorted(SIGNALS), _object_with({"required": ["id"], "properties": _OBJECT_ID})),
            # Whatever the type, an object id (stored as text) holds no NUL.
            {"properties": {"data": _in_object({"id": {"pattern": _NO_NUL}})}},
            # Minor units come back in all: required on a SEPA return, optional on a reversal.
            _when("sepa.returned", _object_with({"required": [_BACK], "properties": _BACK_UNITS})),
            _when("transfer.reversed", _object_with({"properties": _BACK_UNITS})),
        ],
    }


def components() -> dict[str, Any]:
    """The schemas the webhook's document refers to by name."""
    return {"RailJsonValue": _anything()}


_SIGNATURE = (
    '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "t." + body>[,v1=...]`, as Stripe signs. '
    f"Refused with 400 unless an active secret signed the body in the last {TOLERANCE_SECONDS} s."
)
_RECEIVED = {
    "type": "object",
    "required": ["received", "duplicate"],
    "additionalProperties": False,
    "properties": {
        "received": {"type": "string", "description": "The event's id."},
        "duplicate": {"type": "boolean", "description": "Stored before, under this id or change."},
        "status": {
            "type": "string",
            "enum": ["received", "ignored"],
            "description": "Only when stored now: `received` to apply, `ignored` if no signal.",
        },
    },
}


def webhook_extra(max_body_bytes: int) -> dict[str, Any]:
    """The OpenAPI operation fields the webhook route adds to what FastAPI generates."""
    return {
        "parameters": [
            {
                "name": "Stripe-Signature",
                "in": "header",
                "required": True,
                "description": _SIGNATURE,
                "schema": {"type": "string", "minLength": 1},
            }
        ],
        "requestBody": {
            "required": True,
            "description": f"At most {max_body_bytes} bytes, UTF-8.",
            "content": {"application/json": {"schema": event_schema()}},
        },
    }


def webhook_responses() -> dict[int | str, dict[str, Any]]:
    """Every answer of the webhook; a 200's body may be sent again (a redelivery)."""
    redelivered = {"operationId": OPERATION_ID, "requestBody": "$request.body"}
    return {
        200: {
            "description": "Stored (or stored before): the rail may stop sending it.",
            "content": {"application/json": {"schema": _RECEIVED}},
            "links": {"Redelivered": redelivered},
        },
        400: error_entry(
            "`missing_signature`, `invalid_signature` or `stale_signature` (nothing stored),"
            " or `malformed_event` (signed, but not an event: stored `rejected`)."
        ),
        413: error_entry("`body_too_large`: nothing was read past the limit."),
        503: error_entry(
            "`store_unavailable` or `change_pending`; the rail sends it again.", retry_after=True
        ),
    }

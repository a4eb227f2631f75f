"""What an operator's request carries, read one way by the HTTP routes and the console: a
choice among named values, a whole number (a cursor), a JSON body, a reason; and the JSON
answer of the HTTP routes. Each refusal is a BadRequest naming the field (ReasonMissing for a
reason)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal
from enum import StrEnum
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from services.domain.keyset import parse_id
from services.operations.errors import BadRequest, ReasonMissing
from services.platform.edge import JSON, read_capped_body

MAX_BODY = 16_384
E = TypeVar("E", bound=StrEnum)


def choice(kinds: Iterable[E], value: str | None, name: str) -> E | None:
    """The one of `kinds` whose value is `value` (None when not given); BadRequest
    (`invalid_<name>`) naming the allowed values otherwise."""
    return None if value is None else one_of(kinds, value, name)


def one_of(kinds: Iterable[E], value: object, name: str, code: str | None = None) -> E:
    """The one of `kinds` whose value is `value`; BadRequest (`code`, else `invalid_<name>`)
    naming the allowed values otherwise."""
    allowed = list(kinds)
    for kind in allowed:
        if kind.value == value:
            return kind
    names = ", ".join(k.value for k in allowed)
    raise BadRequest(f"{name} must be one of {names}", code=code or f"invalid_{name}", field=name)


def whole_number(value: str | None, name: str, default: int = 0) -> int:
    """A whole number (a keyset cursor, a limit) from the query, `default` when not given;
    BadRequest (`invalid_<name>`) when not one."""
    if value is None:
        return default
    parsed = parse_id(value)
    if parsed is None:
        raise BadRequest(f"{name} must be a whole number", code=f"invalid_{name}", field=name)
    return parsed


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (empty when there is no body), at most MAX_BODY bytes; a
    number with a fraction or an exponent is read exactly (a Decimal), never as a float."""
    try:
        body = json.loads(await read_capped_body(request, MAX_BODY) or b"{}", parse_float=Decimal)
    except ValueError as e:
        raise BadRequest("the body must be a JSON object", code="invalid_body") from e
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", code="invalid_body")
    return body


def storable(text: str) -> bool:
    """Whether PostgreSQL can keep `text`: no NUL, no lone surrogate (JSON may escape both)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def reason(body: dict[str, Any]) -> str:
    """The body's `reason`; ReasonMissing when it is absent or blank, BadRequest
    (`invalid_reason`) when it is no text PostgreSQL can keep."""
    given = body.get("reason")
    if not isinstance(given, str) or not given.strip():
        raise ReasonMissing()
    if not storable(given):
        raise BadRequest("reason must be text without NUL", code="invalid_reason", field="reason")
    return given


def optional_text(body: dict[str, Any], name: str) -> str | None:
    """The body's `name` when given (text), None when absent; BadRequest (`invalid_<name>`)
    when it is given as anything but text PostgreSQL can keep."""
    given = body.get(name)
    if name in body and not (isinstance(given, str) and storable(given)):
        raise BadRequest(f"{name} must be text without NUL", code=f"invalid_{name}", field=name)
    return given


def json_response(document: object, status: int = 200) -> Response:
    """`document` as the HTTP routes answer it: JSON, keys sorted."""
    return Response(json.dumps(document, sort_keys=True), status, media_type=JSON)
